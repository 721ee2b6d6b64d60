package eventstore

import (
	"context"
	"path/filepath"

	"github.com/dshfs/dshfs/eventstore/event"
)

// Supersede ends the live state of session id when its listing found it at another artifact than the one
// its engine writes (path): an upgraded harness published a newer generation beside the v0 log this
// process writes, so that log is no longer the session and the harness never reads it again. The write
// that would have met the change (the next flush) is not waited for: the engine refuses new events now, its
// pending events are kept in a sidecar as a conflicting flush keeps them, and it is released, so reads
// serve the session's current artifact at once and the next write reads it again. ended is false when no
// engine of id is live or it writes path; err says what became of the pending events (nil when none).
func (s *Store) Supersede(ctx context.Context, id, path string) (ended bool, err error) {
	w := s.Live(id)
	if w == nil || path == "" {
		return false, nil
	}
	w.mu.Lock()
	same := w.path == "" || w.path == path
	w.mu.Unlock()
	if same {
		return false, nil // the common case, decided without waiting for a batch being written
	}
	w.wmu.Lock() // a batch being written lands (or fails) first: what is pending after it is what is kept
	w.mu.Lock()
	if w.path == "" || w.path == path || w.released {
		w.mu.Unlock()
		w.wmu.Unlock()
		return false, nil
	}
	var pending []event.Event
	ce := cmdErr(Busy, CodeConflict, "session "+jsQuote(id)+" is now "+jsQuote(filepath.Base(path))+", published beside "+
		jsQuote(filepath.Base(w.path))+" (a newer generation: an upgraded harness opened the session); this writer's log is no longer the session")
	if w.conflict == nil {
		w.conflict = ce // refuse further events first, so that the sidecar holds every accepted one
		pending = w.events[w.durable:len(w.events):len(w.events)]
	}
	h := w.h
	w.mu.Unlock()
	if len(pending) > 0 {
		ce = w.keepPending(ctx, h, pending, ce, "; write again to continue the session from its current artifact")
		w.mu.Lock()
		w.conflict = ce
		w.mu.Unlock()
		err = ce
	}
	w.wmu.Unlock()
	w.release()
	return true, err
}
