package generation

import (
	"errors"
	"strconv"

	"github.com/dshfs/dshfs/eventstore/event"
)

// Writing v4: what a writer appends to a v4 session must be what the v4 reader restores, so each request is
// checked by the reader's own rules over the log it would make (CheckV4Append), each event is stored in the
// codec's physical row form (PhysicalRow), and a crash repair closes an open turn with events the
// relationships accept (Artifact.Repair).

// AppendError is a refused v4 append: the first event of the request that breaks a v4 rule, and the rule.
type AppendError struct {
	Index int // into the request, 0-based
	Err   error
}

func (e *AppendError) Error() string { return e.Err.Error() }
func (e *AppendError) Unwrap() error { return e.Err }

// CheckV4Append checks that the events add, appended after the stored events of a v4 session with header
// h and inherited cut, make a log the v4 reader restores unchanged: each row passes the codec's admission
// and row decoding, and the whole log the restore. It returns add as the reader restores them (a
// range-encoded sourceEventSeqs expanded); a refusal is an *AppendError naming the first bad event. A
// writer that appends again and again keeps a V4Checker instead, which walks the stored log once.
func CheckV4Append(h Header, cut int64, stored, add []event.Event) ([]event.Event, error) {
	c, err := NewV4Checker(h, cut, stored)
	if err != nil {
		return nil, err
	}
	return c.Check(stored, add)
}

// V4Checker checks appends to one v4 log as CheckV4Append does, from the restore's state at the end of
// the events it has checked: a request costs its own events and a copy of that state (the current
// surface, the open turn's tool calls), not a walk of the whole log.
type V4Checker struct {
	walk *v4Walk
	n    int // the events walked
}

// NewV4Checker walks the stored events of a v4 log, refusing them as the restore would.
func NewV4Checker(h Header, cut int64, stored []event.Event) (*V4Checker, error) {
	rel := newV4Relations(stored)
	w := &v4Walk{h: h, cut: cut, rel: rel, last: -1, children: map[string]bool{}}
	for i, e := range stored {
		if err := w.step(i, e); err != nil {
			return nil, err
		}
	}
	if len(stored) > 0 {
		if _, err := w.result(len(stored)); err != nil {
			return nil, err
		}
	}
	return &V4Checker{walk: w, n: len(stored)}, nil
}

// Check is CheckV4Append of add after stored, which must be the events this checker has walked (a
// checker that is behind walks the rest first); the state moves on only when add is accepted.
func (c *V4Checker) Check(stored, add []event.Event) ([]event.Event, error) {
	if c.n > len(stored) {
		return nil, errors.New("generation: a v4 checker is ahead of the log it is given")
	}
	if c.n < len(stored) {
		c.walk.rel.at = func(seq int64) event.Event { return stored[seq] }
		c.walk.rel.markOrphans(stored[c.n:])
		for i := c.n; i < len(stored); i++ {
			if err := c.walk.step(i, stored[i]); err != nil {
				return nil, err
			}
		}
		c.n = len(stored)
	}
	return c.CheckParsed(stored, add, nil)
}

// CheckParsed is Check of events whose records the caller has parsed already (vals[i] is add[i]'s whole
// record; nil: parse them here), so that an append request parses each line once.
func (c *V4Checker) CheckParsed(stored, add []event.Event, vals []event.Value) ([]event.Event, error) {
	if c.n != len(stored) {
		if _, err := c.Check(stored, nil); err != nil {
			return nil, err
		}
	}
	out := make([]event.Event, len(add))
	decoded := make([]event.Value, len(add))
	next := int64(len(stored))
	for i, e := range add {
		var v event.Value
		var err error
		if vals != nil {
			v = vals[i]
		} else if v, err = v4Value(e); err != nil {
			return nil, &AppendError{Index: i, Err: err}
		}
		if err := v4RowAdmission(v); err != nil {
			return nil, &AppendError{Index: i, Err: err}
		}
		ev, changed, err := decodeEvent(v, int(next)+i, next+int64(i))
		if err != nil {
			return nil, &AppendError{Index: i, Err: err}
		}
		if seq, _ := ev.Get("seq"); seq.Kind != event.KindNumber || seq.Num != float64(next+int64(i)) {
			return nil, &AppendError{Index: i, Err: formatErr("format v4 event " + strconv.FormatInt(next+int64(i), 10) + " is not dense")}
		}
		out[i], decoded[i] = e, ev
		if changed {
			if out[i], err = expanded(accepted{row: e, v: ev}); err != nil {
				return nil, &AppendError{Index: i, Err: err}
			}
		}
	}
	w := c.walk.clone()
	w.rel.at = func(seq int64) event.Event {
		if seq < next {
			return stored[seq]
		}
		return out[seq-next]
	}
	w.rel.markOrphans(out)
	total := len(stored) + len(out)
	for i, e := range out {
		if err := w.stepValue(len(stored)+i, e, decoded[i], true); err != nil { // admitted above
			return nil, &AppendError{Index: i, Err: err}
		}
	}
	if at, err := w.result(total); err != nil {
		return nil, &AppendError{Index: max(at-len(stored), 0), Err: err}
	}
	c.walk, c.n = w, total
	return out, nil
}

