package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/dshfs/dshfs/config"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/eventstore/postgres"
	"github.com/dshfs/dshfs/eventstore/sqlite"
)

// Exit codes of docs/cli.md.
const (
	exitOK       = 0
	exitFound    = 1 // a refusal, corruption or difference was found
	exitUsageErr = 2 // usage or I/O error
)

const usage = `usage:
  dshfs mount [--config FILE] [--read-only] [--allow-other] [--nonempty] [--demo] [STORE] MOUNTPOINT
  dshfs demo DIR                       (writes DIR/sessions and DIR/spill)
  dshfs ls [--config FILE] [--json] STORE
  dshfs cat [--config FILE] [--inspect] [--view VIEW] STORE ID
  dshfs index [--config FILE] [--page N] STORE
  dshfs check [--config FILE] [--json] STORE [ID...]
  dshfs append [--config FILE] [--force] STORE ID [FILE|-]
  dshfs create [--config FILE] [--cwd DIR] [--generation auto|0|4] STORE [ID]
  dshfs resume [--config FILE] [--force] STORE ID
  dshfs fork [--config FILE] STORE ID [BOUNDARY] [CHILD_ID]
  dshfs compact [--config FILE] [--force] STORE ID [START END]
  dshfs backup [--config FILE] [--mount MNT] [--with-spill] [--allow-empty] STORE DEST
  dshfs verify [--config FILE] DEST
  dshfs restore [--config FILE] [--allow-empty] [--force] BACKUP DEST
  dshfs convert [--config FILE] [--verify] [--session ID]... SRC DST
  dshfs sync [--config FILE] [--watch] [--release ID] [--host NAME] SRC DST
  dshfs pg init [--config FILE] DSN
  dshfs version | dshfs help [CMD] | dshfs CMD --help

STORE: a JSONL root directory (encoding detected; zstd for a new root), or jsonl:PATH (zstd),
jsonl+raw:PATH (uncompressed), sqlite:PATH or a SQLite database file (the harness's schema 17), or
a fleet store: postgres://… or postgresql://… (a PostgreSQL DSN, libpq rules; docs/fleet.md).
VIEW: events (default) | raw | header | status | surface | messages | shadowed | transcript |
transcript-html | usage | usage-svg | event:SEQ | turn:N | trace:SEQ | compactions | prunes | spill
mount's default STORE: the config's store, else $DSH_HOME/sessions, else ~/.dsh/sessions.
`

// usageError is a command-line mistake: exit 2 with the command's synopsis (usageHint).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// opts holds the parsed flags; positional arguments are returned beside them.
type opts struct {
	config     string
	json       bool
	inspect    bool
	view       string
	readOnly   bool
	allowOther bool
	demo       bool
	nonempty   bool
	cwd        string
	generation string // create --generation
	mount      string
	withSpill  bool
	verify     bool
	page       string
	force      bool
	sessions   []string // --session ID, repeatable
	watch      bool
	release    string
	host       string
}

