package config

import (
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"
)

// Config is the whole docs/configuration.md schema with defaults applied; see the package documentation for what
// each key does and which keys are accepted without effect yet.
type Config struct {
	Store      string // expanded and absolute (a backend prefix, if any, kept in front)
	ReadOnly   bool
	FUSE       FUSE
	Cache      Cache
	Writer     Writer
	Compaction Compaction
	Pruner     Pruner
	Spill      Spill
	SQLite     SQLite
	Fleet      Fleet
}

// FUSE holds the kernel-facing timings; they bound how stale a view can look to a reader.
type FUSE struct {
	EntryTimeout    time.Duration
	AttrTimeout     time.Duration
	RefreshInterval time.Duration
	AllowOther      bool
}

// Cache holds the LRU byte budgets that keep the mount's memory bounded (docs/architecture.md#principles).
type Cache struct {
	SessionsBytes int64
	ViewsBytes    int64
	// Index turns on the persistent per-revision index (viewcache/index.go) behind the LRUs: it remembers
	// each session's verdict and its views' sizes and bytes per artifact revision, so that a stat after an
	// eviction or a remount decodes nothing. Off, the mount keeps only the LRUs: the same bytes, decoded
	// again when they are evicted, and nothing written under Dir. The default is on, unless
	// $DSHFS_CACHE_INDEX says otherwise (IndexEnv).
	Index bool
	// Dir holds the persistent per-revision index; "" means $XDG_CACHE_HOME/dshfs (else ~/.cache/dshfs),
	// resolved when a mount starts.
	Dir string
}

// IndexEnv names the environment variable that sets the default of cache.index: "on" or "off" (also
// "true"/"false", "1"/"0"). A configuration file's cache.index wins over it. It lets a whole test run, or a
// host, go without the index without a file per mount.
const IndexEnv = "DSHFS_CACHE_INDEX"

// indexDefault is cache.index's default: on, unless IndexEnv says otherwise. ok is false when IndexEnv
// holds something else (Parse and Load report it; Default keeps the index on).
func indexDefault() (on bool, ok bool) {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(IndexEnv))) {
	case "", "on", "true", "1":
		return true, true
	case "off", "false", "0":
		return false, true
	}
	return true, false
}

// MaxForeignQuiet bounds [writer] foreign_quiet: a harness writes its batches seconds apart, and a longer
// quiet period only refuses writes long after it stopped.
const MaxForeignQuiet = 10 * time.Minute

// MinLiveIdle is the shortest non-zero [writer] live_idle: a writer appends several times a second while a
// turn runs, and a period shorter than that would read the whole log back for every batch.
const MinLiveIdle = time.Second

// Writer holds the live writer's settings.
type Writer struct {
	// BatchWindow is the write-behind window: the first pending event starts it, the batch is written
	// when it ends.
	BatchWindow time.Duration
	// Compression is the encoding of a new (empty or absent) JSONL root.
	Compression string // CompressionZstd or CompressionNone
	// MaxLineBytes caps one event line, written (append) or read (a longer one makes the session corrupt).
	MaxLineBytes int64
	// MaxFrameBytes caps one decoded zstd frame (a frame that could decode to more is corrupt).
	MaxFrameBytes int64
	// MaxSessionBytes caps what one session's decoded events may cost in memory, their text and a fixed
	// overhead per event (a session that would cost more is refused as too large; 0: no cap).
	MaxSessionBytes int64
	// ForeignQuiet is how long after another process changed a session's artifact (a harness before
	// 0.1.5, which takes no write lease) dshfs still treats the session as live elsewhere and refuses to
	// write it, unless the change was acknowledged (rescan, --force). 0: only an open descriptor counts.
	ForeignQuiet time.Duration
	// LiveBytes is what the logs of the sessions this process writes (their live engines) may hold in
	// memory together; past it the least recently used idle engines release their logs, keeping the
	// writer lease, and read them back when next used. 0: no budget.
	LiveBytes int64
	// LiveIdle is how long an engine stays idle (every accepted event durable) before it releases its log
	// whatever the budget; 0: only the budget releases logs.
	LiveIdle time.Duration
	// Generation is the format generation of a session create or mkdir makes: GenerationAuto (the highest
	// generation dshfs writes among the store's sessions, so a v4 store gets v4 sessions and an empty or
	// v0 store v0 ones, which every release reads), "0" or "4". A fork child takes its parent's.
	Generation string
}

// The [writer] generation values.
const (
	GenerationAuto = "auto"
	Generation0    = "0"
	Generation4    = "4"
)

// Compaction holds the summarizer settings of manual compaction (ctl compact, dshfs compact).
type Compaction struct {
	Summarizer string   // SummarizerExtractive or SummarizerCommand
	Command    []string // argv; non-empty when Summarizer is SummarizerCommand
	Timeout    time.Duration
	// Provider and Model name the summarizer in compaction/summary (the harness requires both, non-empty);
	// by default "dshfs" and the summarizer's own name.
	Provider, Model string
	// MaxTokens caps a summary's estimated tokens (the harness's maxTokens, recorded in compaction/summary).
	MaxTokens int
}

// Pruner holds the tool-result pruner budgets (ctl prune), in Unicode code points as the harness counts
// them.
type Pruner struct {
	ThresholdChars int
	HeadChars      int
	TailChars      int
}

// Spill holds the spill roots configured beside the harness's defaults (the defaults themselves are the
// spill package's business, so they are not listed here).
type Spill struct {
	Roots []string // expanded and absolute
}