// PhysicalRow is the row the v4 codec stores for event e: the event itself, except that a strictly
// increasing sourceEventSeqs has each run of three or more consecutive seqs written as [start, end].
func PhysicalRow(e event.Event) ([]byte, error) {
	raw, ok := e.Member("sourceEventSeqs")
	if !ok {
		return e.Raw, nil
	}
	list, err := event.Parse(raw)
	if err != nil || list.Kind != event.KindArray {
		return e.Raw, err
	}
	enc, changed := encodeSeqRanges(list.Arr)
	if !changed {
		return e.Raw, nil
	}
	rec, err := e.Record()
	if err != nil {
		return nil, err
	}
	return event.Stringify(setMember(rec, "sourceEventSeqs", event.Value{Kind: event.KindArray, Arr: enc})), nil
}

// encodeSeqRanges is the codec's encodeSeqRanges; changed is false when the list stays as it is (not
// strictly increasing, or no run long enough).
func encodeSeqRanges(seqs []event.Value) ([]event.Value, bool) {
	for i, s := range seqs {
		if s.Kind != event.KindNumber || (i > 0 && s.Num <= seqs[i-1].Num) {
			return seqs, false
		}
	}
	var out []event.Value
	changed := false
	for i := 0; i < len(seqs); {
		j := i
		for j+1 < len(seqs) && seqs[j+1].Num == seqs[j].Num+1 {
			j++
		}
		if j-i >= 2 {
			out = append(out, event.Array(seqs[i], seqs[j]))
			changed = true
		} else {
			out = append(out, seqs[i:j+1]...)
		}
		i = j + 1
	}
	return out, changed
}

// ErrOpenCompaction refuses a v4 repair of a turn that holds an open compaction: the relationships refuse a
// turn end that crosses it, and the harness's sources say nothing of how its v4 repair ends one.
type ErrOpenCompaction struct{ StartSeq int64 }

func (e *ErrOpenCompaction) Error() string {
	return "the open turn holds compaction/start at seq " + strconv.FormatInt(e.StartSeq, 10) +
		" with no compaction/end; a v4 repair does not end a compaction (end it, or resume with the harness)"
}

