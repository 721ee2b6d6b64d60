package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

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

// cmdBackup takes a backup of STORE into DEST: through its running mount when there is one (quiesced for
// the copy), else under each session's writer lock.
func cmdBackup(ctx context.Context, args []string, out *bufio.Writer, stderr io.Writer) (int, error) {
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
	opts, done := backupOptions(cfg, "copied")
	opts.WithSpill = o.withSpill
	// The store is only read: a SQLite store is opened read-only (its copy is made with the online
	// backup API), a JSONL store's sessions are copied under their writer locks.
	st, err := openExisting(storeDir, readOnly(cfg))
	if err != nil {
		return exitUsageErr, err
	}
	defer closeBackend(st.Backend())
	mnt := o.mount
	if mnt == "" {
		if mnt, err = backup.FindMount(storeRoot(st)); err != nil {
			return exitUsageErr, err
		}
	}
	var m *backup.Manifest
	if mnt != "" {
		fmt.Fprintf(stderr, "dshfs: backing up through the mount at %s (quiesced for the copy)\n", mnt)
		m, err = backup.FromMount(ctx, mnt, dest, opts)
	} else {
		root := storeRoot(st)
		if abs, aerr := filepath.Abs(root); aerr == nil {
			root = abs
		}
		m, err = backup.FromStore(ctx, st, root, dest, opts)
	}
	done()
	if err != nil {
		return exitUsageErr, err
	}
	events := int64(0)
	for _, s := range m.Sessions {
		events += s.Events
	}
	out.Write(append(event.Stringify(event.Object(
		event.Member{Key: "backup", Value: event.String(dest)},
		event.Member{Key: "sessions", Value: event.Int(int64(len(m.Sessions)))},
		event.Member{Key: "events", Value: event.Int(events)},
	)), '\n'))
	return exitOK, nil
}

// cmdVerify reports every problem of a backup, one line each, and exits as check does.
func cmdVerify(ctx context.Context, args []string, out *bufio.Writer) (int, error) {
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
	problems, ioErr := backup.Verify(ctx, pos[0], opts)
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
	return exitOK, nil
}

// cmdRestore restores a verified backup into a new, empty root.
func cmdRestore(ctx context.Context, args []string, out *bufio.Writer) (int, error) {
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
