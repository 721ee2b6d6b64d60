package fleetsync

import (
	"context"
	"time"

	"github.com/dshfs/dshfs/eventstore"
)

// Following a store (sync --watch). The source backend's change feed (eventstore.Watcher: inotify for a
// store in this host's files) tells at once which session's artifact was written, so a growing session is
// copied as its lines land without listing the store; anything structural (a session or project created,
// renamed, deleted; a SQLite database or its WAL written) starts a pass over the listing, which reads only
// the sessions whose revision changed. A slower pass runs anyway (pollEvery), for what the feed does not
// report; without a feed (or where it cannot watch every directory) the passes are all there is.

// pollEvery is the safety-net pass interval while the feed runs; fallbackPoll the interval without it.
const (
	pollEvery    = 30 * time.Second
	fallbackPoll = 2 * time.Second
	// settle coalesces a burst of writes (a batch is a write, a close and often a lease's open and
	// close) into one read of the session.
	settle = 20 * time.Millisecond
)

// Watch follows the source until ctx ends: each change is synced as it lands, and every report of a
// sync that did something (or refused, skipped or failed) goes to report. notice gets one line when
// the source's change feed cannot be used, or cannot hear of every change, and the source is polled
// instead. It returns nil when ctx ends.
func (s *Syncer) Watch(ctx context.Context, report func(Report), notice func(string)) error {
	s.mu.Lock()
	s.follow = true // a session is read again as it grows: its v4 restore state is worth keeping
	s.mu.Unlock()
	var changes <-chan string // nil without a feed: only the ticks pass
	var cover eventstore.WatchCoverage
	if w, ok := s.src.Backend().(eventstore.Watcher); !ok {
		notice("the store announces no changes: polling it every " + fallbackPoll.String())
	} else if feed, _, err := w.Watch(ctx); err != nil {
		notice("inotify is unavailable (" + err.Error() + "): polling the store every " + fallbackPoll.String())
	} else {
		changes = feed
		cover, _ = s.src.Backend().(eventstore.WatchCoverage)
	}
	// a session's outcome is said once per revision of its source: one that cannot be synced (or keeps
	// failing the same way) is not reported again on every pass, only when it changes or its source does
	said := map[string]string{}
	say := func(r Report) {
		if r.ID != "" && r.Status != Copied {
			key := r.rev + "\x00" + string(r.Status) + "\x00" + r.Reason
			if said[r.ID] == key {
				return
			}
			said[r.ID] = key
		} else if r.ID != "" {
			delete(said, r.ID)
		}
		report(r)
	}
	gapSaid := false
	noteGap := func() {
		if cover == nil || gapSaid {
			return
		}
		if gap := cover.Gap(); gap != nil {
			gapSaid = true
			notice(gap.Error() + ": changes there are found by the pass every " + pollEvery.String())
		}
	}
	noteGap()
	full := true // a first pass finds what changed before the feed started
	poll := pollEvery
	if changes == nil {
		poll = fallbackPoll
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	refresh := time.NewTicker(refreshAfter)
	defer refresh.Stop()
	pending := map[string]bool{}
	for {
		if full {
			full = false
			reports, err := s.Pass(ctx, true) // the source's listing keeps its feed's watches in step
			if ctx.Err() != nil {
				reportCopies(reports, report)
				return nil
			}
			if err != nil {
				report(Report{Status: Failed, Reason: "listing this host's store: " + err.Error()})
			}
			for _, r := range reports {
				if r.Status != Unchanged {
					say(r)
				}
			}
			noteGap()
			continue
		}
		for id := range pending {
			delete(pending, id)
			if !s.listed(id) {
				full = true // a session the last listing did not have: a pass lists it
				continue
			}
			r, ok := s.Session(ctx, id)
			if ctx.Err() != nil {
				if ok {
					reportCopies([]Report{r}, report)
				}
				return nil
			}
			if ok && r.Status != Unchanged {
				say(r)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			full = true
		case <-refresh.C:
			s.Refresh(ctx)
		case id, ok := <-changes:
			if !ok {
				if ctx.Err() != nil {
					return nil // the feed ends with ctx
				}
				// the feed ended: from now on the passes alone find changes
				changes = nil
				notice("the store's change feed ended: polling it every " + fallbackPoll.String())
				tick.Reset(fallbackPoll)
				continue
			}
			// let the burst settle, then take everything it brought
			timer := time.NewTimer(settle)
		drain:
			for {
				if id == "" {
					full = true
				} else {
					pending[id] = true
				}
				select {
				case id, ok = <-changes:
					if !ok {
						timer.Stop()
						break drain // the outer select sees the end
					}
				case <-timer.C:
					break drain
				case <-ctx.Done():
					timer.Stop()
					return nil
				}
			}
		}
	}
}

// reportCopies reports the copies among the results of work a stop interrupted: what was copied is in
// the fleet store, and says so, even when the rest of the pass was cut short.
func reportCopies(reports []Report, report func(Report)) {
	for _, r := range reports {
		if r.Status == Copied {
			report(r)
		}
	}
}
