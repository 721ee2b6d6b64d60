package fleetsync

import (
	"context"
	"time"

	"github.com/dshfs/dshfs/internal/storewatch"
)

// Following a store (sync --watch). inotify tells at once which session's artifact was written, so a
// growing session is copied as its lines land without listing the store; anything structural (a session
// or project created, renamed, deleted; a SQLite database or its WAL written) starts a pass over the
// listing, which reads only the sessions whose revision changed. A slower pass runs anyway (pollEvery),
// for what inotify does not report; without inotify (or out of watches) the passes are all there is.

// pollEvery is the safety-net pass interval while inotify watches; fallbackPoll the interval without it.
const (
	pollEvery    = 30 * time.Second
	fallbackPoll = 2 * time.Second
	// settle coalesces a burst of writes (a batch is a write, a close and often a lease's open and
	// close) into one read of the session.
	settle = 20 * time.Millisecond
)

// Watch follows the source until ctx ends: each change is synced as it lands, and every report of a
// sync that did something (or refused, skipped or failed) goes to report. notice gets one line when
// inotify cannot be used and the source is polled instead. It returns nil when ctx ends.
func (s *Syncer) Watch(ctx context.Context, report func(Report), notice func(string)) error {
	changes := make(chan string, 1024)
	// send reports a change without ever blocking the reader: a full queue becomes one structural change
	send := func(id string) {
		select {
		case changes <- id:
		default:
			select {
			case changes <- "":
			default:
			}
		}
	}
	w, err := storewatch.New(func(dir string, err error) {
		notice("inotify cannot watch " + dir + " (" + err.Error() + "): changes there are found by the pass every " + pollEvery.String())
	})
	if err != nil {
		notice("inotify is unavailable (" + err.Error() + "): polling the store every " + fallbackPoll.String())
	} else {
		defer w.Close()
		go w.Run(send, func() { send("") })
	}
	full := true // the first listing after the pass that preceded Watch sets the watches
	poll := pollEvery
	if w == nil {
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
			if w != nil {
				s.watchAll(w)
			}
			reports, err := s.Pass(ctx, true)
			if ctx.Err() != nil {
				reportCopies(reports, report)
				return nil
			}
			if err != nil {
				report(Report{Status: Failed, Reason: "listing this host's store: " + err.Error()})
			}
			for _, r := range reports {
				if r.Status != Unchanged {
					report(r)
				}
			}
			if w != nil {
				s.watchAll(w) // sessions the pass found
			}
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
				report(r)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			full = true
		case <-refresh.C:
			s.Refresh(ctx)
		case id := <-changes:
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
				case id = <-changes:
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

// watchAll watches the source's root, its project and session directories (JSONL), or the database's
// files (SQLite).
func (s *Syncer) watchAll(w *storewatch.Watcher) {
	b := s.src.Backend()
	if fw, ok := b.(interface{ WatchFiles() []string }); ok {
		if !w.OfFiles() {
			w.Files(fw.WatchFiles())
		}
		return
	}
	r, ok := b.(interface{ Root() string })
	if !ok {
		return
	}
	s.mu.Lock()
	paths := make(map[string]string, len(s.entries))
	for id, e := range s.entries {
		if e.Path != "" {
			paths[e.Path] = id
		}
	}
	s.mu.Unlock()
	w.Sessions(r.Root(), paths)
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
