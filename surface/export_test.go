package surface

import "github.com/dshfs/dshfs/eventstore/event"

// TraceOf traces one seq of a whole log. As in the harness, the target's existence is checked before
// the log is folded; errors are *Error with Code "EVENT_NOT_FOUND" or "INVALID_SURFACE".
func TraceOf(events []event.Event, seq int64) (Trace, error) {
	if seq < 0 || seq >= int64(len(events)) || events[seq].Seq != seq {
		return Trace{}, notFound(seq)
	}
	t, err := NewTracer(events)
	if err != nil {
		return Trace{}, err
	}
	return t.Trace(seq)
}
