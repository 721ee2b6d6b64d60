package eventstore

import (
	"context"
	"fmt"
	"time"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/load"
)

// batchDue is the end of a write-behind window: the batch is written; a failure is recorded and retried
// after another window.
func (w *Session) batchDue() {
	w.mu.Lock()
	w.timer = nil
	w.mu.Unlock()
	if err := w.Flush(context.Background()); err != nil {
		ce := AsCommandError(err)
		if ce.Code == CodeQuiesced {
			return // held: the quiesce's end starts the batch again (held)
		}
		w.st.Record(w.id, Result{Command: "flush (write-behind batch)", Err: ce})
		if ce.Failure == Failed {
			w.mu.Lock()
			if w.timer == nil && !w.closed {
				w.timer = time.AfterFunc(max(w.st.Window, time.Second), w.batchDue)
			}
			w.mu.Unlock()
		}
	}
}

// held starts the write of a batch held by a quiesce that has ended.
func (w *Session) held() {
	w.mu.Lock()
	due := w.timer == nil && !w.closed && w.durable < len(w.events) && w.st.Window > 0
	if due {
		w.timer = time.AfterFunc(0, w.batchDue)
	}
	w.mu.Unlock()
}

// Pending is how many accepted events are not durable yet.
func (w *Session) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lenLocked() - w.durable
}

// Flush makes every event accepted before the call durable, in batches (one zstd frame each); events
// accepted meanwhile may ride along. On failure the events stay pending and the error says why: a
// storage failure (Failed; a later flush retries) or a conflict with another writer (Busy; the pending
// events are kept in a sidecar and writes are refused until a rescan). An engine idle after it may leave
// others over the live budget: they are trimmed then.
func (w *Session) Flush(ctx context.Context) error {
	err := w.flush(ctx, false)
	w.st.trimLive(w)
	return err
}

// flush is Flush; a draining flush (Quiesce's own) writes while the store is quiesced, any other is
// refused then.
func (w *Session) flush(ctx context.Context, draining bool) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	// checked under wmu: a flush that was waiting for another write when a quiesce drained the session
	// must not then write what was accepted after the quiesce
	if !draining {
		if err := w.st.WritesHeld(); err != nil {
			return err
		}
	}
	w.mu.Lock()
	if w.released {
		// a late flush (a transaction finishing after Close) must not write without the writer lock
		pending := w.lenLocked() - w.durable
		w.mu.Unlock()
		if pending == 0 {
			return nil
		}
		return cmdErr(Busy, CodeNotLive, "session "+jsQuote(w.id)+" was released by this writer; write again to reopen it")
	}
	target := w.lenLocked()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.mu.Unlock()
	for {
		w.mu.Lock()
		if w.conflict != nil {
			err := w.conflict
			w.mu.Unlock()
			return err
		}
		if w.durable >= target {
			w.mu.Unlock()
			return nil
		}
		batch := w.events[w.durable:len(w.events):len(w.events)]
		packing := w.packing[:len(batch):len(batch)]
		h, art := w.h, w.art
		scan := w.scanDueLocked()
		w.mu.Unlock()

		// the last look before the bytes go out: a writer without the lease that has the artifact open
		// is writing a batch right now, which would land between or after these bytes (the backend
		// checks the artifact's revision itself, under its own open descriptor: CodeConflict)
		var err error
		if scan {
			err = w.st.probe(ctx, LiveCheck{ID: w.id, Path: w.path, Scan: true})
		}
		var next Artifact
		if err == nil {
			next, err = w.st.b.AppendBatch(ctx, h, art, batch, packing)
		}

		w.mu.Lock()
		if err != nil {
			ce := AsCommandError(err)
			if next.Token != "" && !foreignWrite(ce) {
				w.art = next // the backend cut its own partial write back: that state is ours
			}
			if !foreignWrite(ce) {
				w.mu.Unlock()
				return ce
			}
			// Refuse further events first, so that the sidecar, written without holding mu, holds every
			// accepted event that is not in the log.
			w.conflict = ce
			pending, h := w.events[w.durable:len(w.events):len(w.events)], w.h
			w.mu.Unlock()
			ce = w.keepPending(ctx, h, pending, ce, "; run rescan to read the session again")
			w.mu.Lock()
			w.conflict = ce
			w.mu.Unlock()
			return ce
		}
		w.durable += len(batch)
		w.packing = w.packing[len(batch):]
		w.art = next
		w.mu.Unlock()
	}
}

// foreignWrite reports whether a write was refused because another process writes the session: the
// engine's log is then stale (or about to be), so its pending events are kept aside, never retried.
func foreignWrite(ce *CommandError) bool {
	return ce.Code == CodeConflict || ce.Code == CodeLiveElsewhere
}

