package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fullSample sets every key, most of them to their defaults; its cache budgets (256/128 MiB) are those
// of an earlier default, so that the test sees them read as written.
const fullSample = `store = "~/.dsh/sessions"        # default: $DSH_HOME/sessions, else ~/.dsh/sessions
read_only = false

[fuse]
entry_timeout = "1s"              # for views that can change; per-event files may use longer
attr_timeout = "1s"
refresh_interval = "1s"           # how often a store revision is re-checked
allow_other = false

[cache]
sessions_bytes = "256MiB"         # decoded sessions (LRU)
views_bytes = "128MiB"            # rendered views (LRU)

[writer]
batch_window = "200ms"            # write-behind window from the first pending event
compression = "zstd"              # for new JSONL roots: "zstd" | "none"
max_line_bytes = "64MiB"          # one event line (append and read); larger = refused / corrupt
max_frame_bytes = "256MiB"        # one decoded zstd frame; larger = corrupt (bounded memory)

[compaction]
summarizer = "extractive"         # "extractive" | "command"
command = ["summarize", "--arg"]  # argv for summarizer = "command"; JSON on stdin, summary on stdout
timeout = "5m"

[pruner]
threshold_chars = 8192
head_chars = 4096
tail_chars = 1024

[spill]
roots = []                        # extra spill roots beside the defaults
`

// fakeHome pins HOME and clears DSH_HOME so that expansion is deterministic.
func fakeHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("DSH_HOME", "")
	return home
}

func TestDesignSample(t *testing.T) {
	home := fakeHome(t)
	got, err := Parse([]byte(fullSample), "/etc/dshfs/dshfs.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Store:    filepath.Join(home, ".dsh", "sessions"),
		ReadOnly: false,
		FUSE: FUSE{
			EntryTimeout:    time.Second,
			AttrTimeout:     time.Second,
			RefreshInterval: time.Second,
			AllowOther:      false,
		},
		Cache:      Cache{SessionsBytes: 256 * 1024 * 1024, ViewsBytes: 128 * 1024 * 1024, Index: true},
		Writer:     Writer{BatchWindow: 200 * time.Millisecond, Compression: "zstd", MaxLineBytes: 64 << 20, MaxFrameBytes: 256 << 20, MaxSessionBytes: 1 << 30, ForeignQuiet: 2 * time.Second, LiveBytes: 32 << 20, LiveIdle: time.Minute, Generation: "auto"},
		Compaction: Compaction{Summarizer: "extractive", Command: []string{"summarize", "--arg"}, Timeout: 5 * time.Minute, Provider: "dshfs", Model: "extractive", MaxTokens: 8192},
		Pruner:     Pruner{ThresholdChars: 8192, HeadChars: 4096, TailChars: 1024},
		Spill:      Spill{Roots: []string{}},
		SQLite:     SQLite{JournalMode: "wal", BusyTimeout: 5 * time.Second}, // not in the sample: the defaults
		Fleet:      Fleet{ReleaseAfter: 10 * time.Minute, Timeout: 10 * time.Second},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("full sample:\n got %+v\nwant %+v", got, want)
	}
	// The sample spells out the defaults (bar compaction.command, and the cache budgets, which were
	// lowered since: see Default), so it must agree with Default() otherwise.
	def := Default()
	def.Compaction.Command = want.Compaction.Command
	if def.Cache.SessionsBytes != 32<<20 || def.Cache.ViewsBytes != 16<<20 {
		t.Fatalf("default cache budgets %+v", def.Cache)
	}
	def.Cache = want.Cache
	if !reflect.DeepEqual(got, def) {
		t.Fatalf("sample and Default() disagree:\n got %+v\nwant %+v", got, def)
	}
}

