package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/dshfs/dshfs/backup"
	"github.com/dshfs/dshfs/config"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/spill"
)

// backupOptions are the backup package's options for this configuration, with a progress bar on a
// terminal (stderr).
func backupOptions(cfg config.Config, verb string) (backup.Options, func()) {
	var bar *progress
	opts := backup.Options{
		Open:           func(root string) (*eventstore.Store, error) { return openExisting(root, readOnly(cfg)) },
		Spill:          spill.NewRoots(cfg.Spill.Roots),
		Version:        Version,
		HarnessRelease: HarnessRelease,
		Progress: func(done, total int) {
			if bar == nil {
				bar = newProgress(os.Stderr, verb, total)
			}
			bar.step(done)
		},
	}
	return opts, func() {
		if bar != nil {
			bar.done()
		}
	}
}

// readOnly is cfg for a command that only reads its store.
func readOnly(cfg config.Config) config.Config {
	cfg.ReadOnly = true
	return cfg
}

// takeFlag removes a boolean flag this file's commands add to parseArgs' set (--allow-empty, --force)
// from args, before `--`, and reports whether it was there.
func takeFlag(args []string, name string) ([]string, bool, error) {
	var out []string
	found := false
	for i, a := range args {
		if a == "--" {
			out = append(out, args[i:]...)
			break
		}
		n, _, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && n == name {
			if hasVal {
				return nil, false, &usageError{fmt.Sprintf("flag --%s takes no value", name)}
			}
			found = true
			continue
		}
		out = append(out, a)
	}
	return out, found, nil
}

// warner prints a warning of a command on stderr.
func warner(stderr io.Writer) func(format string, a ...any) {
	return func(format string, a ...any) { fmt.Fprintf(stderr, "dshfs: warning: "+format+"\n", a...) }
}

// refuseInsideMount refuses a STORE that lies inside a dshfs mount: a backup of MNT/sessions (or of any
// view of a mount) copies rendered views, not the store's artifacts, and lists them as root errors or as
// nothing at all. It is decided from /proc/mounts alone, before STORE is opened, so a STORE inside a
// stopped mount is refused rather than hanging the command on it.
func refuseInsideMount(storeDir string, mounts []backup.MountEntry) error {
	m, ok := backup.EnclosingMount(mounts, storeDir)
	if !ok {
		return nil
	}
	how := "dshfs backup ROOT DEST, ROOT being the \"root\" of " + filepath.Join(m.Point, "status.json")
	if root, err := backup.MountRoot(m.Point); err == nil {
		how = "dshfs backup " + root + " DEST"
	} else if errors.Is(err, backup.ErrUnresponsive) {
		how += "; that mount " + err.Error() + ": a stopped or wedged dshfs"
	}
	return fmt.Errorf("%s lies inside the dshfs mount at %s, whose files are views of a store, not its artifacts: "+
		"back up the mount's real store instead (%s), or copy %s with rsync",
		storeDir, m.Point, how, filepath.Join(m.Point, "store")+"/")
}

// sameStore reports whether two store paths name the same root (symlinks resolved).
func sameStore(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}

