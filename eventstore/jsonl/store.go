package jsonl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/namecodec"
)

// Compression selects the physical encoding of a root; a root holds exactly one.
type Compression string

// The two encodings the harness writes.
const (
	Zstd Compression = "zstd"
	None Compression = "none"
)

// Suffix is the transcript file suffix for an encoding.
func (c Compression) Suffix() string {
	if c == Zstd {
		return ".jsonl.zstd"
	}
	return ".jsonl"
}

func (c Compression) opposite() Compression {
	if c == Zstd {
		return None
	}
	return Zstd
}

// Backend is the JSONL session store at one root, byte-compatible with the harness's
// session-persistence-jsonl in the given compression mode.
type Backend struct {
	root string
	mode Compression
	pack bool

	// headers remembers what listing learned from each transcript's first record, keyed by path and
	// valid while the file keeps its device and inode: a header is written once and never rewritten, so a
	// mount re-listing 10k sessions every second reads no file twice.
	hmu     sync.Mutex
	headers map[string]cachedHeader

	realRoot atomic.Pointer[string] // root with symlinks resolved (resolvedRoot)

	// dirs keeps the root's and the session directories' listings while they are unchanged (dircache.go)
	dirs dirCache

	// maxLine and maxFrame cap one event line and one decoded zstd frame (config [writer] max_line_bytes,
	// max_frame_bytes; 0: no cap): a session exceeding them is refused as corrupt instead of filling memory.
	maxLine, maxFrame int64
	// maxSession is the load budget of one session's events (eventstore.Budget)
	maxSession int64

	// hook, when set, is called before every durable write step (tests: fault injection, crash points,
	// recording what was made durable); an error fails the step as the system call would.
	hook func(op Op, path string) error

	// tuning is how parallel a load's decoding and a listing's header reads run (SetTuning)
	tuning eventstore.Tuning

	// watch is the running change feed (watch.go), nil when none runs
	watch atomic.Pointer[watching]
}

// Op names a durable write step for a test hook.
type Op string

// The durable write steps, in the order an append takes them.
const (
	OpWrite    Op = "write"      // bytes written to a file (path: the file)
	OpHalf     Op = "write-half" // an append, half of its bytes written (only while a hook is set)
	OpSync     Op = "fsync"      // a file's fsync
	OpLink     Op = "link"       // a temp file hard-linked to its final name (path: the final name)
	OpDirSync  Op = "dirsync"    // a directory's fsync (path: the directory)
	OpTruncate Op = "truncate"   // a file cut back (after a failed append, or a repair)
	OpAck      Op = "ack"        // an append durable, before the writer learns it
)

// SetHook installs a test hook called before every durable write step; nil removes it.
func (b *Backend) SetHook(h func(op Op, path string) error) { b.hook = h }

func (b *Backend) step(op Op, path string) error {
	if b.hook == nil {
		return nil
	}
	if err := b.hook(op, path); err != nil {
		return &eventstore.IOError{Err: fmt.Errorf("%s %s: %w", op, path, err)}
	}
	return nil
}

type cachedHeader struct {
	file  string // "<dev>:<ino>" of the transcript the entry was read from
	entry eventstore.Entry
}

var _ eventstore.Backend = (*Backend)(nil)

// Open returns the backend for root. An empty mode is detected from the artifacts the root holds (the
// encoding most sessions use, zstd for an empty or absent root), as the harness has no way to sniff it.
func Open(root string, mode Compression) (*Backend, error) { return OpenDefault(root, mode, Zstd) }

// OpenDefault is Open with the encoding a root holding no artifact gets (config writer.compression).
func OpenDefault(root string, mode, empty Compression) (*Backend, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	if mode == "" {
		var found bool
		if mode, found = Detect(abs); !found {
			mode = empty
		}
	}
	if mode != Zstd && mode != None {
		return nil, fmt.Errorf("unknown JSONL compression %q (want \"zstd\" or \"none\")", mode)
	}
	if fi, err := os.Stat(abs); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("store root %s is not a directory", abs)
	}
	return &Backend{root: abs, dirs: dirCache{root: abs}, mode: mode, pack: true, maxLine: DefaultMaxLineBytes, maxFrame: DefaultMaxFrameBytes,
		maxSession: eventstore.DefaultMaxSessionBytes}, nil
}

