package views

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/dshfs/dshfs/compaction"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
	"github.com/dshfs/dshfs/eventstore/status"
	"github.com/dshfs/dshfs/spill"
	"github.com/dshfs/dshfs/surface"
)

// Render returns the bytes of one view. A refused session renders only header, status and raw; every
// other view returns the refusal.
func (s *Session) Render(ctx context.Context, view View) ([]byte, error) {
	switch view.Kind {
	case KindRaw:
		if s.Refusal != nil {
			return s.refusedRaw(ctx)
		}
		return s.store.ReadRaw(ctx, s.ID)
	case KindStatus:
		return s.Status(), nil
	case KindHeader:
		if s.Refusal == nil && s.Header != nil {
			return append(s.Header.Meta(), '\n'), nil
		}
		if s.HeaderLine != nil {
			return append(bytes.Clone(s.HeaderLine), '\n'), nil
		}
		return nil, s.Refusal
	}
	if s.Refusal != nil {
		return nil, s.Refusal
	}
	if l := s.current(); view.Kind == KindEvents && len(l.rows) > 0 {
		buf := bytes.NewBuffer(make([]byte, 0, l.linesSize(0, len(l.events))))
		if err := s.writePackedEvents(buf, l); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	if evs, ok, err := s.logLines(view); ok {
		if err != nil {
			return nil, err
		}
		return lines(evs), nil
	}
	n := view.N
	switch view.Kind {
	case KindMessages:
		fold, err := s.Fold()
		if err != nil {
			return nil, err
		}
		if s.Generation == 3 {
			return nil, generation.ErrMessagesUndecided
		}
		// v4 keeps every model message as the model saw it, system, developer and tool roles included
		// (docs/formats.md#v4): its own events, not the fold's v0 reading of them
		src := s.semantic()
		if s.Generation >= 4 {
			src = s.Events()
		}
		msgs, err := surface.DeriveMessages(src, fold)
		if err != nil {
			return nil, err
		}
		var out []byte
		for _, m := range msgs {
			out = append(append(out, m...), '\n')
		}
		return out, nil
	case KindCompactions:
		recs, _, err := s.Compactions()
		if err != nil {
			return nil, err
		}
		var out []byte
		for _, r := range recs {
			out = append(append(out, r.JSON()...), '\n')
		}
		return out, nil
	case KindPrunes:
		_, prunes, err := s.Compactions()
		if err != nil {
			return nil, err
		}
		var out []byte
		for _, p := range prunes {
			out = append(append(out, p.JSON()...), '\n')
		}
		return out, nil
	case KindSpill:
		rows, err := s.SpillRows()
		if err != nil {
			return nil, err
		}
		return spill.IndexJSON(rows), nil
	case KindTranscript:
		return s.Transcript()
	case KindTranscriptHTML:
		return s.TranscriptHTML()
	case KindUsage:
		return s.UsageJSONL()
	case KindUsageSVG:
		return s.UsageSVG()
	case KindEvent:
		if n < 0 || n >= int64(s.EventCount()) {
			return nil, fmt.Errorf("%w: event %d", ErrNotFound, n)
		}
		return append(bytes.Clone(s.eventAt(int(n)).Raw), '\n'), nil
	case KindTrace:
		tr, err := s.Tracer()
		if err != nil {
			return nil, err
		}
		t, err := tr.Trace(n)
		if err != nil {
			var se *surface.Error
			if errors.As(err, &se) && se.Code == "EVENT_NOT_FOUND" {
				return nil, fmt.Errorf("%w: %v", ErrNotFound, err)
			}
			return nil, err
		}
		return append(t.JSON(), '\n'), nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownView, view.String())
}

// logLines is, for a view that is a list of the log's own lines (events, surface, shadowed, turn:N),
// that list; ok is false for every other view. The session must not be refused.
func (s *Session) logLines(view View) (evs []event.Event, ok bool, err error) {
	switch view.Kind {
	case KindEvents:
		return s.Events(), true, nil
	case KindSurface:
		fold, err := s.Fold()
		if err != nil {
			return nil, true, err
		}
		return s.pick(fold.Nodes), true, nil
	case KindShadowed:
		evs, err := s.Shadowed()
		return evs, true, err
	case KindTurn:
		var evs []event.Event
		found := false
		if !s.withTurns(func(ts *eventstore.TurnScan) { evs, found = ts.TurnEvents(s.Events(), view.N) }) {
			evs, found = eventstore.TurnEvents(s.Events(), view.N)
		}
		if !found {
			return nil, true, fmt.Errorf("%w: turn %d", ErrNotFound, view.N)
		}
		return evs, true, nil
	}
	return nil, false, nil
}

// MaxRefusedRaw is the most raw text Render keeps of a refused session: its events are not in memory, so
// its raw text is all a rendering would cost, and a small artifact (a zstd frame of empty lines) or a huge
// one (a log refused for an over-long line) must not cost memory in proportion. WriteView streams it
// whatever its size.
const MaxRefusedRaw = 32 << 20

// ErrRawTooLarge refuses a refused session's raw text over MaxRefusedRaw.
var ErrRawTooLarge = errors.New("raw text of a refused session is too large to render in memory")

// refusedRaw is the raw view of a refused session, up to MaxRefusedRaw bytes.
func (s *Session) refusedRaw(ctx context.Context) ([]byte, error) {
	w := cappedBuffer{max: MaxRefusedRaw}
	err := s.store.WriteRaw(ctx, s.ID, &w)
	if w.over {
		return nil, fmt.Errorf("%w (over %d bytes); read it from the store", ErrRawTooLarge, MaxRefusedRaw)
	}
	var we *eventstore.WriteError
	if errors.As(err, &we) {
		err = we.Err
	}
	return w.buf.Bytes(), err
}

// cappedBuffer collects writes up to max bytes and fails the write that would pass it.
type cappedBuffer struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if c.buf.Len()+len(p) > c.max {
		c.over = true
		return 0, ErrRawTooLarge
	}
	return c.buf.Write(p)
}

