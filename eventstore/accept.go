package eventstore

import (
	"fmt"
	"strconv"
	"time"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/load"
)

// Accept parses and validates the lines of one write request (each one event in the append syntax of
// docs/writing.md) and accepts them all, or none: the error names the first bad line.
func (w *Session) Accept(lines [][]byte) error {
	if err := w.checkElsewhere(); err != nil {
		return err
	}
	defer w.st.trimLive(w)
	err := w.lockWritable()
	defer w.mu.Unlock()
	if err != nil {
		return err
	}
	if max := w.st.MaxLine; max > 0 {
		for i, l := range lines {
			if int64(len(l)) > max {
				return &CommandError{Failure: Invalid, Code: CodeBadInput, Line: i + 1,
					Message: fmt.Sprintf("line of %d bytes exceeds [writer] max_line_bytes (%d)", len(l), max)}
			}
		}
	}
	next := int64(len(w.events))
	now := time.Now().UnixMilli()
	if w.later != nil {
		return w.acceptLaterLines(lines, next, now)
	}
	ins := make([]input, len(lines))
	// Lines parse independently, and parsing is most of an append's cost: a large request uses every core.
	// A line's failure is kept for acceptLocked, which reports the first bad line in order.
	err = w.st.Tuning.Parallel(len(lines), 256, func(lo, hi int) error {
		for i := lo; i < hi; i++ {
			in, err := parseInput(lines[i], next+int64(i), now)
			if err != nil {
				ins[i] = input{prepared: true, invalid: err} // no event: only validate can refuse it
				continue
			}
			w.prepare(&in)
			ins[i] = in
		}
		return nil
	})
	if err != nil {
		return err
	}
	return w.acceptLocked(ins)
}

// AcceptEvents accepts already encoded events, whose seqs must continue the log.
func (w *Session) AcceptEvents(evs []event.Event) error {
	if err := w.checkElsewhere(); err != nil {
		return err
	}
	defer w.st.trimLive(w)
	err := w.lockWritable()
	defer w.mu.Unlock()
	if err != nil {
		return err
	}
	return w.acceptEncodedLocked(evs)
}

// acceptEncodedLocked accepts encoded events whose seqs must continue the log (mu held).
func (w *Session) acceptEncodedLocked(evs []event.Event) error {
	next := int64(len(w.events))
	ins := make([]input, len(evs))
	for i, e := range evs {
		if e.Seq != next+int64(i) {
			return &CommandError{Failure: Invalid, Code: CodeBadInput, Line: i + 1,
				Message: fmt.Sprintf("append seq mismatch for %s: expected %d at index %d, got %s", jsQuote(w.id), next+int64(i), i, e.SeqText())}
		}
		if w.later != nil {
			continue
		}
		rec, err := e.Record()
		if err != nil {
			return &CommandError{Failure: Invalid, Code: CodeBadInput, Line: i + 1, Message: err.Error(), Err: err}
		}
		ins[i] = input{ev: e, rec: rec}
	}
	if w.later != nil {
		return w.acceptLaterLocked(evs)
	}
	return w.acceptLocked(ins)
}

func (w *Session) acceptLocked(ins []input) error {
	if len(ins) == 0 {
		return nil
	}
	bracket := w.bracket
	trace := w.liveTraceLocked().clone() // staged: the request's events are accepted all or none
	for i := range ins {
		in := &ins[i]
		err := w.crossesBracket(in.ev, bracket, trace)
		if err == nil {
			err = w.validate(in)
		}
		if err == nil {
			if ce := trace.acceptInput(in); ce != nil {
				w.folder = foldAll(w.events) // validate pushed this event too
				ce.Line = i + 1
				return ce
			}
		}
		if err != nil {
			if i > 0 {
				w.folder = foldAll(w.events) // undo the events of this request already pushed
			}
			if ce, ok := err.(*CommandError); ok {
				ce.Line = i + 1
				return ce
			}
			return &CommandError{Failure: Invalid, Code: CodeBadInput, Line: i + 1, Message: err.Error(), Err: err}
		}
		switch in.ev.Type {
		case "compaction/start":
			bracket = in.ev.Seq
		case "compaction/end", "session/end-seed":
			bracket = -1
		}
	}
	w.bracket = bracket
	w.trace, w.traced = trace, len(w.events)+len(ins)
	for _, in := range ins {
		w.events = append(w.events, in.ev)
		w.packing = append(w.packing, in.packing)
		if in.timed && in.millis > w.newest {
			w.newest = in.millis
		}
		w.rawBytes += int64(len(in.ev.Raw))
	}
	w.usedLocked()
	if w.timer == nil && w.st.Window > 0 {
		w.timer = time.AfterFunc(w.st.Window, w.batchDue)
	}
	return nil
}

