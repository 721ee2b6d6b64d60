package eventstore

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/dshfs/dshfs/eventstore/event"
)

// A compaction summarizes outside the engine's locks, for as long as its summarizer takes (an LLM:
// minutes), between a durable compaction/start and its closing events. Nothing else of the session
// waits for it: flush, quiesce and close see only the accepted events. Two things still concern it,
// and an Inflight is how the engine reaches it:
//
//   - Close while it summarizes. Close returns once every accepted event is durable and releases the
//     writer; a commit after that would write without ownership, and leaving the start unmatched would
//     make a cleanly closed session need a resume. So Close ends the transaction itself: it appends the
//     compaction/end carrying ErrClosedMidTransaction (written with the rest, before the lock is given
//     up) and cancels the summarizer; the compaction then returns that failure and writes nothing.
//   - A quiesce when it commits: FlushWhenWritable waits the quiesce out instead of failing the commit.

// ErrClosedMidTransaction is the error a transaction ended by Close records.
var ErrClosedMidTransaction = fmt.Errorf("the session was closed while the transaction was still running; it was ended unfinished")

// Inflight is a transaction registered with Track.
type Inflight struct {
	w      *Session
	end    func(next int64, cause error) event.Event
	cancel context.CancelFunc
	ended  atomic.Pointer[CommandError] // set (under the engine's mu) when Close ended it
}

// Track registers a transaction that will run outside the engine's locks: until Done, a Close appends
// end(next seq, cause) if the transaction's opening event holds the compaction lock then, and calls
// cancel. Register before accepting the opening event, so that no Close can come between the two.
// Only one transaction is tracked at a time (the compaction lock admits one); a second Track replaces
// the first.
func (w *Session) Track(end func(next int64, cause error) event.Event, cancel context.CancelFunc) *Inflight {
	t := &Inflight{w: w, end: end, cancel: cancel}
	w.mu.Lock()
	w.inflight = t
	w.mu.Unlock()
	return t
}

// Done unregisters the transaction: it has closed itself (or never opened).
func (t *Inflight) Done() {
	t.w.mu.Lock()
	if t.w.inflight == t {
		t.w.inflight = nil
	}
	t.w.mu.Unlock()
}

// Ended is the refusal Close recorded for the transaction, nil while Close has not ended it. It may be
// called inside a Transact build.
func (t *Inflight) Ended() *CommandError { return t.ended.Load() }

// endInflightLocked is Close's part (mu held): the tracked transaction, if its start still holds the
// compaction lock, gets its closing event, and its work is cancelled.
func (w *Session) endInflightLocked() {
	t := w.inflight
	if t == nil {
		return
	}
	w.inflight = nil
	ce := cmdErr(Busy, CodeNotLive, ErrClosedMidTransaction.Error())
	ce.Err = ErrClosedMidTransaction
	if w.bracket >= 0 && w.writableLocked() == nil && w.shed == nil {
		if err := w.acceptEncodedLocked([]event.Event{t.end(int64(len(w.events)), ErrClosedMidTransaction)}); err != nil {
			ce.Message += fmt.Sprintf("; its closing event was refused (%v), so its start stays unmatched until a resume", err)
		}
	}
	t.ended.Store(ce)
	if t.cancel != nil {
		t.cancel()
	}
}

// FlushWhenWritable is Flush for a writer that must not give up because of a quiesce (a compaction
// closing its transaction, whose events must become durable as soon as writing is allowed again): a
// quiesce is waited out, then the flush runs. ctx bounds the wait too.
func (w *Session) FlushWhenWritable(ctx context.Context) error {
	for {
		err := w.Flush(ctx)
		if ce := AsCommandError(err); ce == nil || ce.Code != CodeQuiesced {
			return err
		}
		resumed := w.st.writesResumed()
		if resumed == nil {
			continue // it ended between the refusal and now
		}
		select {
		case <-resumed:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the quiesce to end: %w", ctx.Err())
		}
	}
}
