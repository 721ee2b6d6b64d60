package eventstore

import "context"

// Watcher is implemented by a backend that announces its own changes: a store that other hosts write to
// over the network (a fleet store on PostgreSQL), where no inotify event reaches this host. A mount of it
// learns of every committed write from the feed instead of from the files of the store.
type Watcher interface {
	// Watch starts the change feed, which runs until ctx ends (the channel is closed then). Each value is
	// the id of a session a committed write changed; "" means changes may have been missed (a reconnect)
	// and the whole store is to be listed again. mode says how the backend hears of them — "listen" (the
	// database tells it at each commit) or "poll" (it compares revisions at an interval, where it cannot
	// be told) — for the log and the mount's stats. An error means no feed at all: the caller polls.
	Watch(ctx context.Context) (changed <-chan string, mode string, err error)
}