// SQLite holds the connection settings of a SQLite store (the harness's provider options).
type SQLite struct {
	// JournalMode is what every read-write connection selects (the harness's journalMode): WAL unless the
	// filesystem cannot share WAL memory; every process sharing the database must use the same.
	JournalMode string
	// BusyTimeout is how long a statement waits for another connection's lock (busyTimeoutMs).
	BusyTimeout time.Duration
}

// Fleet holds the settings of a fleet store (a postgres:// STORE, docs/fleet.md).
type Fleet struct {
	// ReleaseAfter is how long a session a host's `dshfs sync` feeds stays unwritable through the fleet
	// store after that sync last ran for it: past it, the host counts as gone and the session is handed
	// over to any writer.
	ReleaseAfter time.Duration
	// Host is this host's name in the fleet store (the source host of the sessions it creates, the holder
	// its writer locks name); "" means os.Hostname().
	Host string
	// Timeout is how long any fleet operation waits for the server to answer (connecting, a query, the
	// next row of a stream) before it fails as an I/O error: a stopped server or a network partition
	// answers nothing, and a read or a flush must not wait on it for ever.
	Timeout time.Duration
}

// DefaultReleaseAfter is fleet.release_after's default.
const DefaultReleaseAfter = 10 * time.Minute

// DefaultFleetTimeout is fleet.timeout's default.
const DefaultFleetTimeout = 10 * time.Second

// Enumerated values, spelled as in the TOML file.
const (
	CompressionZstd      = "zstd"
	CompressionNone      = "none"
	SummarizerExtractive = "extractive"
	SummarizerCommand    = "command"
	JournalWAL           = "wal"
	JournalDelete        = "delete"
	JournalTruncate      = "truncate"
	JournalPersist       = "persist"
)

// PruneMarker is the harness's PRUNE_MARKER; its code-point length takes part in the pruner budget check.
const PruneMarker = "\n\n[... tool result middle pruned ...]\n\n"

// pruneMarkerChars is codePointLength(PRUNE_MARKER).
var pruneMarkerChars = utf8.RuneCountInString(PruneMarker)

// Default returns the configuration used when no file is given; Store follows $DSH_HOME at call time.
func Default() Config {
	indexOn, _ := indexDefault()
	return Config{
		Store: DefaultStore(),
		FUSE: FUSE{
			EntryTimeout:    time.Second,
			AttrTimeout:     time.Second,
			RefreshInterval: time.Second,
		},
		// The cache budgets are what a mount keeps beyond its working set; with them, a mount's whole
		// process stays within 256 MiB under any walk (the read-path issue's target, tested): 32 + 16 MiB
		// of caches, the node tree bounded by session (mount/trees.go), and a soft memory limit of the
		// budgets + 112 MiB for everything else.
		Cache: Cache{
			SessionsBytes: 32 << 20,
			ViewsBytes:    16 << 20,
			Index:         indexOn,
		},
		Writer: Writer{
			BatchWindow:   200 * time.Millisecond,
			Compression:   CompressionZstd,
			Generation:    GenerationAuto,
			MaxLineBytes:  64 << 20,
			MaxFrameBytes: 256 << 20,
			// what a store of the largest harness sessions needs, with room: the budget is there so that a
			// small file cannot decode to any number of events, not to refuse real logs
			MaxSessionBytes: 1 << 30,
			ForeignQuiet:    2 * time.Second,
			// the live engines' logs beside the caches' 48 MiB, within the same 256 MiB (tested with 1,000
			// live sessions)
			LiveBytes: 32 << 20,
			LiveIdle:  time.Minute,
		},
		Compaction: Compaction{
			Summarizer: SummarizerExtractive,
			Command:    []string{},
			Timeout:    5 * time.Minute,
			Provider:   "dshfs",
			Model:      SummarizerExtractive,
			MaxTokens:  8192,
		},
		Pruner: Pruner{
			ThresholdChars: 8192,
			HeadChars:      4096,
			TailChars:      1024,
		},
		Spill:  Spill{Roots: []string{}},
		SQLite: SQLite{JournalMode: JournalWAL, BusyTimeout: 5 * time.Second},
		Fleet:  Fleet{ReleaseAfter: DefaultReleaseAfter, Timeout: DefaultFleetTimeout},
	}
}

// DefaultStore is where the harness's default bundle keeps its JSONL sessions: dshHomePath('sessions').
func DefaultStore() string {
	return filepath.Join(DshHome(), "sessions")
}

// DshHome resolves the harness home as upstream resolveDshHome does: $DSH_HOME unless it is empty or
// whitespace-only (a blank override must never mean the working directory), else ~/.dsh; a leading "~"
// is expanded and the result made absolute.
func DshHome() string {
	home := os.Getenv("DSH_HOME")
	if strings.TrimSpace(home) == "" {
		return filepath.Join(userHome(), ".dsh")
	}
	return absPath(ExpandHome(home), "")
}

// ExpandHome expands the tilde forms the harness's expandHomePath supports ("~", "~/…"); every other
// spelling, including "~user", is returned unchanged, as upstream does.
func ExpandHome(p string) string {
	switch {
	case p == "~":
		return userHome()
	case strings.HasPrefix(p, "~/"):
		return filepath.Join(userHome(), p[2:])
	}
	return p
}

// userHome is Node's os.homedir() for our purposes: $HOME first, then the account database.
func userHome() string {
	if h, err := os.UserHomeDir(); err == nil && h != "" {
		return h
	}
	return "/"
}

// absPath makes p absolute against base (a directory; "" means the working directory) and cleans it.
func absPath(p, base string) string {
	if !filepath.IsAbs(p) && base != "" {
		p = filepath.Join(base, p)
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}