// cmdBackup takes a backup of STORE into DEST: through its running mount when there is one (quiesced for
// the copy), else under each session's writer lock. It refuses what would give a backup that proves
// nothing: a STORE with root errors (not a store, or not all of it readable as one), a STORE inside a
// dshfs mount, a --mount serving another store, and — unless --allow-empty — a STORE of no sessions.
func cmdBackup(ctx context.Context, args []string, out *bufio.Writer, stderr io.Writer) (int, error) {
	args, allowEmpty, err := takeFlag(args, "allow-empty")
	if err != nil {
		return exitUsageErr, err
	}
	o, pos, err := parseArgs(args, map[string]bool{"config": true, "mount": true, "with-spill": true})
	if err != nil {
		return exitUsageErr, err
	}
	if len(pos) != 2 {
		return exitUsageErr, &usageError{"backup needs STORE DEST"}
	}
	cfg, err := loadConfig(o.config)
	if err != nil {
		return exitUsageErr, err
	}
	storeDir, dest := pos[0], pos[1]
	if isFleetDSN(storeDir) {
		if o.mount != "" {
			return exitUsageErr, &usageError{"--mount: a fleet store is backed up from the database, not through a mount"}
		}
		return backupFleet(ctx, storeDir, dest, cfg, o.withSpill, allowEmpty, out, stderr)
	}
	warn := warner(stderr)
	mounts, err := backup.Mounts()
	if err != nil {
		return exitUsageErr, err
	}
	if err := refuseInsideMount(storeDir, mounts); err != nil {
		return exitFound, err
	}
	opts, done := backupOptions(cfg, "copied")
	opts.WithSpill = o.withSpill
	// The store is only read: a SQLite store is opened read-only (its copy is made with the online
	// backup API), a JSONL store's sessions are copied under their writer locks.
	st, err := openExisting(storeDir, readOnly(cfg))
	if err != nil {
		return exitUsageErr, err
	}
	opts.Spill = spillRoots(cfg, st)
	defer closeBackend(st.Backend())
	root := storeRoot(st)
	if abs, aerr := filepath.Abs(root); aerr == nil {
		root = abs
	}
	l, err := st.List(ctx)
	if err != nil {
		return exitUsageErr, err
	}
	if n := len(l.RootErrors); n > 0 {
		var msgs []string
		for i, r := range l.RootErrors {
			if i == 3 {
				msgs = append(msgs, fmt.Sprintf("... and %d more (dshfs ls %s lists them)", n-3, storeDir))
				break
			}
			msgs = append(msgs, r.Message)
		}
		return exitFound, fmt.Errorf("%s has %d root errors, so a backup of it would not hold what it seems to: %s; give the store's root directory (the one holding the project directories, or the .db file)",
			root, n, strings.Join(msgs, "; "))
	}
	if len(l.Entries) == 0 {
		warnEmpty(stderr, st, l)
		if !allowEmpty {
			return exitFound, fmt.Errorf("%s holds no sessions: refusing an empty backup (give --allow-empty to take one anyway)", root)
		}
	}
	opts.SourceSessions = len(l.Entries)
	mnt := o.mount
	if mnt != "" {
		served, err := backup.MountRoot(mnt)
		if err != nil {
			return exitUsageErr, fmt.Errorf("--mount %s: not a dshfs mount that answers: %w", mnt, err)
		}
		if !sameStore(served, root) {
			return exitFound, fmt.Errorf("--mount %s serves the store %s, not %s: give that mount's own STORE, or drop --mount", mnt, served, root)
		}
	} else if mnt, err = backup.FindMount(root, warn); err != nil {
		return exitUsageErr, err
	}
	var m *backup.Manifest
	if mnt != "" {
		fmt.Fprintf(stderr, "dshfs: backing up through the mount at %s (quiesced for the copy)\n", mnt)
		m, err = backup.FromMount(ctx, mnt, dest, opts)
	} else {
		m, err = backup.FromStore(ctx, st, root, dest, opts)
	}
	done()
	if err != nil {
		return exitUsageErr, err
	}
	printBackup(out, dest, m)
	return exitOK, nil
}

// printBackup writes backup's one line of output: where the backup is and what it holds.
func printBackup(out *bufio.Writer, dest string, m *backup.Manifest) {
	events := int64(0)
	for _, s := range m.Sessions {
		events += s.Events
	}
	out.Write(append(event.Stringify(event.Object(
		event.Member{Key: "backup", Value: event.String(dest)},
		event.Member{Key: "sessions", Value: event.Int(int64(len(m.Sessions)))},
		event.Member{Key: "events", Value: event.Int(events)},
	)), '\n'))
}