// parseArgs accepts flags anywhere among the arguments (docs/cli.md); `--` ends flag parsing. A negative
// number is an argument, not a flag (no flag is a number): `dshfs fork STORE ID -1` gives the boundary -1.
func parseArgs(args []string, allowed map[string]bool) (opts, []string, error) {
	o := opts{view: "events"}
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" || negativeNumber(a) {
			pos = append(pos, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !allowed[name] {
			return o, nil, &usageError{fmt.Sprintf("unknown flag %s", a)}
		}
		takesValue := name == "config" || name == "view" || name == "cwd" || name == "mount" || name == "page" ||
			name == "session" || name == "release" || name == "host" || name == "generation"
		if takesValue && !hasVal {
			if i+1 >= len(args) {
				return o, nil, &usageError{fmt.Sprintf("flag --%s needs a value", name)}
			}
			i++
			val = args[i]
		} else if !takesValue && hasVal {
			return o, nil, &usageError{fmt.Sprintf("flag --%s takes no value", name)}
		}
		switch name {
		case "config":
			o.config = val
		case "view":
			o.view = val
		case "page":
			o.page = val
		case "json":
			o.json = true
		case "inspect":
			o.inspect = true
		case "read-only":
			o.readOnly = true
		case "allow-other":
			o.allowOther = true
		case "demo":
			o.demo = true
		case "cwd":
			o.cwd = val
		case "generation":
			o.generation = val
		case "nonempty":
			o.nonempty = true
		case "mount":
			o.mount = val
		case "with-spill":
			o.withSpill = true
		case "verify":
			o.verify = true
		case "force":
			o.force = true
		case "session":
			o.sessions = append(o.sessions, val)
		case "watch":
			o.watch = true
		case "release":
			o.release = val
		case "host":
			o.host = val
		}
	}
	return o, pos, nil
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsageErr
	}
	out := bufio.NewWriterSize(stdout, 1<<16)
	defer out.Flush()
	stderr = maskSecrets(stderr, args)
	ctx := context.Background()
	defer closeBackends()
	var code int
	var err error
	if _, known := commandHelp[args[0]]; known && wantsHelp(args[1:]) {
		if err := printHelp(out, args[0]); err != nil {
			fmt.Fprintf(stderr, "dshfs: %s\n", err)
			return exitUsageErr
		}
		return exitOK
	}
	// Only a mount tunes the collector (mount.go). The other commands run on the runtime's defaults: with
	// the collector off below a 160 MiB soft limit, a cold cat of 500k events was no faster (bench/load.sh
	// with BASE set: 3.69 s against 3.38 s without) and ls of 10k sessions within the noise (bench/list.sh:
	// 1.98 s against 2.09 s, the harness's list() 24 s), for a heap that grew to the limit before its
	// first collection: ls peaked at 125 MiB of RSS for 31 without.
	switch args[0] {
	case "ls":
		code, err = cmdLs(ctx, args[1:], out, stderr)
	case "cat":
		code, err = cmdCat(ctx, args[1:], out)
	case "index":
		code, err = cmdIndex(ctx, args[1:], out)
	case "check":
		code, err = cmdCheck(ctx, args[1:], out, stderr)
	case "mount":
		code, err = cmdMount(args[1:], stderr)
	case "demo":
		code, err = cmdDemo(args[1:], out)
	case "append":
		code, err = cmdAppend(ctx, args[1:], stdin, out, stderr)
	case "resume":
		code, err = cmdResume(ctx, args[1:], out)
	case "fork":
		code, err = cmdFork(ctx, args[1:], out)
	case "create":
		code, err = cmdCreate(ctx, args[1:], out)
	case "compact":
		code, err = cmdCompact(ctx, args[1:], out)
	case "backup":
		code, err = cmdBackup(ctx, args[1:], out, stderr)
	case "verify":
		code, err = cmdVerify(ctx, args[1:], out)
	case "restore":
		code, err = cmdRestore(ctx, args[1:], out)
	case "convert":
		code, err = cmdConvert(ctx, args[1:], out, stderr)
	case "sync":
		code, err = cmdSync(ctx, args[1:], out, stderr)
	case "pg":
		code, err = cmdPg(ctx, args[1:], out)
	case "help", "-h", "--help":
		cmd := ""
		if len(args) > 1 {
			cmd = args[1]
		}
		err = printHelp(out, cmd)
	case "version", "--version":
		fmt.Fprint(out, versionText())
	default:
		err = &usageError{fmt.Sprintf("unknown command %q", args[0])}
	}
	if err != nil {
		out.Flush()
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "dshfs: %s\n%s\n", err, usageHint(args[0]))
			return exitUsageErr
		}
		fmt.Fprintf(stderr, "dshfs: %s\n", err)
		if code == exitOK {
			code = exitUsageErr
		}
	}
	return code
}

// loadConfig reads --config FILE (docs/configuration.md); without one, the defaults.
func loadConfig(path string) (config.Config, error) {
	cfg, err := config.Load(expandHome(path))
	if err != nil {
		return cfg, fmt.Errorf("--config: %w", err)
	}
	return cfg, nil
}

func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, strings.TrimPrefix(p, "~"))
		}
	}
	return p
}

