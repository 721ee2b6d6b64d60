package eventstore

import "github.com/dshfs/dshfs/eventstore/event"

// Entry points of the checks and the repair planner for the tests, which drive them over a log in
// memory; the store reaches the same code through its loads (logCheck).

// ReadStored is readStored without row members: the harness's readFrom(id, 0) post-read path.
func ReadStored(id string, h event.Header, stored []event.Event, path string) ([]event.Event, error) {
	return readStored(id, h, stored, nil, path, Tuning{})
}

// ParseInput is parseInput's event.
func ParseInput(line []byte, seq, now int64) (event.Event, *CommandError) {
	in, err := parseInput(line, seq, now)
	return in.ev, err
}

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
	return s.closers(events)
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