// backupFleet backs up a fleet store, which has no files to copy: as a JSONL store of its sessions
// (backup.FromSessions), which the harness opens and verify proves. The store is only read; a read-only
// role suffices.
func backupFleet(ctx context.Context, spec, dest string, cfg config.Config, withSpill, allowEmpty bool, out *bufio.Writer, stderr io.Writer) (int, error) {
	st, err := openExisting(spec, readOnly(cfg))
	if err != nil {
		return exitUsageErr, err
	}
	defer closeBackend(st.Backend())
	l, err := st.List(ctx)
	if err != nil {
		return exitUsageErr, err
	}
	name := storeName(st)
	if len(l.Entries) == 0 && !allowEmpty {
		return exitFound, fmt.Errorf("%s holds no sessions: refusing an empty backup (give --allow-empty to take one anyway)", name)
	}
	opts, done := backupOptions(cfg, "copied")
	opts.WithSpill = withSpill
	opts.SourceSessions = len(l.Entries)
	writable := cfg
	writable.ReadOnly = false
	opts.Create = func(root string) (eventstore.Backend, error) {
		w, err := openStore(root, writable)
		if err != nil {
			return nil, err
		}
		return w.Backend(), nil
	}
	m, err := backup.FromSessions(ctx, st, name, dest, opts)
	done()
	var partial *backup.PartialError
	if errors.As(err, &partial) {
		// taken without the sessions it names: DEST is a backup of the others
		printBackup(out, dest, m)
		return exitFound, err
	}
	if err != nil {
		return exitUsageErr, err
	}
	printBackup(out, dest, m)
	return exitOK, nil
}

// cmdVerify reports every problem of a backup, one line each, and exits as check does; a backup with
// none gets a one-line summary of what it holds.
func cmdVerify(ctx context.Context, args []string, out *bufio.Writer) (int, error) {
	return verifyTo(ctx, args, out, os.Stderr)
}

func verifyTo(ctx context.Context, args []string, out *bufio.Writer, stderr io.Writer) (int, error) {
	o, pos, err := parseArgs(args, map[string]bool{"config": true})
	if err != nil {
		return exitUsageErr, err
	}
	if len(pos) != 1 {
		return exitUsageErr, &usageError{"verify needs DEST"}
	}
	cfg, err := loadConfig(o.config)
	if err != nil {
		return exitUsageErr, err
	}
	if _, err := os.Stat(pos[0]); err != nil {
		return exitUsageErr, err
	}
	opts, _ := backupOptions(cfg, "verified")
	counts, problems, ioErr := backup.Verify(ctx, pos[0], opts)
	for _, p := range problems {
		id := "-"
		if p.ID != "" {
			id = textField(p.ID)
		}
		fmt.Fprintf(out, "%s\t%s\t%s\n", id, p.Kind, textField(p.Message))
	}
	switch {
	case ioErr:
		return exitUsageErr, nil
	case len(problems) > 0:
		return exitFound, nil
	}
	if counts.Sessions == 0 {
		fmt.Fprintf(stderr, "dshfs: warning: the backup %s holds no sessions\n", pos[0])
	}
	fmt.Fprintf(out, "verified: %d sessions, %d events, %d files\n", counts.Sessions, counts.Events, counts.Files)
	return exitOK, nil
}

// cmdRestore restores a verified backup into a new, empty root; --force restores one that does not
// verify, --allow-empty one of no sessions.
func cmdRestore(ctx context.Context, args []string, out *bufio.Writer) (int, error) {
	return restoreTo(ctx, args, out, os.Stderr)
}

func restoreTo(ctx context.Context, args []string, out *bufio.Writer, stderr io.Writer) (int, error) {
	args, allowEmpty, err := takeFlag(args, "allow-empty")
	if err != nil {
		return exitUsageErr, err
	}
	args, force, err := takeFlag(args, "force")
	if err != nil {
		return exitUsageErr, err
	}
	o, pos, err := parseArgs(args, map[string]bool{"config": true})
	if err != nil {
		return exitUsageErr, err
	}
	if len(pos) != 2 {
		return exitUsageErr, &usageError{"restore needs BACKUP DEST"}
	}
	cfg, err := loadConfig(o.config)
	if err != nil {
		return exitUsageErr, err
	}
	opts, done := backupOptions(cfg, "restored")
	opts.AllowEmpty, opts.Force, opts.Warn = allowEmpty, force, warner(stderr)
	m, err := backup.Restore(ctx, pos[0], pos[1], opts)
	done()
	if err != nil {
		return exitFound, err
	}
	out.Write(append(event.Stringify(event.Object(
		event.Member{Key: "restored", Value: event.String(pos[1])},
		event.Member{Key: "sessions", Value: event.Int(int64(len(m.Sessions)))},
	)), '\n'))
	return exitOK, nil
}