func TestDefaults(t *testing.T) {
	home := fakeHome(t)
	for _, src := range []string{"", "# only a comment\n", "[fuse]\n[cache]\n[writer]\n[compaction]\n[pruner]\n[spill]\n[sqlite]\n[fleet]\n"} {
		got, err := Parse([]byte(src), "dshfs.toml")
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if !reflect.DeepEqual(got, Default()) {
			t.Fatalf("%q: got %+v, want Default() %+v", src, got, Default())
		}
	}
	d := Default()
	if d.Store != filepath.Join(home, ".dsh", "sessions") || d.FUSE.RefreshInterval != time.Second ||
		d.Cache.SessionsBytes != 32<<20 || d.Cache.ViewsBytes != 16<<20 || d.Writer.Compression != "zstd" ||
		d.Compaction.Summarizer != "extractive" || d.Compaction.Timeout != 5*time.Minute ||
		d.Pruner != (Pruner{8192, 4096, 1024}) || len(d.Spill.Roots) != 0 || d.ReadOnly || d.FUSE.AllowOther {
		t.Fatalf("unexpected defaults %+v", d)
	}
	got, err := Load("")
	if err != nil || !reflect.DeepEqual(got, d) {
		t.Fatalf("Load(\"\") = %+v, %v", got, err)
	}
}

func TestDshHome(t *testing.T) {
	home := fakeHome(t)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ env, want string }{
		{"", filepath.Join(home, ".dsh", "sessions")},
		{"   ", filepath.Join(home, ".dsh", "sessions")}, // blank is unset, as upstream
		{"/srv/dsh", "/srv/dsh/sessions"},
		{"/srv/dsh/", "/srv/dsh/sessions"},
		{"~/other", filepath.Join(home, "other", "sessions")},
		{"~", filepath.Join(home, "sessions")},
		{"rel/home", filepath.Join(wd, "rel", "home", "sessions")},
	}
	for _, c := range cases {
		t.Setenv("DSH_HOME", c.env)
		if got := DefaultStore(); got != c.want {
			t.Errorf("DSH_HOME=%q: DefaultStore() = %q, want %q", c.env, got, c.want)
		}
		cfg, err := Parse(nil, "")
		if err != nil || cfg.Store != c.want {
			t.Errorf("DSH_HOME=%q: Parse default store = %q, %v", c.env, cfg.Store, err)
		}
	}
	// An explicit store in the file wins over $DSH_HOME.
	t.Setenv("DSH_HOME", "/srv/dsh")
	cfg, err := Parse([]byte(`store = "/data/sessions"`), "")
	if err != nil || cfg.Store != "/data/sessions" {
		t.Fatalf("explicit store: %q, %v", cfg.Store, err)
	}
}

