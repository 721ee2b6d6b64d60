package eventstore

import "context"

// Watcher is implemented by a backend that can announce the changes made to its store, so that a mount
// (and `dshfs sync --watch`) follows the store without listing it again and again: a fleet store on
// PostgreSQL through the database's own notifications, a store in this host's files (JSONL, SQLite)
// through inotify. Without it, the store is listed at an interval.
type Watcher interface {
	// Watch starts the change feed, which runs until ctx ends (the channel is closed then). Each value is
	// the id of a session whose artifact a write changed; "" means the store changed in a way only a
	// listing finds (a session created, removed or replaced, or changes missed), and the whole store is
	// to be listed again. mode says how the backend hears of changes — "listen" (the database tells it at
	// each commit), "poll" (it compares revisions at an interval, where it cannot be told), "inotify" (the
	// kernel tells it) — for the log and the mount's stats. An error means no feed at all: the caller
	// polls.
	Watch(ctx context.Context) (changed <-chan string, mode string, err error)
}

// WatchCoverage is implemented by a Watcher whose feed hears of some changes only: inotify hears of the
// changes this host's kernel makes, in the directories it could watch. A Watcher without it announces
// every committed write (a database's change feed), so while its feed runs every stat stays true until
// the feed names the session.
type WatchCoverage interface {
	// Gap is why the running feed may miss changes anywhere in the store (a directory it could not
	// watch), nil while it hears of every change it was set up for; a caller then lists the store at a
	// slower pace, as a safety net.
	Gap() error
	// Vouches reports whether the running feed announces every change to the artifact at path as it
	// happens, so that a stat of it stays true until the feed names its session (path "": whether it
	// does so for every artifact of the store, so that names may be kept longer). It does not on a
	// network filesystem (another host's writes raise no event here) or for a store kept in files of its
	// own (a change to them names no session).
	Vouches(path string) bool
}