// keepPending saves events that could not be written beside the artifact and returns cause extended by
// how many there are and where they are kept, with the same failure class. The caller has made the engine
// refuse new events, so pending is all there is to keep.
func (w *Session) keepPending(ctx context.Context, h event.Header, pending []event.Event, cause *CommandError, then string) *CommandError {
	first, last := pending[0].Seq, pending[len(pending)-1].Seq
	where, err := w.st.b.KeepPending(ctx, h, pending)
	msg := fmt.Sprintf("%s; %d accepted events (seq %d..%d) were not written", cause.Message, len(pending), first, last)
	if err != nil {
		msg += fmt.Sprintf(" and could not be kept in a sidecar (%v)", err)
	} else {
		msg += " and are kept in " + where
	}
	return &CommandError{Failure: cause.Failure, Code: cause.Code, Message: msg + then, Err: cause}
}

// Close flushes and releases the session: the writer lock is given up and the engine forgotten. A failed
// flush keeps the session live (its events are not lost); a conflict releases it, its events being kept
// in the sidecar. It returns once the accepted events are durable, never waiting for a compaction that is
// still summarizing: that transaction is ended as failed, its compaction/end written with the rest
// (see inflight.go for why it is not left to commit later).
func (w *Session) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.inflight != nil && w.shed != nil {
		// the transaction's end follows the log (a shed log is read back for it; nothing else needs it)
		w.mu.Unlock()
		_ = w.lockResident(ctx, true)
	}
	w.endInflightLocked()
	w.mu.Unlock()
	err := w.Flush(ctx)
	if ce := AsCommandError(err); ce != nil && !foreignWrite(ce) {
		return err
	}
	w.release()
	return err
}

// Abandon is the last resort when a flush failed and the writer must go (the process ends): the pending
// events are kept in a sidecar beside the artifact and the session released. It returns cause extended by
// where the events are.
func (w *Session) Abandon(ctx context.Context, cause error) error {
	w.mu.Lock()
	ce := AsCommandError(cause)
	keep := w.durable < len(w.events) && w.conflict == nil
	pending, h := w.events[w.durable:len(w.events):len(w.events)], w.h
	w.closed = true // refuse new events while the sidecar is written
	w.mu.Unlock()
	if keep {
		ce = w.keepPending(ctx, h, pending, ce, "")
	}
	w.release()
	return ce
}

// conflicted reports whether writes are refused because the artifact changed under this engine.
func (w *Session) conflicted() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.conflict != nil
}

// release gives up the writer lock and forgets the engine, whatever is pending.
func (w *Session) release() {
	w.mu.Lock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if w.idleTimer != nil {
		w.idleTimer.Stop()
		w.idleTimer = nil
	}
	w.closed = true
	w.released = true
	l := w.lock
	w.lock = nil
	w.mu.Unlock()
	if l != nil {
		_ = l.Release()
	}
	w.st.forgetResident(w)
	w.st.release(w)
}

// resumable refuses a resume of a session this engine holds with an open turn: its writer is alive.
func (w *Session) resumable() error {
	err := w.lockWritable()
	defer w.mu.Unlock()
	if err != nil {
		return err
	}
	if t, open := load.OpenTurn(w.events); open {
		return cmdErr(Busy, CodeLive, fmt.Sprintf("session %s is live in this process with open turn %d: its writer is alive, so there is nothing to resume", jsQuote(w.id), t))
	}
	return nil
}

// endSeed appends the session/end-seed a resume writes (unless the log already ends with one) and
// flushes.
func (w *Session) endSeed(ctx context.Context) error {
	if err := w.lockResident(ctx, true); err != nil {
		w.mu.Unlock()
		return AsCommandError(err)
	}
	n := len(w.events)
	ends := n > 0 && w.events[n-1].Type == "session/end-seed"
	w.mu.Unlock()
	if !ends {
		seed := event.NewEventFrom("session/end-seed", int64(n), time.Now().UnixMilli(), []byte("{}"))
		if err := w.AcceptEvents([]event.Event{seed}); err != nil {
			return err
		}
	}
	return w.Flush(ctx)
}

// inspection is Store.Load's answer for a live session: refused while its turn is open, as the harness
// refuses to load a live session mid-turn.
func (w *Session) inspection(ctx context.Context) (*Inspection, error) {
	s, err := w.SnapshotContext(ctx)
	if err != nil {
		return nil, AsCommandError(err)
	}
	if _, open := load.OpenTurn(s.Events); open {
		return nil, cmdErr(Busy, CodeLive, "cannot load session "+jsQuote(w.id)+" while its live turn is open; use the live Session or wait for the turn to close")
	}
	p := &Prefix{Header: s.Header, Events: s.Events, Path: s.Path}
	if w.later != nil {
		p.Generation = 4
	}
	return &Inspection{Header: s.Header, Events: s.Events, Prefix: p}, nil
}
