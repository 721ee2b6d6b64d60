package jsonl

import (
	"context"
	"path/filepath"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/internal/storewatch"
)

// WatchInotify is the change feed's mode: the kernel tells of each change (inotify).
const WatchInotify = "inotify"

// watchQueue is how many announcements wait for the feed's reader; past it they become one "" (list the
// store again), so inotify's reader never waits on a slow consumer.
const watchQueue = 1024

var (
	_ eventstore.Watcher       = (*Backend)(nil)
	_ eventstore.WatchCoverage = (*Backend)(nil)
)

// watching is a running change feed: its inotify watcher, and whether the root is on a network
// filesystem (where inotify hears of this host's changes only).
type watching struct {
	w      *storewatch.Watcher
	remote bool
}

// Watch follows the store with inotify (internal/storewatch): the root, every project directory and every
// session directory are watched before it returns, a session's transcript written is announced by its
// id, anything else as "". Each listing (List) then keeps the watches in step with the sessions it found.
// One feed runs at a time: a later Watch takes over the listings' updates.
func (b *Backend) Watch(ctx context.Context) (<-chan string, string, error) {
	w, err := storewatch.New(storewatch.Layout{Transcript: transcript, Quiet: LeaseName})
	if err != nil {
		return nil, "", err
	}
	w.Tree(b.root)
	cur := &watching{w: w, remote: storewatch.RemoteFS(b.root) != ""}
	b.watch.Store(cur)
	out := make(chan string, watchQueue)
	send := func(id string) {
		select {
		case out <- id:
		default: // a full queue: one listing finds everything it held
			select {
			case out <- "":
			default:
			}
		}
	}
	go func() {
		<-ctx.Done()
		b.watch.CompareAndSwap(cur, nil)
		w.Close()
	}()
	go func() {
		w.Run(send, func() { send("") })
		close(out)
	}()
	return out, WatchInotify, nil
}

// Gap is why the running feed may miss changes (a directory inotify could not watch); nil while it
// watches every directory, or when no feed runs.
func (b *Backend) Gap() error {
	if cur := b.watch.Load(); cur != nil {
		return cur.w.Gap()
	}
	return nil
}

// Vouches reports whether the running feed hears of every change to the artifact at path: its directory
// is watched, on a local filesystem (path "": every directory of the store is).
func (b *Backend) Vouches(path string) bool {
	cur := b.watch.Load()
	if cur == nil || cur.remote {
		return false
	}
	if path == "" {
		return cur.w.Complete()
	}
	return cur.w.Watching(filepath.Dir(path))
}

// followListing watches the directories of the sessions a listing found (a session made while events
// were lost is watched from now on), before the listing's caller tells anyone about them.
func (b *Backend) followListing(l eventstore.Listing) {
	cur := b.watch.Load()
	if cur == nil {
		return
	}
	paths := make(map[string]string, len(l.Entries))
	for _, e := range l.Entries {
		if e.Path != "" {
			paths[e.Path] = e.ID
		}
	}
	cur.w.Sessions(b.root, paths)
}

// transcript tells the transcript files — every generation the harness writes, in either encoding — from
// sidecars and temp files in a session directory.
func transcript(name string) bool {
	_, ok := ParseGenerationName(name)
	return ok
}