// liveTraceLocked is the live invariants' trace of the events accepted so far, seeded from the stored log
// on first use and brought up to date with events that reached the log another way (mu held).
func (w *Session) liveTraceLocked() *liveTrace {
	if w.trace == nil || w.traced > len(w.events) {
		w.trace, w.traced = seedLiveTrace(w.events), len(w.events)
	}
	if w.traced < len(w.events) {
		for _, e := range w.events[w.traced:] {
			if rec, err := e.Record(); err == nil {
				w.trace.apply(e.Type, jsv{rec, true})
			}
		}
		w.traced = len(w.events)
	}
	return w.trace
}

// crossesBracket refuses a turn boundary while a compaction holds the lock: the harness never starts or
// ends a turn during maintenance, and its invariant companion rejects a log where one does.
// The text is the harness's compaction invariant's, which names the compaction's owner.
func (w *Session) crossesBracket(e event.Event, bracket int64, trace *liveTrace) error {
	if bracket < 0 || (e.Type != "turn/start" && e.Type != "turn/end") {
		return nil
	}
	owner := "standalone compaction"
	if c := trace.compaction; c != nil {
		owner = c.owner(owner, "compaction for turn ")
	}
	return &CommandError{Failure: Busy, Code: CodeCompactionLock, Message: fmt.Sprintf(
		`invariant violated by "%s": %s cannot cross an open %s (compaction/start at seq %d is still open in this process); write it when the compaction has ended`,
		compactionInvariant, e.Type, owner, bracket)}
}

// validate runs, on one new event, every check a later load of the log will run on it (so an accepted
// event can never make the session unreadable) — the checks of the event alone (check, or its outcome
// computed beforehand) and then the fold's.
func (w *Session) validate(in *input) error {
	w.prepare(in)
	if in.invalid != nil {
		return in.invalid
	}
	if err := w.folder.Push(in.ev); err != nil {
		return fmt.Errorf("invalid event at seq %d: %w", in.ev.Seq, err)
	}
	return nil
}

// prepare does the work on one new event that reads nothing of the session that changes — its checks
// (check) and, for a valid one, its packing and time — so that Accept does it on every core as it parses.
// An input already prepared (by Accept, or by quickInput as it read the line) is left as it is.
func (w *Session) prepare(in *input) {
	if in.prepared {
		return
	}
	in.invalid = w.check(*in)
	if in.invalid == nil {
		in.packing = event.PackingOf(in.ev, in.rec)
		in.millis, in.timed = eventMillis(in.ev)
	}
	in.prepared = true
}

// check runs the checks of one new event that need nothing but the event, in the load's order: retired
// vocabulary, legacy shapes (which a load would rewrite: refused, so the log holds what the views show),
// the message shape, the vocabulary, the envelope and request/header rules. It reads nothing of the
// session that changes, so the lines of a request are checked in parallel as they are parsed.
func (w *Session) check(in input) error {
	e, rec := in.ev, in.rec
	one := []event.Event{e}
	if err := load.CheckSupportedEvents(one, []event.Value{rec}, w.id); err != nil {
		return err
	}
	if _, changed, err := load.MigrateEvent(rec, w.id, map[float64]string{}); err != nil {
		return err
	} else if changed {
		return fmt.Errorf("%s event at seq %d has a legacy shape the harness upgrades on load; write the current shape", e.Type, e.Seq)
	}
	at := "session event at seq " + strconv.FormatInt(e.Seq, 10)
	if err := load.CheckMessageEventShape(rec, func() string { return at }); err != nil {
		return err
	}
	if !event.IsKnownType(e.Type) {
		if ign, ok := rec.Get("ignorable"); !ok || ign.Kind != event.KindBool || !ign.Bool {
			return unknownType(e.Type)
		}
	}
	if err := load.CheckEnvelope(rec, int(e.Seq)); err != nil {
		return err
	}
	if err := load.CheckSupportedRequestHeader(rec, func() string { return at }); err != nil {
		return err
	}
	switch e.Type {
	case "turn/start", "turn/end", "step/start", "step/end", "assistant/message", "tool/call", "tool/result":
		// the crash repair reads these events' data on every load
		if d, _ := rec.Get("data"); d.Kind != event.KindObject {
			return fmt.Errorf("%s event at seq %d must carry an object as data", e.Type, e.Seq)
		}
	}
	return nil
}