// Default caps of one line and one decoded frame (docs/configuration.md): far above any real session.
const (
	DefaultMaxLineBytes  = 64 << 20
	DefaultMaxFrameBytes = 256 << 20
)

// SetLimits sets the caps of one event line and one decoded zstd frame (0: no cap).
func (b *Backend) SetLimits(maxLine, maxFrame int64) { b.maxLine, b.maxFrame = maxLine, maxFrame }

// SetSessionLimit sets the load budget of one session's decoded events (config writer.max_session_bytes;
// 0: none); a session over it is refused with an *eventstore.TooLargeError.
func (b *Backend) SetSessionLimit(n int64) { b.maxSession = n }

// SetTuning sets how parallel a load's decoding and a listing's header reads run (the program decides;
// the zero Tuning takes one worker per P). Call it before the backend is used.
func (b *Backend) SetTuning(t eventstore.Tuning) { b.tuning = t }

// Detect reports which encoding the sessions under root use: the one more session directories hold
// generation files of, zstd on a tie; found is false when there are none (the encoding is then zstd).
//
// It stops as soon as the sessions not yet looked at could no longer change the answer: opening a store of
// one encoding looks at half of its session directories.
func Detect(root string) (c Compression, found bool) {
	var dirs []string
	for _, p := range subdirs(root) {
		dirs = append(dirs, subdirs(p)...)
	}
	var zstd, raw int
	for i, s := range dirs {
		left := len(dirs) - i
		if zstd > 0 && zstd >= raw+left {
			break // raw cannot get ahead
		}
		if raw > zstd+left {
			break // zstd cannot catch up
		}
		var z, r bool
		for _, name := range dirNames(s) {
			if g, ok := ParseGenerationName(name); ok {
				z, r = z || g.Compression == Zstd, r || g.Compression == None
			}
		}
		if z {
			zstd++
		}
		if r {
			raw++
		}
	}
	if raw > zstd {
		return None, true
	}
	return Zstd, zstd > 0
}

// Root is the absolute store root.
func (b *Backend) Root() string { return b.root }

// Compression is the encoding this backend reads and writes.
func (b *Backend) Compression() Compression { return b.mode }

// Name is "jsonl" for zstd roots and "jsonl+raw" for uncompressed ones (the STORE prefixes of docs/cli.md).
func (b *Backend) Name() string {
	if b.mode == Zstd {
		return "jsonl"
	}
	return "jsonl+raw"
}

// SetPackChunks turns packed chunk rows off (the harness's packChunks: false). Reading always decodes rows.
func (b *Backend) SetPackChunks(on bool) { b.pack = on }

// Locate returns the transcript path derived from the header's cwd and id (docs/harness.md#jsonl-store-layout).
func (b *Backend) Locate(h event.Header) (string, error) {
	project, seg, err := Place(h)
	if err != nil {
		return "", err
	}
	return filepath.Join(b.root, project, seg, "session"+b.mode.Suffix()), nil
}

// Place returns the directories a session of header h takes in a JSONL root — its project's and its
// own — or why it has none: a cwd that is no string or makes no project key, an id whose directory name
// would be over NAME_MAX. The other backends refuse such a session at create as well: the harness could
// not hold it, nor could a conversion or a backup into a JSONL root.
func Place(h event.Header) (project, dir string, err error) {
	project = NoCwdDir
	if h.Cwd != nil {
		if h.Cwd.Kind != event.KindString {
			return "", "", errors.New("header cwd is not a string")
		}
		k, err := namecodec.ProjectKey(h.Cwd.Str)
		if err != nil {
			return "", "", err
		}
		project = k
	}
	seg, err := namecodec.EncodeSegment(h.ID)
	if err != nil {
		return "", "", err
	}
	if len(seg) > maxNameBytes {
		return "", "", fmt.Errorf("session id %s encodes to a %d-byte directory name, over the filesystem's %d-byte limit", jsonString(h.ID), len(seg), maxNameBytes)
	}
	return project, seg, nil
}