// WriteView writes the bytes Render returns to w, and on failure what Render returned with its error (a
// refused session's header view). A view that is a list of the log's lines is written line by line
// instead of rendered first, so `dshfs cat` of a large session does not hold its text twice (78 MB for
// the events view of a 500k-event session), raw.jsonl a zstd frame at a time, and the transcript as it is
// rendered (its page's body once its table of contents is known, without a copy). Errors from w come back
// wrapped in *WriteError.
func (s *Session) WriteView(ctx context.Context, w io.Writer, view View) error {
	if view.Kind == KindRaw {
		return s.store.WriteRaw(ctx, s.ID, w) // a zstd artifact's text a frame at a time
	}
	if l := s.current(); view.Kind == KindEvents && s.Refusal == nil && len(l.rows) > 0 {
		return s.writePackedEvents(w, l)
	}
	var evs []event.Event
	ok := false
	if s.Refusal == nil {
		var err error
		if evs, ok, err = s.logLines(view); ok && err != nil {
			return err
		}
	}
	if s.Refusal == nil && (view.Kind == KindTranscript || view.Kind == KindTranscriptHTML) {
		return s.writeTranscriptTo(w, view.Kind == KindTranscriptHTML)
	}
	if !ok {
		b, err := s.Render(ctx, view)
		if _, werr := w.Write(b); werr != nil {
			return &WriteError{Err: werr}
		}
		return err
	}
	nl := []byte{'\n'}
	for _, e := range evs {
		if _, err := w.Write(e.Raw); err != nil {
			return &WriteError{Err: err}
		}
		if _, err := w.Write(nl); err != nil {
			return &WriteError{Err: err}
		}
	}
	return nil
}