func TestValues(t *testing.T) {
	home := fakeHome(t)
	cases := []struct {
		name  string
		src   string
		check func(Config) bool
	}{
		{"sizes plain integer", "[cache]\nsessions_bytes = 1000\nviews_bytes = 0",
			func(c Config) bool { return c.Cache.SessionsBytes == 1000 && c.Cache.ViewsBytes == 0 }},
		{"sizes units", `[cache]
sessions_bytes = "3 GiB"
views_bytes = "17KiB"`,
			func(c Config) bool { return c.Cache.SessionsBytes == 3<<30 && c.Cache.ViewsBytes == 17<<10 }},
		{"size digits and B", "[cache]\nsessions_bytes = \"4096\"\nviews_bytes = \"12B\"",
			func(c Config) bool { return c.Cache.SessionsBytes == 4096 && c.Cache.ViewsBytes == 12 }},
		{"size TiB", "[cache]\nsessions_bytes = \"2TiB\"",
			func(c Config) bool { return c.Cache.SessionsBytes == 2<<40 }},
		{"zero timeouts allowed where meaningful", "[fuse]\nentry_timeout = \"0s\"\nattr_timeout = \"0\"\n[writer]\nbatch_window = \"0s\"",
			func(c Config) bool {
				return c.FUSE.EntryTimeout == 0 && c.FUSE.AttrTimeout == 0 && c.Writer.BatchWindow == 0
			}},
		{"foreign quiet", "[writer]\nforeign_quiet = \"500ms\"", func(c Config) bool { return c.Writer.ForeignQuiet == 500*time.Millisecond }},
		{"foreign quiet off", "[writer]\nforeign_quiet = \"0s\"", func(c Config) bool { return c.Writer.ForeignQuiet == 0 }},
		{"durations", "[fuse]\nrefresh_interval = \"1m30s\"\n[compaction]\ntimeout = \"250ms\"",
			func(c Config) bool {
				return c.FUSE.RefreshInterval == 90*time.Second && c.Compaction.Timeout == 250*time.Millisecond
			}},
		{"booleans", "read_only = true\n[fuse]\nallow_other = true",
			func(c Config) bool { return c.ReadOnly && c.FUSE.AllowOther }},
		{"command summarizer", "[compaction]\nsummarizer = \"command\"\ncommand = [\"my-sum\", \"--x\"]",
			func(c Config) bool {
				return c.Compaction.Summarizer == "command" && reflect.DeepEqual(c.Compaction.Command, []string{"my-sum", "--x"})
			}},
		{"compression none", "[writer]\ncompression = \"none\"",
			func(c Config) bool { return c.Writer.Compression == "none" }},
		{"pruner at the exact bound", "[pruner]\nthreshold_chars = 100\nhead_chars = 40\ntail_chars = 21",
			func(c Config) bool { return c.Pruner == Pruner{100, 40, 21} }},
		{"pruner zero head and tail", "[pruner]\nthreshold_chars = 39\nhead_chars = 0\ntail_chars = 0",
			func(c Config) bool { return c.Pruner == Pruner{39, 0, 0} }},
		{"store relative to the file", `store = "sessions"`,
			func(c Config) bool { return c.Store == "/etc/dshfs/sessions" }},
		{"store with prefix and tilde", `store = "jsonl+raw:~/s"`,
			func(c Config) bool { return c.Store == "jsonl+raw:"+filepath.Join(home, "s") }},
		{"store sqlite prefix relative", `store = "sqlite:db/sessions.db"`,
			func(c Config) bool { return c.Store == "sqlite:/etc/dshfs/db/sessions.db" }},
		{"store as a fleet DSN", `store = "postgres://alice@db.example/fleet?sslmode=verify-full"`,
			func(c Config) bool { return c.Store == "postgres://alice@db.example/fleet?sslmode=verify-full" }},
		{"fleet", "[fleet]\nrelease_after = \"90s\"\nhost = \"ci-runner-4.example\"\ntimeout = \"3s\"",
			func(c Config) bool {
				return c.Fleet == Fleet{ReleaseAfter: 90 * time.Second, Host: "ci-runner-4.example", Timeout: 3 * time.Second}
			}},
		{"store ~user is kept as upstream does", `store = "~bob/x"`,
			func(c Config) bool { return c.Store == "/etc/dshfs/~bob/x" }},
		{"spill roots", `[spill]
roots = ["~/spill", "rel/dir", "/abs/dir/", "/a/../b"]`,
			func(c Config) bool {
				return reflect.DeepEqual(c.Spill.Roots, []string{filepath.Join(home, "spill"), "/etc/dshfs/rel/dir", "/abs/dir", "/b"})
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse([]byte(c.src), "/etc/dshfs/dshfs.toml")
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(got) {
				t.Fatalf("unexpected config %+v", got)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	fakeHome(t)
	cases := []struct {
		name, src, want string
	}{
		{"unknown top-level key", `colour = "red"`, `unknown key "colour" in dshfs.toml`},
		{"unknown key in table", "[fuse]\natr_timeout = \"1s\"", `unknown key "fuse.atr_timeout" in dshfs.toml`},
		{"unknown table named once", "[fusee]\na = 1\nb = 2", `unknown key "fusee" in dshfs.toml`},
		{"unknown subtable", "[spill.extra]\nx = 1", `unknown key "spill.extra" in dshfs.toml`},
		{"table is not a table", "fuse = 1", `key "fuse" in dshfs.toml: want a table, got integer`},
		{"array of tables", "[[cache]]\nviews_bytes = 1", `key "cache" in dshfs.toml: want a table, got array of tables`},
		{"bool wrong type", "read_only = \"yes\"", `key "read_only" in dshfs.toml: want a boolean, got string "yes"`},
		{"leaf given a table", "[fuse.allow_other]\nx = 1", `key "fuse.allow_other" in dshfs.toml: want a boolean, got table`},
		{"store wrong type", "store = 3", `key "store" in dshfs.toml: want a path string, got integer 3`},
		{"store empty", `store = ""`, `key "store" in dshfs.toml: path must not be empty`},
		{"store prefix only", `store = "jsonl:"`, `key "store" in dshfs.toml: path must not be empty`},
		{"fleet release zero", "[fleet]\nrelease_after = \"0s\"", `key "fleet.release_after" in dshfs.toml: duration must be positive, got "0s"`},
		{"fleet timeout zero", "[fleet]\ntimeout = \"0s\"", `key "fleet.timeout" in dshfs.toml: duration must be positive, got "0s"`},
		{"fleet host with space", "[fleet]\nhost = \"my host\"", `key "fleet.host" in dshfs.toml: want a host name (no whitespace, no '/', at most 255 bytes), got "my host"`},
		{"fleet host empty", "[fleet]\nhost = \"\"", `key "fleet.host" in dshfs.toml: want a host name (no whitespace, no '/', at most 255 bytes), got ""`},
		{"fleet host number", "[fleet]\nhost = 7", `key "fleet.host" in dshfs.toml: want a string, got integer 7`},
		{"duration number", "[fuse]\nattr_timeout = 1", `key "fuse.attr_timeout" in dshfs.toml: want a duration string such as "1s", got integer 1`},
		{"duration syntax", "[fuse]\nattr_timeout = \"1 second\"", `key "fuse.attr_timeout" in dshfs.toml: want a duration such as "1s" or "200ms", got "1 second"`},
		{"duration negative", "[fuse]\nentry_timeout = \"-1s\"", `key "fuse.entry_timeout" in dshfs.toml: duration must not be negative, got "-1s"`},
		{"refresh zero", "[fuse]\nrefresh_interval = \"0s\"", `key "fuse.refresh_interval" in dshfs.toml: duration must be positive, got "0s"`},
		{"compaction timeout zero", "[compaction]\ntimeout = \"0s\"", `key "compaction.timeout" in dshfs.toml: duration must be positive, got "0s"`},
		{"batch negative", "[writer]\nbatch_window = \"-5ms\"", `key "writer.batch_window" in dshfs.toml: duration must not be negative, got "-5ms"`},
		{"foreign quiet negative", "[writer]\nforeign_quiet = \"-2s\"", `key "writer.foreign_quiet" in dshfs.toml: duration must not be negative, got "-2s"`},
		{"foreign quiet too long", "[writer]\nforeign_quiet = \"1h\"", `key "writer.foreign_quiet" in dshfs.toml: at most 10m0s (a longer one refuses writes long after a harness stopped), got 1h0m0s`},
		{"foreign quiet number", "[writer]\nforeign_quiet = 2", `key "writer.foreign_quiet" in dshfs.toml: want a duration string such as "1s", got integer 2`},
		{"size decimal unit", "[cache]\nsessions_bytes = \"256MB\"", `key "cache.sessions_bytes" in dshfs.toml: want a size in bytes or with a binary unit (B, KiB, MiB, GiB, TiB) such as "256MiB", got "256MB"`},
		{"size fraction", "[cache]\nviews_bytes = \"1.5GiB\"", `key "cache.views_bytes" in dshfs.toml: want a size in bytes or with a binary unit (B, KiB, MiB, GiB, TiB) such as "256MiB", got "1.5GiB"`},
		{"size negative", "[cache]\nviews_bytes = -1", `key "cache.views_bytes" in dshfs.toml: size must not be negative, got -1`},
		{"size float", "[cache]\nviews_bytes = 1.5", `key "cache.views_bytes" in dshfs.toml: want a size (integer bytes or a string such as "256MiB"), got float 1.5`},
		{"size overflow", "[cache]\nviews_bytes = \"9999999999999TiB\"", `key "cache.views_bytes" in dshfs.toml: size "9999999999999TiB" is too large`},
		{"compression enum", "[writer]\ncompression = \"gzip\"", `key "writer.compression" in dshfs.toml: want "zstd" or "none", got "gzip"`},
		{"summarizer enum", "[compaction]\nsummarizer = \"llm\"", `key "compaction.summarizer" in dshfs.toml: want "extractive" or "command", got "llm"`},
		{"command needed", "[compaction]\nsummarizer = \"command\"", `key "compaction.command" in dshfs.toml: summarizer = "command" needs a non-empty command (argv array)`},
		{"command empty list", "[compaction]\nsummarizer = \"command\"\ncommand = []", `key "compaction.command" in dshfs.toml: summarizer = "command" needs a non-empty command (argv array)`},
		{"command empty program", "[compaction]\nsummarizer = \"command\"\ncommand = [\"\"]", `key "compaction.command" in dshfs.toml: the program name (first element) must not be empty`},
		{"command is a string", "[compaction]\ncommand = \"summarize --arg\"", `key "compaction.command" in dshfs.toml: want an array of strings, got string "summarize --arg"`},
		{"command mixed array", "[compaction]\ncommand = [\"a\", 1]", `key "compaction.command" in dshfs.toml: want an array of strings, got array`},
		{"threshold zero", "[pruner]\nthreshold_chars = 0", `key "pruner.threshold_chars" in dshfs.toml: ToolResultPruneConfig: thresholdChars (0) must be a positive integer`},
		{"head negative", "[pruner]\nhead_chars = -1", `key "pruner.head_chars" in dshfs.toml: ToolResultPruneConfig: headChars (-1) must be a non-negative integer`},
		{"tail negative", "[pruner]\ntail_chars = -2", `key "pruner.tail_chars" in dshfs.toml: ToolResultPruneConfig: tailChars (-2) must be a non-negative integer`},
		{"pruner float", "[pruner]\nhead_chars = 1.5", `key "pruner.head_chars" in dshfs.toml: want an integer, got float 1.5`},
		{"pruner too large", "[pruner]\nthreshold_chars = 9999999999", `key "pruner.threshold_chars" in dshfs.toml: 9999999999 is too large (at most 2147483647)`},
		{"pruner budget via head", "[pruner]\nhead_chars = 8000", `key "pruner.head_chars" in dshfs.toml: ToolResultPruneConfig: headChars + marker + tailChars (9063) must be at most thresholdChars (8192)`},
		{"pruner budget via tail", "[pruner]\ntail_chars = 5000", `key "pruner.tail_chars" in dshfs.toml: ToolResultPruneConfig: headChars + marker + tailChars (9135) must be at most thresholdChars (8192)`},
		{"pruner budget via threshold", "[pruner]\nthreshold_chars = 5000", `key "pruner.threshold_chars" in dshfs.toml: ToolResultPruneConfig: headChars + marker + tailChars (5159) must be at most thresholdChars (5000)`},
		{"pruner budget off by one", "[pruner]\nthreshold_chars = 100\nhead_chars = 40\ntail_chars = 22", `key "pruner.head_chars" in dshfs.toml: ToolResultPruneConfig: headChars + marker + tailChars (101) must be at most thresholdChars (100)`},
		{"roots not an array", "[spill]\nroots = \"/x\"", `key "spill.roots" in dshfs.toml: want an array of path strings, got string "/x"`},
		{"roots empty element", "[spill]\nroots = [\"/x\", \"\"]", `key "spill.roots[1]" in dshfs.toml: path must not be empty`},
		{"several problems", "read_only = 1\nbogus = 2\n[fuse]\nattr_timeout = \"x\"",
			"unknown key \"bogus\" in dshfs.toml\n" +
				"key \"read_only\" in dshfs.toml: want a boolean, got integer 1\n" +
				"key \"fuse.attr_timeout\" in dshfs.toml: want a duration such as \"1s\" or \"200ms\", got \"x\""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.src), "dshfs.toml")
			if err == nil {
				t.Fatalf("no error, want %q", c.want)
			}
			if err.Error() != c.want {
				t.Fatalf("error:\n got %q\nwant %q", err.Error(), c.want)
			}
			var ke *KeyError
			if !errors.As(err, &ke) || ke.Source != "dshfs.toml" || ke.Key == "" {
				t.Fatalf("error %v is not a *KeyError naming the key and file (%+v)", err, ke)
			}
		})
	}
}

func TestSyntaxAndFileErrors(t *testing.T) {
	fakeHome(t)
	_, err := Parse([]byte("[fuse\n"), "broken.toml")
	if err == nil || !strings.HasPrefix(err.Error(), "config broken.toml: toml: line ") {
		t.Fatalf("syntax error = %v", err)
	}
	_, err = Parse([]byte("store = 1\nstore = 2\n"), "dup.toml")
	if err == nil || !strings.Contains(err.Error(), "dup.toml") || !strings.Contains(err.Error(), `"store"`) {
		t.Fatalf("duplicate key error = %v", err)
	}
	_, err = Parse([]byte("bogus = 1"), "")
	if err == nil || err.Error() != `unknown key "bogus"` {
		t.Fatalf("unnamed source error = %v", err)
	}
	_, err = Load(filepath.Join(t.TempDir(), "absent.toml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load of a missing file = %v, want ErrNotExist", err)
	}
}

func TestLoadAnchorsRelativePaths(t *testing.T) {
	fakeHome(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "conf", "dshfs.toml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	src := "store = \"../store\"\n[spill]\nroots = [\"spill\"]\n[fuse]\nattr_timeout = \"250ms\"\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Store != filepath.Join(dir, "store") || !reflect.DeepEqual(cfg.Spill.Roots, []string{filepath.Join(dir, "conf", "spill")}) ||
		cfg.FUSE.AttrTimeout != 250*time.Millisecond {
		t.Fatalf("Load = %+v", cfg)
	}
	if err := os.WriteFile(path, []byte("[fuse]\natr_timeout = \"1s\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path)
	if err == nil || err.Error() != `unknown key "fuse.atr_timeout" in `+path {
		t.Fatalf("Load error = %v", err)
	}
}

func TestPruneMarkerLength(t *testing.T) {
	if pruneMarkerChars != 39 {
		t.Fatalf("codePointLength(PRUNE_MARKER) = %d, want 39", pruneMarkerChars)
	}
}

func TestCompactionNames(t *testing.T) {
	fakeHome(t)
	for _, tc := range []struct {
		src             string
		provider, model string
		err             string
	}{
		{"[compaction]\nsummarizer = \"command\"\ncommand = [\"s\"]\n", "dshfs", "command", ""},
		{"[compaction]\nprovider = \"acme\"\nmodel = \"m1\"\n", "acme", "m1", ""},
		{"[compaction]\nmodel = \" \"\n", "", "", "compaction.model"},
		{"[compaction]\nmax_tokens = 0\n", "", "", "compaction.max_tokens"},
	} {
		c, err := Parse([]byte(tc.src), "")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: want an error naming %s, got %v", tc.src, tc.err, err)
			}
			continue
		}
		if err != nil || c.Compaction.Provider != tc.provider || c.Compaction.Model != tc.model {
			t.Errorf("%q: got %q/%q, %v", tc.src, c.Compaction.Provider, c.Compaction.Model, err)
		}
	}
}

// TestCacheIndex: cache.index is a boolean, on by default; $DSHFS_CACHE_INDEX sets the default, a file's
// key wins over it, and a value it does not know fails the load rather than being guessed at.
func TestCacheIndex(t *testing.T) {
	fakeHome(t)
	for _, c := range []struct {
		env, src string
		want     bool
		err      string
	}{
		{"", "", true, ""},
		{"", "[cache]\nindex = false", false, ""},
		{"off", "", false, ""},
		{"0", "", false, ""},
		{"on", "", true, ""},
		{"off", "[cache]\nindex = true", true, ""},
		{"maybe", "[cache]\nindex = true", true, ""},
		{"maybe", "", false, `key "cache.index" in dshfs.toml: $DSHFS_CACHE_INDEX must be "on" or "off", got "maybe"`},
		{"", "[cache]\nindex = \"off\"", false, `key "cache.index" in dshfs.toml: want a boolean, got string "off"`},
	} {
		t.Setenv(IndexEnv, c.env)
		got, err := Parse([]byte(c.src), "dshfs.toml")
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("env %q, %q: error %v, want %s", c.env, c.src, err, c.err)
			}
			continue
		}
		if err != nil || got.Cache.Index != c.want {
			t.Errorf("env %q, %q: index %v (%v), want %v", c.env, c.src, got.Cache.Index, err, c.want)
		}
		if def := Default(); c.src == "" && def.Cache.Index != c.want {
			t.Errorf("env %q: Default().Cache.Index = %v", c.env, def.Cache.Index)
		}
	}
}

