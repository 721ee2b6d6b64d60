package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/postgres"
	"github.com/dshfs/dshfs/internal/demo"
	"github.com/dshfs/dshfs/mount"
)

// cmdMount mounts a store and serves it in the foreground until a signal (docs/cli.md).
func cmdMount(args []string, stderr io.Writer) (int, error) {
	o, pos, err := parseArgs(args, map[string]bool{"config": true, "read-only": true, "allow-other": true, "demo": true, "nonempty": true})
	if err != nil {
		return exitUsageErr, err
	}
	cfg, err := loadConfig(o.config)
	if err != nil {
		return exitUsageErr, err
	}
	var storeSpec, mountpoint string
	defaultStore := false
	switch {
	case len(pos) == 1:
		storeSpec, mountpoint, defaultStore = cfg.Store, pos[0], true
	case len(pos) == 2 && !o.demo:
		storeSpec, mountpoint = pos[0], pos[1]
	case len(pos) == 2 && o.demo:
		mountpoint = pos[1] // --demo ignores STORE
	default:
		return exitUsageErr, &usageError{"mount needs [STORE] MOUNTPOINT"}
	}
	// Subscribe before anything is set up: a SIGINT/SIGTERM from now on ends the mount cleanly (handled by
	// Serve once it runs) instead of killing the process with a mount or a created mountpoint left behind.
	sigs, stopSignals := mount.Signals()
	defer stopSignals()
	if o.allowOther {
		cfg.FUSE.AllowOther = true
	}
	if o.readOnly {
		cfg.ReadOnly = true
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	// The caches are bounded by their budgets and the node tree by session (mount/trees.go); a soft memory
	// limit of the budgets plus 112 MiB for the rest (the working set of the requests in flight, the node
	// tree, the runtime) keeps the garbage collector from doubling that in idle heap under a long walk
	// (grep -r): with the default budgets the process stays within 256 MiB (tested). It follows the live
	// heap above that (a large session's decode), so it never makes the collector run back to back.
	defer softMemoryLimit(cfg.Cache.SessionsBytes + cfg.Cache.ViewsBytes + 112<<20)()
	spareProc() // before the store is opened: its tuning and the readahead follow the Ps
	if o.demo {
		dir, err := os.MkdirTemp("", "dshfs-demo-")
		if err != nil {
			return exitUsageErr, err
		}
		defer os.RemoveAll(dir)
		if err := demo.Write(dir); err != nil {
			return exitUsageErr, err
		}
		storeSpec = filepath.Join(dir, "sessions") // its spill files are in DIR/spill, its home's (spillRoots)
		log.Info("demo store", "dir", dir)
	}
	open := openExisting
	if defaultStore || o.demo {
		open = openStore // the default store may not exist yet: an absent root is an empty store
	}
	st, err := open(storeSpec, cfg)
	if err != nil {
		return exitUsageErr, err
	}
	root := storeRoot(st)
	f, err := mount.New(mount.Options{Store: st, Root: root, Config: cfg, Spill: spillRoots(cfg, st), Log: log, Readahead: runtime.GOMAXPROCS(0)})
	if err != nil {
		return exitUsageErr, err
	}
	if _, err := os.Stat(root); err != nil && defaultStore {
		log.Info("the default store does not exist yet: serving it as an empty store", "store", root)
	} else {
		l := f.Listing()
		warnEmpty(stderr, st, eventstore.Listing{Entries: l.Entries, RootErrors: l.RootErrors})
	}
	// A missing mountpoint is created (and removed again after unmounting), so the quick start needs no
	// mkdir; every mistake is refused before anything is mounted.
	mountpoint, created, err := prepareMountpoint(root, mountpoint, o.nonempty, func(format string, a ...any) { log.Info(fmt.Sprintf(format, a...)) })
	if err != nil {
		return exitUsageErr, err
	}
	if created {
		defer os.Remove(mountpoint)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch := f.StartWatch(ctx) // every directory watched before the mount serves a request
	server, err := f.Mount(ctx, mountpoint)
	if err != nil {
		return exitUsageErr, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	shown := storeSpec
	if postgres.IsDSN(storeSpec) {
		shown = postgres.Redact(storeSpec) // a log is no place for the fleet store's password
	}
	log.Info("mounted", "store", shown, "mountpoint", mountpoint, "sessions", len(f.Listing().Entries), "writable", !cfg.ReadOnly)
	go watch()
	serveErr := mount.Serve(server, mountpoint, sigs, func(format string, a ...any) { log.Info(fmt.Sprintf(format, a...)) },
		func() { f.FlushAll(context.Background()) })
	// Unmounted (by a signal or from outside): every live session is flushed and released; what cannot be
	// written is kept beside its artifact.
	closeErr := f.Close(context.Background())
	if serveErr != nil {
		return exitUsageErr, serveErr
	}
	if closeErr != nil {
		return exitUsageErr, closeErr
	}
	log.Info("unmounted", "mountpoint", mountpoint)
	return exitOK, nil
}

// cmdDemo writes the demo store: DIR/sessions and DIR/spill.
func cmdDemo(args []string, out *bufio.Writer) (int, error) {
	_, pos, err := parseArgs(args, map[string]bool{})
	if err != nil {
		return exitUsageErr, err
	}
	if len(pos) != 1 {
		return exitUsageErr, &usageError{"demo needs DIR"}
	}
	if err := demo.Write(pos[0]); err != nil {
		return exitUsageErr, err
	}
	fmt.Fprintf(out, "demo store written to %s (spill files in %s)\n", filepath.Join(pos[0], "sessions"), filepath.Join(pos[0], "spill"))
	return exitOK, nil
}

// spareProc gives the mount one P (Go's processor) more than the default of one per core, unless
// GOMAXPROCS is set. During a walk over a cold store the readahead workers (mount/readahead.go, one per P)
// render on every P, and the walk waits on each request in turn: the goroutine serving it, woken from its
// read of /dev/fuse, must find a P before it can answer. With a P to spare (and so a worker more), a stat of
// every events.jsonl of a cold 10k-session store took 7.4–8.0 s against 8.5–8.8 s on this project's 2-core
// machine (three alternating runs each; two workers on three Ps: 7.2–8.6 s; a yield after each readahead
// job instead: no change). A repeated walk, which renders nothing, is unchanged.
func spareProc() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
	}
}