// maxNameBytes is NAME_MAX of Linux filesystems: no directory name can be longer.
const maxNameBytes = 255

// Stat returns the transcript's state; its token is the harness's revision token
// `<dev>:<ino>:<size>:<mtimeNs>:<ctimeNs>`. With a path (where a listing found it) it costs one stat.
func (b *Backend) Stat(ctx context.Context, id, path string) (eventstore.Artifact, error) {
	if path == "" {
		var err error
		if path, err = b.find(id); err != nil {
			return eventstore.Artifact{}, err
		}
	}
	return statArtifact(path)
}

func statArtifact(path string) (eventstore.Artifact, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return eventstore.Artifact{}, &eventstore.IOError{Err: err}
	}
	return artifactOf(fi), nil
}

func artifactOf(fi fs.FileInfo) eventstore.Artifact {
	a := eventstore.Artifact{ModTime: fi.ModTime(), Size: fi.Size()}
	token, ok := eventstore.FileToken(fi)
	if !ok {
		a.Token = fmt.Sprintf("0:0:%d:%d:0", fi.Size(), fi.ModTime().UnixNano())
		return a
	}
	st := fi.Sys().(*syscall.Stat_t)
	a.Identity = strconv.FormatUint(uint64(st.Dev), 10) + ":" + strconv.FormatUint(st.Ino, 10)
	a.Token = token
	a.Owner = &eventstore.Owner{UID: st.Uid, GID: st.Gid, Perm: uint32(fi.Mode().Perm())}
	return a
}

// find returns the transcript of id: the current generation's file, whichever generation that is.
func (b *Backend) find(id string) (string, error) {
	files, g, err := b.discover(id)
	if err != nil {
		return "", err
	}
	return files.Path(g), nil
}

// discover finds the session directory of id and its current generation, applying the harness's
// targeted-lookup checks: flat-layout files and generation files in the other encoding are errors, and the
// same id in two project directories is a duplicate. The highest generation is the session; a predecessor
// is never returned in its place.
func (b *Backend) discover(id string) (SessionFiles, GenerationFile, error) {
	seg, err := namecodec.EncodeSegment(id)
	if err != nil {
		return SessionFiles{}, GenerationFile{}, err
	}
	var (
		matches []SessionFiles
		current GenerationFile
	)
	for _, project := range b.dirs.list(b.root, kindSubdirs, subdirs) {
		for _, c := range []Compression{Zstd, None} {
			flat := filepath.Join(project, seg+c.Suffix())
			if exists(flat) {
				return SessionFiles{}, GenerationFile{}, errors.New(flatLayoutText(flat))
			}
		}
		files := b.keptSessionFiles(filepath.Join(project, seg))
		if len(files.Opposite) > 0 {
			return SessionFiles{}, GenerationFile{}, errors.New(b.mismatchText(filepath.Join(files.Dir, files.Opposite[0])))
		}
		if g, ok := files.Current(); ok {
			matches, current = append(matches, files), g
		}
	}
	if len(matches) > 1 {
		return SessionFiles{}, GenerationFile{}, errors.New(duplicateText(id))
	}
	if len(matches) == 0 {
		return SessionFiles{}, GenerationFile{}, &eventstore.NotFoundError{ID: id}
	}
	return matches[0], current, nil
}

func duplicateText(id string) string {
	return `duplicate JSONL session id "` + id + `" appears in multiple project directories`
}

func flatLayoutText(path string) string {
	return "session artifact " + jsonString(path) + " uses the unsupported flat-file layout; use a separate root or move it into a project/session directory before loading"
}

func (b *Backend) mismatchText(path string) string {
	return "session artifact " + jsonString(path) + " uses " + b.mode.opposite().Suffix() +
		", but this backend is configured for compression " + jsonString(string(b.mode)) +
		"; use a separate root or select the matching compression mode"
}

func jsonString(s string) string { return string(event.Stringify(event.String(s))) }
