package mount

import (
	"context"
	"os"
	"strings"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/status"
	"github.com/dshfs/dshfs/nodes"
	"github.com/dshfs/dshfs/views"
)

// StoreStatus renders the store's status.json from the latest listing and the write side's state now, as
// the caller of ctx may see them: of the sessions it may read (visible), nothing of the others.
func (f *FS) StoreStatus(ctx context.Context) []byte {
	l := f.Listing()
	entries, _, hidden := f.visible(ctx, l)
	st := status.StoreState{LastError: f.storeErr.Load(), LastQuiesce: f.opts.Store.LastQuiesce()}
	if st.LastError != nil && mentions(st.LastError, hidden) {
		st.LastError = nil // another user's command on a session this caller may not know of
	}
	if sv, ok := f.opts.Store.Backend().(interface{ SchemaVersion() int }); ok {
		st.SchemaVersion = sv.SchemaVersion()
	}
	if until, ok := f.opts.Store.Quiesced(); ok {
		st.QuiescedUntil = &until
	}
	for _, id := range f.opts.Store.LiveIDs() {
		if w := f.opts.Store.Live(id); w != nil && (hidden == nil || f.PermitSession(ctx, id) == 0) {
			st.Live++
			st.Pending += w.Pending()
		}
	}
	listing := eventstore.Listing{Entries: entries, RootErrors: l.RootErrors}
	if hidden != nil {
		listing.RootErrors = nil
		for _, r := range l.RootErrors {
			if f.Permit(ctx, r.Path, nil, 4) == 0 {
				listing.RootErrors = append(listing.RootErrors, r)
			}
		}
	}
	root := f.opts.Root
	if loc, ok := f.opts.Store.Backend().(interface{ Location() string }); ok {
		root = loc.Location() // a store that is no path (a fleet store's DSN, without its password)
	}
	return append(event.Stringify(status.StoreStatus(f.opts.Store.Backend().Name(), root, listing, st)), '\n')
}

// visible is what of listing l the caller of ctx may know: the sessions whose artifacts it could read in
// the store (PermitSession), with their names, and the ids of those it may not (nil when none is left
// out). Under allow_other the store-level files (status.json, stats.json, the index) are built from it,
// so that they tell a user no more than the listings of sessions/ do.
func (f *FS) visible(ctx context.Context, l *nodes.Listing) (entries []eventstore.Entry, names []string, hidden []string) {
	if _, checked := f.caller(ctx); !checked {
		return l.Entries, l.Names, nil
	}
	for i, e := range l.Entries {
		if f.PermitSession(ctx, e.ID) != 0 {
			hidden = append(hidden, e.ID)
			continue
		}
		entries = append(entries, e)
		names = append(names, l.Names[i])
	}
	if hidden == nil {
		return l.Entries, l.Names, nil
	}
	return entries, names, hidden
}

// mentions reports whether a command result's text names one of ids.
func mentions(r *eventstore.Result, ids []string) bool {
	text := r.Message
	if r.Err != nil {
		text += "\n" + r.Err.Message
	}
	text += "\n" + r.Command
	for _, id := range ids {
		if strings.Contains(text, id) {
			return true
		}
	}
	return false
}

// VisibleSessions is how many sessions the caller of ctx may know of (visible): the index's pages are
// counted by it.
func (f *FS) VisibleSessions(ctx context.Context) int {
	entries, _, _ := f.visible(ctx, f.Listing())
	return len(entries)
}

