package generation

import (
	"errors"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/surface"
)

// The projections dshfs already computes for v0 logs (the surface fold, deriveMessages) read events by
// v0's names. These views hand them a v2 or v3 artifact's events where — and only where — the published
// format packages decide what the projection is.

// ErrMessagesUndecided refuses deriveMessages over a v3 artifact: the published format packages decide
// the v3 surface (which events are current, which are shadowed), but not which model message a
// system/message becomes; that is the 0.1.5 session package's deriveMessages, which they do not carry.
var ErrMessagesUndecided = errors.New("the messages of a format v3 session are not derived: the harness's published format packages do not decide how a system/message becomes a model message")

// SurfaceEvents returns the artifact's events as the v0 surface fold reads them, seqs unchanged, so that
// the fold's nodes, replacements and shadowed seqs are the artifact's own.
//
// A v2 artifact keeps v0's surface envelope (append, or {op:"replace",start,end}, and sourceEventSeqs),
// and its new assistant/attempt is log-only: its events are returned as they are.
//
// A v3 artifact is returned as the released v3 restore hands it to the frozen relationship validation,
// which folds the surface with v0's rules: a system/message is a user/message whose data is the system
// message with role "user" (so the protected head is a surface node like any other), every replacement
// is spelled {op:"replace",start,end}, tool/ptc-dispatch* carry their v2 names and an ignorable
// tool/code-dispatch* is opaque. The view decides membership only: show the artifact's own events.
//
// A v4 artifact is returned the same way, with developer/message, v4's fifth surface type, handed over as
// a system message is: a user/message whose data is the developer message with role "user".
func SurfaceEvents(a *Artifact) ([]event.Event, error) {
	return SurfaceView(a.Header.Version, a.Events)
}

// SurfaceView is SurfaceEvents of the events of a log of generation gen.
func SurfaceView(gen int, events []event.Event) ([]event.Event, error) {
	if gen < 3 {
		return events, nil
	}
	out := make([]event.Event, len(events))
	for i, e := range events {
		typ := relationshipType(e.Type)
		if e.Type == "developer/message" {
			typ = "user/message"
		}
		op, _ := e.Member("surfaceOp")
		replace := len(op) > 0 && op[0] == '{'

		if typ == e.Type && !replace {
			out[i] = e
			continue
		}
		v, err := e.Record()
		if err != nil {
			return nil, err
		}
		v = setMember(v, "type", event.String(typ))
		if e.Type == "system/message" || e.Type == "developer/message" {
			data, _ := v.Get("data")
			msg, _ := data.Get("message")
			v = setMember(v, "data", setMember(msg, "role", event.String("user")))
		}
		if replace {
			op, _ := v.Get("surfaceOp")
			start, _ := op.Get("startSeq")
			end, _ := op.Get("endSeq")
			v = setMember(v, "surfaceOp", event.Object(
				event.Member{Key: "op", Value: event.String("replace")},
				event.Member{Key: "start", Value: start},
				event.Member{Key: "end", Value: end}))
		}
		if out[i], err = event.NewEvent(event.Stringify(v)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// MessageEvents returns the events deriveMessages reads. For v2 they are the artifact's own: the v1-to-v2
// migration keeps the derived model messages unchanged (a successful assistant/message keeps its
// message, its stream embedded beside it) and assistant/attempt never enters them. For v3 it refuses
// with ErrMessagesUndecided.
func MessageEvents(a *Artifact) ([]event.Event, error) {
	if a.Header.Version == 3 {
		return nil, ErrMessagesUndecided
	}
	return a.Events, nil
}

// setMember is `{...v, key: x}`: an existing member keeps its position.
func setMember(v event.Value, key string, x event.Value) event.Value {
	ms := make([]event.Member, len(v.Obj), len(v.Obj)+1)
	copy(ms, v.Obj)
	for i := range ms {
		if ms[i].Key == key {
			ms[i].Value = x
			return event.Value{Kind: event.KindObject, Obj: ms}
		}
	}
	return event.Object(append(ms, event.Member{Key: key, Value: x})...)
}

// FoldSurface folds the surface of a log of generation gen: its SurfaceView, folded by FoldView.
func FoldSurface(gen int, events []event.Event) (*surface.Result, error) {
	sv, err := SurfaceView(gen, events)
	if err != nil {
		return nil, err
	}
	return FoldView(gen, sv)
}

// FoldView folds a surface view (SurfaceView's) of a log of generation gen with that generation's
// tool-result rewrite rule: v4 lifted tool results into tool-role messages, so a v4 replacement may change
// the message's whole content, where earlier generations' may change only the wrapped block's.
func FoldView(gen int, view []event.Event) (*surface.Result, error) {
	if gen >= 4 {
		return surface.FoldLifted(view)
	}
	return surface.Fold(view)
}
