package eventstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
)

// The engine of a v4 session (docs/formats.md#v4). Its appends are checked by the v4 reader's own rules
// over the log they would make (a generation.V4Checker holding the restore's state at the end of the log,
// so a request costs its own events), so nothing dshfs writes is a log the harness refuses; the batching,
// the flush under the lease and the sidecars are the v0 engine's.

// laterOf is the v4 log an inspection holds, nil for any other.
func laterOf(ins *Inspection) *LaterLog {
	if ins.Prefix == nil {
		return nil
	}
	return ins.Prefix.Later
}

// adoptLater installs the v4 log of an inspection in the engine (mu held): its header and cut for as long as
// the engine lives, the decoded artifact only until the first append takes a checker from it, so that an
// engine that sheds its events holds no copy of them.
func (w *Session) adoptLater(ins *Inspection) {
	w.later, w.restored = nil, nil
	if l := laterOf(ins); l != nil {
		later := *l
		w.restored, later.Restored = l.Restored, nil
		w.later = &later
	}
}

// acceptLaterLines parses the lines of one request to a v4 session (the append syntax of v0: seq and
// time optional) and accepts them all, or none (mu held).
func (w *Session) acceptLaterLines(lines [][]byte, next, now int64) error {
	evs := make([]event.Event, len(lines))
	recs := make([]event.Value, len(lines))
	for i, l := range lines {
		in, ce := parseLine(l, next+int64(i), now)
		if ce != nil {
			ce.Line = i + 1
			return ce
		}
		evs[i], recs[i] = in.ev, in.rec
	}
	return w.acceptLaterParsed(evs, recs)
}

// acceptLaterLocked is acceptLaterParsed of events not parsed yet.
func (w *Session) acceptLaterLocked(evs []event.Event) error { return w.acceptLaterParsed(evs, nil) }

// acceptLaterParsed accepts events that continue a v4 log when the v4 reader restores the log they make
// (mu held); recs, when given, are their parsed records. The refusal names the first event that breaks a
// rule, and the rule.
func (w *Session) acceptLaterParsed(evs []event.Event, recs []event.Value) error {
	if len(evs) == 0 {
		return nil
	}
	if w.checker == nil && w.restored != nil {
		w.checker = w.restored.CheckerFor(w.events)
	}
	w.restored = nil
	if w.checker == nil {
		c, err := generation.NewV4Checker(w.later.Header, w.later.Cut, w.events)
		if err != nil {
			return &CommandError{Failure: Refused, Code: CodeBadInput, Message: err.Error(), Err: err}
		}
		w.checker = c
	}
	out, err := w.checker.CheckParsed(w.events, evs, recs)
	if err != nil {
		line := 0
		var ae *generation.AppendError
		if errors.As(err, &ae) {
			line = ae.Index + 1
		}
		return &CommandError{Failure: Invalid, Code: CodeBadInput, Line: line, Message: err.Error(), Err: err}
	}
	for _, e := range out {
		w.events = append(w.events, e)
		w.packing = append(w.packing, event.Packing{})
		w.noteTime(e)
		w.rawBytes += int64(len(e.Raw))
	}
	w.usedLocked()
	if w.timer == nil && w.st.Window > 0 {
		w.timer = time.AfterFunc(w.st.Window, w.batchDue)
	}
	return nil
}

// LaterRefusal refuses a write command that a store does not write in a later generation's shapes, by
// name, before anything is written.
func LaterRefusal(id, what string) *CommandError {
	return cmdErr(Refused, CodeBadInput, fmt.Sprintf("session %s is format generation v4: dshfs does not write its %s (run it with the harness); nothing was written", jsQuote(id), what))
}

// GenerationWriter is a backend that writes sessions of later format generations: WritesGeneration
// reports whether it creates and appends to sessions of generation g. A backend without it writes v0 only.
type GenerationWriter interface {
	WritesGeneration(g int) bool
}

func (s *Store) writesGeneration(g int) bool {
	if g == 0 {
		return true
	}
	w, ok := s.b.(GenerationWriter)
	return ok && w.WritesGeneration(g)
}

// WritesV4ByDefault is the "auto" choice of a new session's generation ([writer] generation): v4 when
// the backend writes v4 and the store already holds a v4 session (a 0.2.x harness's store), v0 otherwise
// (an empty or v0 store stays readable by every release).
func (s *Store) WritesV4ByDefault(ctx context.Context) (bool, error) {
	if !s.writesGeneration(4) {
		return false, nil
	}
	l, err := s.List(ctx)
	if err != nil {
		return false, err
	}
	for _, e := range l.Entries {
		if e.Generation == 4 {
			return true, nil
		}
	}
	return false, nil
}

// V4Header is h (id, createdAt, cwd) as the header of a new unseeded v4 session.
func V4Header(h event.Header) event.Header {
	gh := generation.Header{Version: 4, ID: h.ID, CreatedAt: h.CreatedAt, DelegationDepth: h.DelegationDepth}
	if h.Cwd != nil && h.Cwd.Kind == event.KindString {
		cwd := h.Cwd.Str
		gh.Cwd = &cwd
	}
	h.Version, h.Logical = 4, gh.Encoded().Raw
	return h
}
