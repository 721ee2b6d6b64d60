package eventstore

import (
	"context"
	"fmt"
	"time"
)

// Quiescence (docs/tree.md, the backup checklist: "quiesce and flush before any external snapshot"): the
// Store flushes every live session, then holds every durable write of this process — write-behind
// batches, flushes, creates, forks, resumes — until ResumeWrites or a deadline. Appends are still
// accepted and visible in the views; they wait in memory. So for as long as it lasts the artifacts this
// process writes do not change, and a copy taken meanwhile is one instant of all of them. Other processes
// (the harness, another dshfs) are not stopped by it.

// CodeQuiesced is the code of a write refused while the store is quiesced.
const CodeQuiesced = "QUIESCED"

// QuiesceEnd is how the last quiescence ended, for the store status.json.
type QuiesceEnd struct {
	Until, Ended time.Time
	Reason       string // "resume-writes", "timeout" or "unmount"
}

// quiescence is the Store's quiesce state; its zero value is "not quiesced".
type quiescence struct {
	until time.Time   // zero when not quiesced
	timer *time.Timer // ends it at until
	last  *QuiesceEnd
	// resumed is closed when the quiesce ends, for the writers waiting it out (FlushWhenWritable)
	resumed chan struct{}
}

// Quiesce flushes every live session and holds durable writes for d. It returns when the flushes are
// done: from then on the artifacts this process writes do not change. A quiesce while quiesced moves the
// deadline. A flush that fails ends the quiesce at once and is returned: a snapshot then would lack events
// that were accepted before it.
func (s *Store) Quiesce(ctx context.Context, d time.Duration) (time.Time, error) {
	if d <= 0 {
		return time.Time{}, cmdErr(Invalid, CodeBadInput, "a quiesce needs a positive duration")
	}
	until := time.Now().Add(d).Truncate(time.Millisecond)
	s.mu.Lock()
	if s.q.timer != nil {
		s.q.timer.Stop()
	}
	s.q.until = until
	if s.q.resumed == nil {
		s.q.resumed = make(chan struct{}) // a moved deadline keeps the waiters of the quiesce it extends
	}
	s.q.timer = time.AfterFunc(d, func() { s.endQuiesce(until, "timeout") })
	s.mu.Unlock()
	for _, id := range s.LiveIDs() {
		if w := s.Live(id); w != nil {
			if err := w.flush(ctx, true); err != nil {
				s.endQuiesce(until, "the flush before it failed")
				return time.Time{}, err
			}
		}
	}
	return until, nil
}

// ResumeWrites ends a quiesce (reason says who ended it) and lets the held batches through. It reports
// whether the store was quiesced.
func (s *Store) ResumeWrites(reason string) bool {
	s.mu.Lock()
	until := s.q.until
	s.mu.Unlock()
	if until.IsZero() {
		return false
	}
	s.endQuiesce(until, reason)
	return true
}

// endQuiesce ends the quiesce that runs until `until` (a later Quiesce replaced an earlier one's timer, so
// a stale timer ends nothing), then starts the held batches' writes.
func (s *Store) endQuiesce(until time.Time, reason string) {
	s.mu.Lock()
	if !s.q.until.Equal(until) {
		s.mu.Unlock()
		return
	}
	if s.q.timer != nil {
		s.q.timer.Stop()
	}
	if s.q.resumed != nil {
		close(s.q.resumed)
	}
	s.q = quiescence{last: &QuiesceEnd{Until: until, Ended: time.Now(), Reason: reason}}
	live := make([]*Session, 0, len(s.live))
	for _, w := range s.live {
		live = append(live, w)
	}
	s.mu.Unlock()
	for _, w := range live {
		w.held()
	}
}

// Quiesced returns the deadline of the current quiesce, and whether there is one.
func (s *Store) Quiesced() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.q.until, !s.q.until.IsZero()
}

// writesResumed is closed when the current quiesce ends; nil when the store is not quiesced.
func (s *Store) writesResumed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.q.until.IsZero() {
		return nil
	}
	return s.q.resumed
}

// LastQuiesce is how the last quiesce ended; nil when none has.
func (s *Store) LastQuiesce() *QuiesceEnd {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.q.last
}

// WritesHeld refuses a durable write while quiesced, saying until when; nil when writes may go ahead.
func (s *Store) WritesHeld() *CommandError {
	until, ok := s.Quiesced()
	if !ok {
		return nil
	}
	return cmdErr(Busy, CodeQuiesced, fmt.Sprintf("the store is quiesced until %s: writes are held (echo resume-writes > MNT/ctl ends it sooner); accepted events stay pending",
		until.UTC().Format(time.RFC3339Nano)))
}
