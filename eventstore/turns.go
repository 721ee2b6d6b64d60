package eventstore

import "github.com/dshfs/dshfs/eventstore/event"

// Turn is one turn bracket: events from its turn/start through its turn/end, or to the end of the log
// when open.
//
// Brackets follow the log the way the harness's crash repair reads it (the last turn/start or
// turn/end seen decides whether a turn is open), not the turn numbers: a turn/end closes whatever turn
// is open even when its data.turn differs, and a turn/end with no open turn belongs to no turn.
// A turn/start while another turn is open (never written by the harness, whose invariant forbids it,
// but not rejected at load) ends the earlier turn just before it: that turn's EndSeq is the seq before
// the new turn/start and its Reason is null, as it has no turn/end. Events outside every bracket are in
// no turn.
type Turn struct {
	// N is the turn/start's data.turn when it is a non-negative safe integer, else -1 (such a turn is
	// listed but cannot be named by TurnEvents).
	N int64
	// StartSeq is the turn/start's seq; EndSeq the seq of the turn's last event (its turn/end, or the
	// event before an intruding turn/start), -1 while the turn is open at the end of the log.
	StartSeq, EndSeq int64
	// Reason is the turn/end's data.reason as recorded; the zero Value (null) when the turn has no
	// turn/end or the turn/end has no reason.
	Reason event.Value
}

// turnSpan is a Turn plus its index range in the event slice, so TurnEvents slices by position and does
// not depend on seqs being contiguous.
type turnSpan struct {
	Turn
	lo, hi int // events[lo:hi] belong to the turn
}

func turnSpans(events []event.Event) []turnSpan {
	var out []turnSpan
	open := -1 // index into out of the open turn
	for i, e := range events {
		switch e.Type {
		case "turn/start":
			if open >= 0 {
				out[open].hi = i
				out[open].EndSeq = events[i-1].Seq
			}
			out = append(out, turnSpan{Turn: Turn{N: turnNumber(e), StartSeq: e.Seq, EndSeq: -1}, lo: i, hi: len(events)})
			open = len(out) - 1
		case "turn/end":
			if open < 0 {
				continue
			}
			t := &out[open]
			t.hi, t.EndSeq = i+1, e.Seq
			if raw, ok := event.Lookup(e.Raw, "data", "reason"); ok {
				// Raw is canonical JSON, so a member parses; a failure would leave Reason null.
				t.Reason, _ = event.Parse(raw)
			}
			open = -1
		}
	}
	return out
}

func turnNumber(e event.Event) int64 {
	raw, ok := event.Lookup(e.Raw, "data", "turn")
	if !ok {
		return -1
	}
	v, err := event.Parse(raw)
	if err != nil || v.Kind != event.KindNumber || !event.IsSafeInteger(v.Num) || v.Num < 0 {
		return -1
	}
	return int64(v.Num)
}

// Turns lists every turn bracket of the log in log order (see Turn for how brackets are delimited).
// Two brackets with the same N are both listed.
func Turns(events []event.Event) []Turn {
	spans := turnSpans(events)
	out := make([]Turn, len(spans))
	for i, s := range spans {
		out[i] = s.Turn
	}
	return out
}

// TurnEvents returns the events of turn n (for the turns/<n>.jsonl view); ok=false if no such turn.
// When several brackets carry the same number (no harness log does), the first one wins, so the view
// stays a single contiguous slice of the log. The result shares events' backing array.
func TurnEvents(events []event.Event, n int64) ([]event.Event, bool) {
	if n < 0 {
		return nil, false
	}
	for _, s := range turnSpans(events) {
		if s.N == n {
			return events[s.lo:s.hi:s.hi], true
		}
	}
	return nil, false
}
