package load

import (
	"errors"

	"github.com/dshfs/dshfs/eventstore/event"
)

// Entry points of the checks and the repair planner for the tests, which drive them over a log in
// memory; the store reaches the same code through its loads (logCheck).

// readStored is ReadStored without row members, inline: the harness's readFrom(id, 0) post-read path.
func readStored(id string, h event.Header, stored []event.Event, path string) ([]event.Event, error) {
	return ReadStored(id, h, stored, nil, path, nil)
}

// inspectWith is the store's Inspect over a stored log (eventstore.Inspect) with the surface check sc:
// the checks' failures wrapped as the store wraps them, so that the tests read the harness's whole text.
func inspectWith(id string, h event.Header, stored []event.Event, path string, sc Surface) ([]event.Event, []event.Event, error) {
	events, closers, err := Inspect(id, Stored(h, path, stored, nil), sc, nil)
	if err != nil {
		return nil, nil, inspectError(id, err)
	}
	return events, closers, nil
}

// inspectError wraps a failed check as the store does: a format refusal as it is, anything else as the
// session's corruption.
func inspectError(id string, err error) error {
	var u *UnsupportedError
	if errors.As(err, &u) {
		return err
	}
	return &CorruptionError{ID: id, Cause: err}
}

// CorruptionError is the text of eventstore.CorruptionError, the harness's
// SessionPersistenceCorruptionError, whose messages the tests compare whole.
type CorruptionError struct {
	ID    string
	Cause error
}

func (e *CorruptionError) Error() string {
	name := "Error"
	if n, ok := e.Cause.(interface{ JSErrorName() string }); ok {
		name = n.JSErrorName()
	}
	return `stored session "` + e.ID + `" failed validation: ` + name + ": " + e.Cause.Error()
}

func (e *CorruptionError) Unwrap() error { return e.Cause }

// scanTurns walks the whole log the way interruptedTurnClosers does, in one pass (a load steps its
// logCheck's scan event by event). It fails with the harness's TypeError where the harness would read a
// property of null or undefined data. recs, when not nil, holds already parsed records (at least
// recordDepth deep) for the events it covers.
func scanTurns(events []event.Event, recs []event.Value) (*turnScan, error) {
	s := newTurnScan()
	for i, e := range events {
		var rec *event.Value
		if i < len(recs) {
			rec = &recs[i]
		}
		if err := s.step(e, rec); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// planClosers is interruptedTurnClosers over a whole log, reusing records already parsed.
func planClosers(events []event.Event, recs []event.Value) ([]event.Event, error) {
	s, err := scanTurns(events, recs)
	if err != nil {
		return nil, err
	}
	if len(events) == 0 {
		return s.closers(nil)
	}
	return s.closers(&events[len(events)-1])
}

// PlanClosers is interruptedTurnClosers with its failure mode: the error is the *TypeError the harness
// raises on a log whose bracket or message data it cannot read.
func PlanClosers(events []event.Event) ([]event.Event, error) { return planClosers(events, nil) }

// Closers is interruptedTurnClosers: the synthetic tool/result (one per unanswered call of the open step,
// in call order), step/end and turn/end{interrupted} events that balance a log a crash left inside a turn,
// with seqs continuing the log and the last event's time. A balanced or empty log yields none, and so does
// a log the harness could not plan for (see PlanClosers), which Inspect refuses instead.
func Closers(events []event.Event) []event.Event {
	closers, err := PlanClosers(events)
	if err != nil {
		return nil
	}
	return closers
}