// TestMaxSessionBytes: writer.max_session_bytes is a size, 1 GiB by default, 0 for no budget.
func TestMaxSessionBytes(t *testing.T) {
	fakeHome(t)
	for _, c := range []struct {
		toml string
		want int64
	}{{"", 1 << 30}, {"[writer]\nmax_session_bytes = \"256MiB\"\n", 256 << 20}, {"[writer]\nmax_session_bytes = 0\n", 0}} {
		got, err := Parse([]byte(c.toml), "/etc/dshfs/dshfs.toml")
		if err != nil || got.Writer.MaxSessionBytes != c.want {
			t.Errorf("%q: %d, %v; want %d", c.toml, got.Writer.MaxSessionBytes, err, c.want)
		}
	}
	if _, err := Parse([]byte("[writer]\nmax_session_bytes = -1\n"), "/etc/dshfs/dshfs.toml"); err == nil {
		t.Error("a negative max_session_bytes was accepted")
	}
}

// TestLiveBudget: writer.live_bytes is a size (32 MiB by default, 0 for no budget) and writer.live_idle a
// duration (1m by default, 0 for none, else at least a second); bad values are refused by name.
func TestLiveBudget(t *testing.T) {
	fakeHome(t)
	for _, c := range []struct {
		toml  string
		bytes int64
		idle  time.Duration
	}{
		{"", 32 << 20, time.Minute},
		{"[writer]\nlive_bytes = \"128MiB\"\nlive_idle = \"10s\"\n", 128 << 20, 10 * time.Second},
		{"[writer]\nlive_bytes = 0\nlive_idle = \"0s\"\n", 0, 0},
		{"[writer]\nlive_idle = \"1s\"\n", 32 << 20, time.Second},
	} {
		got, err := Parse([]byte(c.toml), "/etc/dshfs/dshfs.toml")
		if err != nil || got.Writer.LiveBytes != c.bytes || got.Writer.LiveIdle != c.idle {
			t.Errorf("%q: %d, %v, %v; want %d, %v", c.toml, got.Writer.LiveBytes, got.Writer.LiveIdle, err, c.bytes, c.idle)
		}
	}
	for _, c := range []struct{ toml, want string }{
		{"[writer]\nlive_bytes = -1\n", `key "writer.live_bytes" in /etc/dshfs/dshfs.toml: size must not be negative, got -1`},
		{"[writer]\nlive_bytes = \"32MB\"\n", `key "writer.live_bytes" in /etc/dshfs/dshfs.toml: want a size in bytes or with a binary unit`},
		{"[writer]\nlive_idle = \"-1s\"\n", `key "writer.live_idle" in /etc/dshfs/dshfs.toml: duration must not be negative, got "-1s"`},
		{"[writer]\nlive_idle = 60\n", `key "writer.live_idle" in /etc/dshfs/dshfs.toml: want a duration string such as "1s", got integer 60`},
		{"[writer]\nlive_idle = \"200ms\"\n", `key "writer.live_idle" in /etc/dshfs/dshfs.toml: 0 or at least 1s (a shorter idle period reads a session's whole log back between the batches of one turn), got 200ms`},
	} {
		_, err := Parse([]byte(c.toml), "/etc/dshfs/dshfs.toml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.toml, err, c.want)
		}
	}
}
