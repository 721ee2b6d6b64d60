package mount

import (
	"context"
	"time"

	"github.com/dshfs/dshfs/eventstore"
)

// Change watching. The kernel caches a file's attributes for the attribute timeout, so a reader polling
// `stat` or `tail -f` sees an append made by another process only when the mount tells the kernel. Polling
// the store every refresh_interval bounds that lag by the interval (and costs a listing of every session
// each time); a backend that announces its changes (eventstore.Watcher) tells the mount at once — inotify
// for a store in this host's files (JSONL, SQLite), the database's notifications for a fleet store on
// PostgreSQL, where no inotify event reaches this host:
//
//   - an announced session the listing knows has its kernel caches dropped at once (tail -f follows), and
//     its artifact stat is no longer trusted;
//   - a session the listing does not know (created), one whose artifact is gone or replaced (a new
//     incarnation), a burst of announcements and anything else ("") start a listing pass (bursts
//     coalesced), which finds what changed and tells the kernel.
//
// While the feed runs, the listing is a safety net at a slower pace (feedPoll), and the mount trusts an
// artifact stat until the feed drops it (statArtifact), and keeps names longer (StableTimeouts) — only as
// far as the feed vouches for them (eventstore.WatchCoverage: inotify on a network filesystem hears of this
// host's writes only, a database's own files name no session). Without a feed, or where it cannot watch
// every directory, the mount says so in its log and polls every refresh_interval.

// feedPoll is the safety-net listing interval while a change feed hears of every change: events a feed
// does not report (a network filesystem, a change made before the watch was added) are still found.
const feedPoll = time.Minute

// feedBurst is how many distinct sessions one read of the feed may announce before a listing pass is
// cheaper than an artifact stat per session (a sync writing many sessions at once).
const feedBurst = 64

// watchRefresh is the change-watching mode without a feed, as stats.json names it: a listing pass every
// refresh_interval. With a feed, the mode is the feed's own ("inotify", "listen", "poll").
const watchRefresh = "refresh"

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
	if f.cover != nil && f.cover.Gap() == nil && !f.cover.Vouches("") {
		// a network filesystem's other hosts raise no event here; a database's files name no session
		f.log.Info("the store's change feed does not vouch for the sessions' files (a network filesystem, " +
			"whose other hosts' writes only the safety-net listing finds, or a store kept in files of its own): " +
			"every access stats the artifact, and names keep the configured timeouts")
	}
	f.noteGap()
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
			if f.cover == nil {
				// a feed that announces every commit asks for a listing only when it may have missed some
				f.log.Info("the store's change feed may have missed changes (reconnected): listing the store again")
			}
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

// covered reports whether every change is heard of as it happens (a running feed with no gap): the
// listing is then a safety net at a slower pace.
func (f *FS) covered() bool {
	return f.feedLive.Load() && (f.cover == nil || f.cover.Gap() == nil)
}

// noteGap logs, once, that the feed cannot hear of every change (a directory inotify could not watch).
func (f *FS) noteGap() {
	if f.cover == nil || !f.feedLive.Load() {
		return
	}
	if gap := f.cover.Gap(); gap != nil && f.gapSaid.CompareAndSwap(false, true) {
		f.log.Info("the store's change feed cannot hear of every change; changes there are found by polling "+
			"every refresh_interval", "err", gap)
	}
}
