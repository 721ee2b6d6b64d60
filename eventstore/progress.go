package eventstore

import (
	"context"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/load"
)

// ProgressiveBackend is a Backend that decodes a session's events in log order and can say, while it
// runs, which of them are final. Inspect then runs the load checks over the decoded events while the
// rest are still being decoded: decoding and checking a large session each took half of its load, and
// each left part of the other core idle.
type ProgressiveBackend interface {
	Backend
	// LoadStoredProgress is LoadStored reporting to sink as it goes (nil: not at all): the header before
	// any event, then the decoded list as it grows. What it reports is a prefix of the Prefix it
	// returns, or it returns an error.
	LoadStoredProgress(ctx context.Context, id string, sink ProgressSink) (*Prefix, error)
}

// ProgressSink receives a progressive load's reports; load.Progress is the one Inspect uses.
type ProgressSink interface {
	// Header reports the session's header and where its artifact is (Prefix.Path), before any event.
	Header(h event.Header, path string)
	// Events reports the decoded list so far. The backend must never change events[:len(events)]
	// again, nor the words of rows (Prefix.RowMembers) below len(events)/64, nor (when it grows the
	// list) the arrays it reported before: the sink reads them without a lock.
	Events(events []event.Event, rows []uint64)
}

var _ ProgressSink = (*load.Progress)(nil)

// PackedSink is a ProgressSink that takes a list with chunk rows kept packed (Prefix.Packed): it reads of
// a row's members only what a hollow event holds, their type and seq (the load checks and the surface
// fold, which know row members by RowMembers). A backend may keep rows packed for such a sink only.
type PackedSink interface {
	ProgressSink
	Packed() bool
}

// WantsPacked reports whether a load reporting to sink may keep chunk rows packed.
func WantsPacked(sink ProgressSink) bool {
	ps, ok := sink.(PackedSink)
	return ok && ps.Packed()
}
