package fs

import (
	"context"
	"time"

	"github.com/dshfs/dshfs/eventstore"
)

// Change feed. A store that other hosts write to over the network (a fleet store on PostgreSQL) raises no
// inotify event here; it announces its committed writes itself (eventstore.Watcher). The mount treats an
// announced session as inotify's written artifact: the session's kernel caches are dropped at once (tail
// -f follows), its artifact stat is no longer trusted. A session the listing does not know (created), one
// whose artifact is gone or replaced (a new incarnation), a burst of announcements and a feed that may have
// missed some ("") start a listing pass instead, which finds what changed and tells the kernel, as
// inotify's structural events do. While the feed runs, the listing is a safety net at inotify's pace, and
// the mount trusts an artifact stat until the feed drops it (statArtifact), as it does under inotify.

// feedBurst is how many distinct sessions one read of the feed may announce before a listing pass is
// cheaper than an artifact stat per session (a sync writing many sessions at once).
const feedBurst = 64

// Change-watching modes, as stats.json names them ("listen" and "poll" are the feed's own).
const (
	watchInotify = "inotify" // inotify on the store's directories
	watchRefresh = "refresh" // a listing pass every refresh_interval
)

// watchFeed starts the backend's change feed; ok is false when it has none (the caller polls). passNow
// asks the watch loop for a listing pass.
func (f *FS) watchFeed(ctx context.Context, w eventstore.Watcher) (passNow <-chan struct{}, ok bool) {
	ch, mode, err := w.Watch(ctx)
	if err != nil {
		f.log.Warn("the store's change feed cannot start: polling every refresh_interval", "err", err)
		f.watchMode.Store(watchRefresh)
		return nil, false
	}
	f.log.Info("following the store's change feed", "mode", mode)
	f.watchMode.Store(mode)
	f.feedLive.Store(true)
	pass := make(chan struct{}, 1)
	ask := func() {
		select {
		case pass <- struct{}{}:
		default: // a pass is already asked for: bursts coalesce
		}
	}
	go func() {
		for id := range ch {
			f.feedChanged(ctx, drain(id, ch), ask)
		}
		// the feed ended: from now on the listing alone finds changes, every refresh_interval
		f.feedLive.Store(false)
		f.stats.dropAll()
		if ctx.Err() == nil {
			f.log.Warn("the store's change feed ended: polling every refresh_interval")
			f.watchMode.Store(watchRefresh)
			ask() // the loop may be waiting out the safety net's minute
		}
	}()
	return pass, true
}

// drain collects the announcements already waiting behind first, deduplicated (a session written in many
// transactions is announced once per transaction), up to one more than feedBurst.
func drain(first string, ch <-chan string) []string {
	ids := []string{first}
	seen := map[string]bool{first: true}
	for len(ids) <= feedBurst {
		select {
		case id, ok := <-ch:
			if !ok {
				return ids
			}
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		default:
			return ids
		}
	}
	return ids
}

// feedChanged acts on one read of the feed: each announced session the listing knows is invalidated now;
// everything else asks for a listing pass.
func (f *FS) feedChanged(ctx context.Context, ids []string, pass func()) {
	if len(ids) > feedBurst {
		f.stats.dropAll()
		pass()
		return
	}
	l := f.Listing()
	var changed []string
	structural := false
	for _, id := range ids {
		if id == "" {
			f.log.Info("the store's change feed may have missed changes (reconnected): listing the store again")
			structural = true
			continue
		}
		i, ok := l.ByID[id]
		if !ok {
			structural = true
			continue
		}
		changed = append(changed, id)
		// a session deleted, or deleted and created again (its files become new inodes), is the
		// listing's to find: one stat tells, without listing every session
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		art, err := f.opts.Store.Stat(sctx, id, l.Entries[i].Path)
		cancel()
		if err != nil || art.Identity != l.Entries[i].Identity {
			structural = true
		}
	}
	if structural {
		f.stats.dropAll()
		pass()
	}
	if !f.queue(changes{changed: changed}) {
		pass() // the notifier is behind: the listing still holds the old revisions, so a pass finds these
	}
}
