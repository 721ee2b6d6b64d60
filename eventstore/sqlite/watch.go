package sqlite

import (
	"context"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/internal/storewatch"
)

// WatchInotify is the change feed's mode: the kernel tells of each change (inotify).
const WatchInotify = "inotify"

var (
	_ eventstore.Watcher       = (*Backend)(nil)
	_ eventstore.WatchCoverage = (*Backend)(nil)
)

// WatchFiles are the files whose changes mean another connection committed: the database and its WAL.
func (b *Backend) WatchFiles() []string { return []string{b.path, b.path + "-wal"} }

// Watch follows the database with inotify (internal/storewatch) on the directories of its files: any
// commit by any connection writes the database or its WAL, and is announced as "" — one listing (the
// sessions' revisions, not their events) finds which sessions changed.
func (b *Backend) Watch(ctx context.Context) (<-chan string, string, error) {
	w, err := storewatch.New(storewatch.Layout{})
	if err != nil {
		return nil, "", err
	}
	w.Files(b.WatchFiles())
	b.watch.Store(w)
	out := make(chan string, 1)
	go func() {
		<-ctx.Done()
		b.watch.CompareAndSwap(w, nil)
		w.Close()
	}()
	go func() {
		w.Run(func(string) {}, func() {
			select {
			case out <- "":
			default: // a listing is already asked for: bursts coalesce
			}
		})
		close(out)
	}()
	return out, WatchInotify, nil
}

// Gap is why the running feed may miss commits (a directory inotify could not watch); nil while it
// watches both files' directories, or when no feed runs.
func (b *Backend) Gap() error {
	if w := b.watch.Load(); w != nil {
		return w.Gap()
	}
	return nil
}

// Vouches is false: a change to the database names no session, so no session's stat is vouched for.
func (b *Backend) Vouches(string) bool { return false }