// openExisting is openStore for commands that read a store: a STORE that does not exist is an error (a
// mistyped path must not pass as an empty store). Commands that only read pass a config with ReadOnly.
func openExisting(spec string, cfg config.Config) (*eventstore.Store, error) {
	st, err := openStore(spec, cfg)
	if err != nil {
		return nil, err
	}
	if root := storeRoot(st); root != "" {
		if _, err := os.Stat(root); err != nil {
			return nil, fmt.Errorf("store %s: %w", root, errors.Unwrap(err))
		}
	}
	return st, nil
}

// storeName is how a warning names the store: its root, or a fleet store's DSN without its password.
func storeName(st *eventstore.Store) string {
	if b, ok := st.Backend().(*postgres.Backend); ok {
		return b.Location()
	}
	return storeRoot(st)
}

// storeRoot is the absolute root of a directory store, or the database file of a SQLite store; "" for a
// fleet store, which is no path.
func storeRoot(st *eventstore.Store) string {
	switch b := st.Backend().(type) {
	case interface{ Root() string }:
		return b.Root()
	case *sqlite.Backend:
		return b.Path()
	}
	return ""
}

// warnEmpty says so on stderr when a listing found nothing at all: a directory without the store layout
// is most often the wrong directory (DIR instead of DIR/sessions after `dshfs demo DIR`).
func warnEmpty(stderr io.Writer, st *eventstore.Store, l eventstore.Listing) {
	if len(l.Entries) > 0 || len(l.RootErrors) > 0 {
		return
	}
	root := storeRoot(st)
	hint := ""
	if fi, err := os.Stat(filepath.Join(root, "sessions")); root != "" && err == nil && fi.IsDir() {
		hint = " (did you mean " + filepath.Join(root, "sessions") + "?)"
	}
	fmt.Fprintf(stderr, "dshfs: warning: %s holds no sessions%s\n", storeName(st), hint)
}

// jsonlLayout reports whether a directory holds a JSONL store's project directories.
func jsonlLayout(dir string) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() && (strings.HasPrefix(e.Name(), "--") || e.Name() == "_no-cwd") {
			return true
		}
	}
	return false
}

// isDatabaseName reports a path named like a SQLite database file.
func isDatabaseName(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".db", ".sqlite", ".sqlite3":
		return true
	}
	return false
}

// openStore resolves a STORE argument (docs/cli.md) to a Store; a JSONL root holding no session yet gets
// the configured writer.compression.
func openStore(spec string, cfg config.Config) (*eventstore.Store, error) {
	if postgres.IsDSN(spec) {
		return openFleet(spec, cfg)
	}
	kind, path := "", spec
	for _, k := range []string{"jsonl+raw", "jsonl", "sqlite"} {
		if rest, ok := strings.CutPrefix(spec, k+":"); ok {
			kind, path = k, rest
			break
		}
	}
	path = expandHome(path)
	if path == "" {
		return nil, &usageError{"empty STORE"}
	}
	if kind == "" {
		fi, err := os.Stat(path)
		switch {
		case err == nil && fi.Mode().IsRegular() && !sqlite.IsDatabase(path):
			return nil, fmt.Errorf("store %s is a file, not a store: give the store's root directory (the one holding --<project>--/<session>/ directories), or a SQLite database", path)
		case err == nil && fi.Mode().IsRegular():
			kind = "sqlite"
		case err == nil && !fi.IsDir():
			return nil, fmt.Errorf("store %s is neither a directory nor a SQLite file", path)
		case errors.Is(err, os.ErrNotExist) && isDatabaseName(path):
			kind = "sqlite" // a new store named like a database file (convert's destination)
		case err == nil && sqlite.IsDatabase(filepath.Join(path, sqlite.MirrorName)) && !jsonlLayout(path):
			// a directory holding a SQLite store's sessions.db (a backup, a restore, a store/ copy)
			kind, path = "sqlite", filepath.Join(path, sqlite.MirrorName)
		}
	}
	var b eventstore.Backend
	if kind == "sqlite" {
		// A database is opened read-only wherever nothing may be written (ls, cat, check, a --read-only
		// mount): no journal mode change, no initialization, no write.
		db, err := sqlite.Open(path, sqlite.Options{ReadOnly: cfg.ReadOnly, JournalMode: cfg.SQLite.JournalMode,
			BusyTimeout: cfg.SQLite.BusyTimeout, MaxData: cfg.Writer.MaxLineBytes,
			MaxSession: cfg.Writer.MaxSessionBytes, Tuning: tuning()})
		if err != nil {
			return nil, err
		}
		b = db
	} else {
		var mode jsonl.Compression
		switch kind {
		case "jsonl":
			mode = jsonl.Zstd
		case "jsonl+raw":
			mode = jsonl.None
		}
		empty := jsonl.Zstd
		if cfg.Writer.Compression == config.CompressionNone {
			empty = jsonl.None
		}
		jb, err := jsonl.OpenDefault(path, mode, empty)
		if err != nil {
			return nil, err
		}
		jb.SetLimits(cfg.Writer.MaxLineBytes, cfg.Writer.MaxFrameBytes)
		jb.SetSessionLimit(cfg.Writer.MaxSessionBytes)
		jb.SetTuning(tuning())
		installFaults(jb)
		b = jb
	}
	return newStore(b, cfg), nil
}