// StoreIndex renders page p of the store's index from the latest listing, each session's row from its
// current snapshot (the view cache's, so a page costs the sessions on it); of the sessions the caller of
// ctx may read only (visible).
//
// A row summarizes a whole session (its turns, tokens, unknown outcomes, compactions), which takes its
// decoded log; a stored session's row is kept until its revision changes, so a page costs one decode of
// each session that changed since it was last shown, not one per session per read (a page's getattr,
// open and reads each render it).
func (f *FS) StoreIndex(ctx context.Context, p int) ([]byte, bool) {
	entries, names, _ := f.visible(ctx, f.Listing())
	return views.StoreIndexRows(ctx, entries, p, func(i int) views.IndexRow {
		e := entries[i]
		live := f.opts.Store.Live(e.ID) != nil // a live session's row moves with its pending events
		if !live && e.Revision != "" {
			if r, ok := f.indexRows.Load(e.ID); ok && r.(indexRow).rev == e.Revision {
				row := r.(indexRow).row
				row.Dir = names[i]
				return row
			}
		}
		s, err := f.Session(ctx, e.ID)
		if err != nil {
			s = views.FromEntry(f.opts.Store, eventstore.Entry{ID: e.ID, ModTime: e.ModTime, Header: e.Header, Refusal: err}, f.viewOptions())
		}
		row := views.IndexRowOf(s, names[i])
		if !live && e.Revision != "" && s.Revision == e.Revision {
			f.indexRows.Store(e.ID, indexRow{rev: e.Revision, row: row})
		}
		return row
	})
}

// indexRow is a stored session's index row as of its revision.
type indexRow struct {
	rev string
	row views.IndexRow
}

// StoreStats renders the root stats.json: the mount's cache counters. They move with every read, so they
// live apart from status.json, which changes only with the store (a copy of the mount diffs clean there).
// decodes counts the sessions decoded (loaded and validated); indexHits the stats and verdicts answered
// from the persistent index instead; readahead the views rendered ahead of a walk; evicted the sessions
// whose nodes the kernel was asked to drop (out of the working set); primed the views handed to the
// kernel's page cache after a lookup; renderedBytes the bytes of views rendered whole, extendedBytes those
// appended to live sessions' growing views. A caller who may not read every session (visible) is shown
// only pid and watch: the counters move with every session's reads and writes, its own or not.
func (f *FS) StoreStats(ctx context.Context) []byte {
	n := func(v int64) event.Value { return event.Number(float64(v)) }
	if _, _, hidden := f.visible(ctx, f.Listing()); hidden != nil {
		return append(event.Stringify(event.Object(
			event.Member{Key: "pid", Value: n(int64(os.Getpid()))},
			event.Member{Key: "watch", Value: event.String(f.WatchMode())},
		)), '\n')
	}
	work := f.cache.Work()
	live := f.opts.Store.LiveMemory()
	return append(event.Stringify(event.Object(
		event.Member{Key: "decodes", Value: n(f.cache.Decodes())},
		event.Member{Key: "indexHits", Value: n(f.cache.IndexHits())},
		event.Member{Key: "readahead", Value: n(f.ahead.done.Load())},
		event.Member{Key: "evicted", Value: n(f.evicted.Load())},
		event.Member{Key: "primed", Value: n(f.primed.Load())},
		// the bytes of views rendered whole, and those added to a live session's growing views by its
		// batches (viewcache/grow.go): following a live session should move the second, not the first
		event.Member{Key: "renderedBytes", Value: n(work.RenderedBytes)},
		event.Member{Key: "extendedBytes", Value: n(work.ExtendedBytes)},
		// the live engines' logs in memory ([writer] live_bytes): how many hold theirs, their estimated
		// bytes, and how many times an idle one released its log and one read it back
		event.Member{Key: "liveResident", Value: n(int64(live.Resident))},
		event.Member{Key: "liveBytes", Value: n(live.Bytes)},
		event.Member{Key: "liveReleased", Value: n(live.Shed)},
		event.Member{Key: "liveReloaded", Value: n(live.Reloaded)},
		// which process serves the mount: a second `dshfs mount` onto it names it (a mount's property, so
		// here and not in status.json, which a copy of the mount must find unchanged)
		event.Member{Key: "pid", Value: n(int64(os.Getpid()))},
		// how the mount hears of changes: inotify, refresh (listing every refresh_interval), or a store's
		// change feed — listen (told at each commit) or poll (the store's revisions compared every second)
		event.Member{Key: "watch", Value: event.String(f.WatchMode())},
	)), '\n')
}

// WatchMode is how the mount hears of changes made by others (stats.json's watch): "inotify", "refresh",
// or the store's change feed, "listen" or "poll"; "" before watching starts.
func (f *FS) WatchMode() string {
	m, _ := f.watchMode.Load().(string)
	return m
}
