package surface

import (
	"strconv"

	"github.com/dshfs/dshfs/eventstore/event"
)

// Class is session-query's surface classification of an event: "current" | "shadowed" | "log-only".
type Class string

// The three classes. A seq is current when it is in the folded node list, shadowed when some
// replacement removed it from the surface (even if that replacement was itself replaced later), and
// log-only otherwise (brackets, chunks, tool calls, compaction records, …).
const (
	Current  Class = "current"
	Shadowed Class = "shadowed"
	LogOnly  Class = "log-only"
)

// Classify classifies every event of a log against its fold: entry i is events[i]'s class (for a
// whole log, i is the seq).
func Classify(events []event.Event, r *Result) []Class {
	out := make([]Class, len(events))
	for i := range out {
		out[i] = LogOnly
	}
	mark := func(seq int64, c Class) {
		if e, ok := eventAt(events, seq); ok {
			i := e.Seq - max(events[0].Seq, 0)
			if out[i] == LogOnly {
				out[i] = c
			}
		}
	}
	for _, seq := range r.Nodes {
		mark(seq, Current)
	}
	for _, rep := range r.Replacements {
		for _, seq := range rep.ShadowedSeqs {
			mark(seq, Shadowed)
		}
	}
	return out
}

// Trace is docs/tree.md's trace object (session-query's event trace without its session header and
// record wrapper).
type Trace struct {
	Seq   int64
	Type  string
	State Class
	// ReplacedBy is the replacement that directly shadowed this event; nil when it is not shadowed.
	ReplacedBy *int64
	// ReplacementChain follows ReplacedBy to the last replacement; empty when not shadowed.
	ReplacementChain []int64
	// ReplacedEventSeqs are the nodes this event removed when it was itself a replacement.
	ReplacedEventSeqs []int64
	// SourceEventSeqs are the event's own sourceEventSeqs, in recorded order.
	SourceEventSeqs []int64
	// DerivedEventSeqs are the later events citing this one in their sourceEventSeqs, in log order.
	DerivedEventSeqs []int64
}

// JSON is the trace view's bytes: {"seq","type","state","replacedBy","replacementChain",
// "replacedEventSeqs","sourceEventSeqs","derivedEventSeqs"}, compact, replacedBy null when absent,
// without a trailing newline.
func (t Trace) JSON() []byte {
	b := append([]byte(nil), `{"seq":`...)
	b = strconv.AppendInt(b, t.Seq, 10)
	b = append(b, `,"type":`...)
	b = event.AppendQuote(b, t.Type)
	b = append(b, `,"state":`...)
	b = event.AppendQuote(b, string(t.State))
	b = append(b, `,"replacedBy":`...)
	if t.ReplacedBy == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, *t.ReplacedBy, 10)
	}
	b = append(b, `,"replacementChain":`...)
	b = appendSeqs(b, t.ReplacementChain)
	b = append(b, `,"replacedEventSeqs":`...)
	b = appendSeqs(b, t.ReplacedEventSeqs)
	b = append(b, `,"sourceEventSeqs":`...)
	b = appendSeqs(b, t.SourceEventSeqs)
	b = append(b, `,"derivedEventSeqs":`...)
	b = appendSeqs(b, t.DerivedEventSeqs)
	return append(b, '}')
}

// Error is a session-query failure: Code "EVENT_NOT_FOUND" (Message "no event at seq N"; the harness
// prints `session "<id>" has no event at seq N`) or "INVALID_SURFACE" (Message "invalid session
// surface: <fold error>").
type Error struct{ Code, Message string }

// Error returns Message.
func (e *Error) Error() string { return e.Message }

// Tracer answers traces for every seq of one log after a single fold, so a view listing many traces
// does not refold per seq.
type Tracer struct {
	events     []event.Event
	class      []Class
	replacedBy map[int64]int64
	replaced   map[int64][]int64
	sources    map[int64][]int64
	derived    map[int64][]int64
}

// NewTracer folds a whole log (contiguous from 0) and indexes its replacement and provenance links.
// A fold failure is an *Error with Code "INVALID_SURFACE".
func NewTracer(events []event.Event) (*Tracer, error) {
	r, err := Fold(events)
	if err != nil {
		return nil, &Error{Code: "INVALID_SURFACE", Message: "invalid session surface: " + err.Error()}
	}
	t := &Tracer{
		events:     events,
		class:      Classify(events, r),
		replacedBy: map[int64]int64{},
		replaced:   map[int64][]int64{},
		sources:    map[int64][]int64{},
		derived:    map[int64][]int64{},
	}
	for _, rep := range r.Replacements {
		t.replaced[rep.Seq] = rep.ShadowedSeqs
		for _, s := range rep.ShadowedSeqs {
			t.replacedBy[s] = rep.Seq
		}
	}
	for _, e := range events {
		if !event.IsSurfaceType(e.Type) {
			continue // the fold proved it carries no sourceEventSeqs
		}
		raw, ok := e.Member("sourceEventSeqs")
		if !ok {
			continue
		}
		srcs, err := readSources(e, raw, nil)
		if err != nil { // unreachable after a successful fold
			return nil, &Error{Code: "INVALID_SURFACE", Message: "invalid session surface: " + err.Error()}
		}
		t.sources[e.Seq] = srcs
		for _, s := range srcs {
			t.derived[s] = append(t.derived[s], e.Seq)
		}
	}
	return t, nil
}

// Seqs lists the seqs that take part in a replacement (shadowed nodes and the replacements
// themselves), ascending — the entries of a trace directory.
func (t *Tracer) Seqs() []int64 {
	var out []int64
	for i, e := range t.events {
		if _, ok := t.replacedBy[e.Seq]; ok || t.replaced[e.Seq] != nil {
			out = append(out, int64(i))
		}
	}
	return out
}

// Trace traces one seq; an absent seq is an *Error with Code "EVENT_NOT_FOUND".
func (t *Tracer) Trace(seq int64) (Trace, error) {
	if seq < 0 || seq >= int64(len(t.events)) || t.events[seq].Seq != seq {
		return Trace{}, notFound(seq)
	}
	tr := Trace{
		Seq:               seq,
		Type:              t.events[seq].Type,
		State:             t.class[seq],
		ReplacementChain:  []int64{},
		ReplacedEventSeqs: append([]int64{}, t.replaced[seq]...),
		SourceEventSeqs:   append([]int64{}, t.sources[seq]...),
		DerivedEventSeqs:  append([]int64{}, t.derived[seq]...),
	}
	if by, ok := t.replacedBy[seq]; ok {
		tr.ReplacedBy = &by
		for next, ok := by, true; ok; next, ok = t.replacedBy[next] {
			tr.ReplacementChain = append(tr.ReplacementChain, next)
		}
	}
	return tr, nil
}

func notFound(seq int64) error {
	return &Error{Code: "EVENT_NOT_FOUND", Message: "no event at seq " + itoa(seq)}
}