// tuning is how parallel the store's heavy work runs (eventstore.Tuning): one worker per P, as GOMAXPROCS
// stands when the store is opened (a mount adds its spare P first: spareProc).
func tuning() eventstore.Tuning { return eventstore.Tuning{Workers: runtime.GOMAXPROCS(0)} }

// newStore wraps a backend with the writer settings of cfg.
func newStore(b eventstore.Backend, cfg config.Config) *eventstore.Store {
	st := eventstore.New(b)
	st.Tuning = tuning()
	st.Window, st.MaxLine = cfg.Writer.BatchWindow, cfg.Writer.MaxLineBytes
	st.ForeignQuiet = cfg.Writer.ForeignQuiet
	st.LiveBytes, st.LiveIdle = cfg.Writer.LiveBytes, cfg.Writer.LiveIdle
	if st.Window == 0 {
		st.Window = time.Nanosecond // batch_window = 0: each accepted request is written at once
	}
	return st
}

// openFleet opens a fleet store (docs/fleet.md): read-only wherever nothing may be written (no DDL, a
// read-only role suffices), else creating the schema in an empty database.
func openFleet(dsn string, cfg config.Config) (*eventstore.Store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := postgres.Open(ctx, dsn, postgres.Options{ReadOnly: cfg.ReadOnly, Host: cfg.Fleet.Host,
		MaxData: cfg.Writer.MaxLineBytes, MaxSession: cfg.Writer.MaxSessionBytes, ReleaseAfter: cfg.Fleet.ReleaseAfter,
		Tuning: tuning(), Timeout: cfg.Fleet.Timeout})
	if err != nil {
		return nil, err
	}
	opened.Lock()
	opened.list = append(opened.list, b)
	opened.Unlock()
	return newStore(b, cfg), nil
}

// opened are the backends holding connections (a fleet store's) that this run opened: closed when the
// command ends, so that a run inside a longer process (the tests) leaves no connection behind.
var opened struct {
	sync.Mutex
	list []io.Closer
}

func closeBackends() {
	opened.Lock()
	list := opened.list
	opened.list = nil
	opened.Unlock()
	for _, c := range list {
		c.Close()
	}
}

// usageHint follows a usage error: the command's synopsis and where its help is, two lines rather than the
// whole usage (which buries the one line that went wrong).
func usageHint(cmd string) string {
	help, ok := commandHelp[cmd]
	if !ok {
		return "commands: " + strings.Join(commandNames(), " ") + "; see dshfs help"
	}
	synopsis, _, _ := strings.Cut(help, "\n")
	return "usage: " + synopsis + "\nsee dshfs help " + cmd
}

// negativeNumber reports an argument of the form -N (decimal digits).
func negativeNumber(a string) bool {
	if len(a) < 2 || a[0] != '-' {
		return false
	}
	for _, c := range a[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