// Repair plans the closers of a decoded v4 log that ends inside an open turn, nil when it is balanced or of
// another generation, from the state its restore ended in (no second walk of the log). The meaning is v0's
// repair (docs/formats.md#v4-repair): each advertised tool call without a result gets one — the exact
// TOOL_NOT_STARTED repair when no tool/call started it, a TOOL_OUTCOME_UNKNOWN error result citing its
// tool/call when one did (an unknown outcome stays unknown, never a success) — in the shape of a v4
// tool-role message; then the open step ends, then the turn, with reason interrupted. Each closer carries
// the time of the log's last event. The closers are checked by the lifecycle walk they continue.
func (a *Artifact) Repair() ([]event.Event, error) {
	if a.v4 == nil {
		return nil, nil
	}
	out, err := closersOf(a.v4, a.Events)
	if err != nil || len(out) == 0 {
		return out, err
	}
	// the closers continue a copy of the walk: the state at the end of the log stays for CheckerFor
	rel := a.v4.clone()
	rel.at = func(seq int64) event.Event {
		if seq < int64(len(a.Events)) {
			return a.Events[seq]
		}
		return out[seq-int64(len(a.Events))]
	}
	for _, e := range out {
		v, err := e.Record()
		if err == nil {
			if err = v4EventAdmission(v); err == nil {
				err = rel.accept(e, v)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CheckerFor is a V4Checker of appends to stored, a log that begins with this decoded v4 artifact's events,
// from the state the artifact's restore ended in: a writer that appends to the log it has just read does
// not walk the log a second time (events of stored past the artifact's, such as a repair's closers, are
// walked by the checker's first Check). It is nil for another generation or a log that does not begin
// with these events, which NewV4Checker walks instead.
func (a *Artifact) CheckerFor(stored []event.Event) *V4Checker {
	n := len(a.Events)
	if a.walk == nil || len(stored) < n || (n > 0 && !sameEvent(stored[n-1], a.Events[n-1])) {
		return nil
	}
	w := a.walk.clone()
	// the decode's walk ran as a stream whose cut it learnt at the end (finish); appends are walked
	// knowing it, and a turn boundary that crosses an open compaction fails at once
	w.stream, w.deferred = false, nil
	w.rel.lazyOrphans, w.rel.crossings = false, nil
	return &V4Checker{walk: w, n: n}
}

// sameEvent reports whether a and b hold the very same record bytes (one event, copied or not).
func sameEvent(a, b event.Event) bool {
	return len(a.Raw) == len(b.Raw) && (len(a.Raw) == 0 || &a.Raw[0] == &b.Raw[0])
}

// closersOf plans the closers from the lifecycle state rel reached at the end of events.
func closersOf(rel *v4Relations, events []event.Event) ([]event.Event, error) {
	if rel.turn.isNull() || len(events) == 0 {
		return nil, nil
	}
	if rel.compaction != nil && !rel.orphans[rel.compaction.seq] {
		return nil, &ErrOpenCompaction{StartSeq: rel.compaction.seq}
	}
	seq := int64(len(events))
	tm, _ := events[len(events)-1].Member("time")
	timeV, err := event.Parse(tm)
	if err != nil {
		return nil, err
	}
	emit := func(typ string, data event.Value, extra ...event.Member) (event.Event, error) {
		ms := []event.Member{{Key: "type", Value: event.String(typ)}, {Key: "seq", Value: event.Int(seq)},
			{Key: "time", Value: timeV}, {Key: "data", Value: data}}
		seq++
		return event.NewEvent(event.Stringify(event.Object(append(ms, extra...)...)))
	}
	var out []event.Event
	for _, id := range rel.toolOrder {
		call := rel.tools[id]
		text, name, code := NotStartedText, "ToolNotStartedError", "TOOL_NOT_STARTED"
		extra := []event.Member{{Key: "surfaceOp", Value: event.String("append")}}
		if call.started {
			text, name, code = OutcomeUnknownText, "ToolOutcomeUnknownError", "TOOL_OUTCOME_UNKNOWN"
			extra = append(extra, event.Member{Key: "sourceEventSeqs", Value: event.Array(event.Int(rel.callSeqs[id]))})
		}
		msg := event.Object(
			event.Member{Key: "role", Value: event.String("tool")},
			event.Member{Key: "source", Value: event.Object(
				event.Member{Key: "kind", Value: event.String("tool")},
				event.Member{Key: "callId", Value: event.String(id)})},
			event.Member{Key: "toolCallId", Value: event.String(id)},
			event.Member{Key: "content", Value: event.Array(event.Object(
				event.Member{Key: "type", Value: event.String("text")},
				event.Member{Key: "text", Value: event.String(text)}))},
			event.Member{Key: "isError", Value: event.Bool(true)},
			event.Member{Key: "id", Value: event.String(InterruptedResultPrefix + id + "-" + strconv.FormatInt(seq, 10))},
		)
		data := event.Object(
			event.Member{Key: "turn", Value: rel.turn.v},
			event.Member{Key: "step", Value: rel.step.v},
			event.Member{Key: "message", Value: msg},
			event.Member{Key: "error", Value: event.Object(
				event.Member{Key: "name", Value: event.String(name)},
				event.Member{Key: "code", Value: event.String(code)})},
		)
		e, err := emit("tool/result", data, extra...)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if !rel.step.isNull() {
		e, err := emit("step/end", event.Object(
			event.Member{Key: "turn", Value: rel.turn.v}, event.Member{Key: "step", Value: rel.step.v}))
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	e, err := emit("turn/end", event.Object(
		event.Member{Key: "turn", Value: rel.turn.v},
		event.Member{Key: "reason", Value: event.Object(event.Member{Key: "kind", Value: event.String("interrupted")})}))
	if err != nil {
		return nil, err
	}
	return append(out, e), nil
}