// WriteError is a failure to write a view out, as opposed to a failure to read or render it.
type WriteError = eventstore.WriteError

// Shadowed lists the events that replacements shadowed, in seq order.
func (s *Session) Shadowed() ([]event.Event, error) {
	classes, err := s.classify()
	if err != nil {
		return nil, err
	}
	var out []event.Event
	for seq, c := range classes {
		if c == surface.Shadowed {
			out = append(out, s.eventAt(seq))
		}
	}
	return out, nil
}

// SpillRows is the spill index of this snapshot; every locator is re-resolved now.
func (s *Session) SpillRows() ([]spill.Row, error) {
	classes, err := s.classify()
	if err != nil {
		return nil, err
	}
	roots := s.opts.Spill
	if roots == nil {
		roots = spill.NewRootsExact(nil)
	}
	return spill.Index(s.locators(), roots, func(seq int64) bool {
		return seq >= 0 && seq < int64(len(classes)) && classes[seq] == surface.Shadowed
	}), nil
}

// locators are the spill locators the session's events cite (found once: they depend on the events alone,
// while what each resolves to is looked up at every SpillRows).
func (s *Session) locators() []spill.Locator {
	s.locOnce.Do(func() { s.locs = spill.Extract(s.Events()) })
	return s.locs
}

// VolatileState is what a volatile view (View.Volatile) depends on besides the snapshot: its spill index
// as the locators resolve now, spelled as spill/index.json spells it. Two renderings of a volatile view of
// one snapshot with equal states are the same bytes, so that a rendering may be served again while its
// state holds, instead of rendered for every read.
func (s *Session) VolatileState() (string, error) {
	rows, err := s.SpillRows()
	if err != nil {
		return "", err
	}
	return string(spill.IndexJSON(rows)), nil
}

// SpillRoots is the spill-root policy the snapshot was read with.
func (s *Session) SpillRoots() *spill.Roots {
	if s.opts.Spill == nil {
		return spill.NewRootsExact(nil)
	}
	return s.opts.Spill
}

// Status renders status.json. A live session's scans only the events accepted since the previous
// snapshot's (statusScan).
func (s *Session) Status() []byte {
	in := status.StatusInput{ID: s.ID, Backend: s.Backend, Location: s.Location, Header: s.Header,
		Revision: s.Revision, Events: s.Events(), Closers: s.Closers, Torn: s.Torn, Refusal: s.Refusal,
		Live: s.Live, Pending: s.Pending}
	in.LastCommand, in.LastError, _ = s.store.Results(s.ID)
	in.Custody = s.custody()
	if unlock, ok := s.statusScan(&in); ok {
		defer unlock()
	} else if s.Refusal == nil {
		in.ActiveCompaction = s.activeCompaction()
	}
	return append(event.Stringify(status.SessionStatus(in)), '\n')
}

// custodyTimeout bounds the one query status.json makes of a shared store (its renderers take no context).
const custodyTimeout = 10 * time.Second

// custody is who holds the session in a store many hosts share; nil elsewhere, and when the store cannot say
// (status.json then shows null, as for a store without custody).
func (s *Session) custody() *eventstore.Custody {
	c, ok := s.store.Backend().(eventstore.Custodian)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), custodyTimeout)
	defer cancel()
	got, err := c.Custody(ctx, s.ID)
	if err != nil {
		return nil
	}
	return &got
}

// activeCompaction is the open compaction's record, null when none holds the lock (or the records
// cannot be read).
func (s *Session) activeCompaction() event.Value {
	if recs, _, err := s.Compactions(); err == nil {
		if a := compaction.Active(recs); a != nil {
			if v, err := event.Parse(a.JSON()); err == nil {
				return v
			}
		}
	}
	return event.Value{}
}

func (s *Session) pick(seqs []int64) []event.Event {
	out := make([]event.Event, 0, len(seqs))
	for _, q := range seqs {
		out = append(out, s.eventAt(int(q)))
	}
	return out
}
