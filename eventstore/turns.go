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
	var s TurnScan
	s.Add(events)
	return s.resolved()
}

// TurnScan keeps a log's turn brackets (Turn) up to date as events are added, so that the turns of a log
// that only grows (a live session's turns/ and turn files) cost the events added since, not a pass over
// all of them. It is not safe for concurrent use.
type TurnScan struct {
	n      int
	last   int64 // the seq of the last event scanned
	spans  []turnSpan
	open   int           // 1 + the index in spans of the open turn; 0 when none
	firsts map[int64]int // the index of the first turn of each number
}

// Len is the number of events scanned.
func (s *TurnScan) Len() int { return s.n }

// Add scans events, which continue the ones scanned before.
func (s *TurnScan) Add(events []event.Event) {
	for j, e := range events {
		i := s.n + j
		switch e.Type {
		case "turn/start":
			if s.open > 0 {
				t := &s.spans[s.open-1]
				t.hi, t.EndSeq = i, s.last
			}
			n := turnNumber(e)
			s.spans = append(s.spans, turnSpan{Turn: Turn{N: n, StartSeq: e.Seq, EndSeq: -1}, lo: i, hi: -1})
			s.open = len(s.spans)
			if s.firsts == nil {
				s.firsts = map[int64]int{}
			}
			if _, ok := s.firsts[n]; !ok && n >= 0 {
				s.firsts[n] = len(s.spans) - 1
			}
		case "turn/end":
			if s.open > 0 {
				t := &s.spans[s.open-1]
				t.hi, t.EndSeq = i+1, e.Seq
				if raw, ok := event.Lookup(e.Raw, "data", "reason"); ok {
					// Raw is canonical JSON, so a member parses; a failure would leave Reason null.
					t.Reason, _ = event.Parse(raw)
				}
				s.open = 0
			}
		}
		s.last = e.Seq
	}
	s.n += len(events)
}

// span is spans[i] with its end resolved: an open turn runs to the end of what was scanned.
func (s *TurnScan) span(i int) turnSpan {
	t := s.spans[i]
	if t.hi < 0 {
		t.hi = s.n
	}
	return t
}

func (s *TurnScan) resolved() []turnSpan {
	out := make([]turnSpan, len(s.spans))
	for i := range s.spans {
		out[i] = s.span(i)
	}
	return out
}

// Turns is Turns of the events scanned.
func (s *TurnScan) Turns() []Turn {
	out := make([]Turn, len(s.spans))
	for i := range s.spans {
		out[i] = s.spans[i].Turn
	}
	return out
}

// TurnEvents is TurnEvents of events, which must be the events scanned.
func (s *TurnScan) TurnEvents(events []event.Event, n int64) ([]event.Event, bool) {
	i, ok := s.firsts[n]
	if !ok || n < 0 || len(events) != s.n {
		return nil, false
	}
	t := s.span(i)
	return events[t.lo:t.hi:t.hi], true
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
	var s TurnScan
	s.Add(events)
	return s.TurnEvents(events, n)
}
