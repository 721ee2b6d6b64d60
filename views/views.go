// Package views renders every file a user reads about a session — the mount's files and `dshfs cat --view`
// output — from one consistent snapshot of the session, so that the two are byte-identical by
// construction. All projections (surface, messages, shadowed, trace, turns, compactions, spill, status) are
// computed over the same event list as events.jsonl: the stored log, or with Inspect the harness's
// in-memory repair of it.
package views

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dshfs/dshfs/compaction"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
	"github.com/dshfs/dshfs/eventstore/status"
	"github.com/dshfs/dshfs/spill"
	"github.com/dshfs/dshfs/surface"
)

// Options select how a session is read.
type Options struct {
	// Inspect applies the harness's in-memory crash repair (the closers) before every projection.
	Inspect bool
	// Spill is the spill-root policy for the spill view; nil means no roots (every locator outside).
	Spill *spill.Roots
	// Entry, when the caller already has the session's listing entry, tells where a refused session's
	// artifact is without listing the store again.
	Entry *eventstore.Entry
}

// Errors a view can fail with besides the session's own refusal.
var (
	// ErrUnknownView names a view that does not exist.
	ErrUnknownView = errors.New("unknown view")
	// ErrNotFound is a per-event view (event:SEQ, turn:N, trace:SEQ) naming something the log lacks.
	ErrNotFound = errors.New("no such item in this session")
)

// Session is one consistent snapshot of a session.
type Session struct {
	ID         string
	Backend    string
	Location   string
	Revision   string        // the backend's artifact token (the harness's revision), as status.json shows it
	Identity   string        // the artifact's storage identity (eventstore.Artifact.Identity); "" when unknown
	Header     *event.Header // nil when the header itself was refused
	HeaderLine []byte        // a refused session's first line, when it is a JSON object
	Events     []event.Event // the list every view is computed from
	Closers    []event.Event // the repair a resume would commit
	Torn       *eventstore.Torn
	Refusal    error // why the session cannot be shown; only header, status and raw work then
	Live       bool  // this process writes the session (its engine is the source of the snapshot)
	Pending    int   // the last Pending events are accepted but not durable yet
	// Lineage names the live engine a snapshot came from (nil for any other): the engine's event list
	// only grows, so a later snapshot of the same lineage holds this one's events as its prefix, and a
	// rendering of this one can be extended (Extend) instead of rendered again.
	Lineage any
	// carry is what status.json and turns/ have scanned of the lineage's events (grow.go), shared along it
	carry     *carry
	carryOnce sync.Once
	// Generation is the log's format generation (0, or 2 and 3 for the later ones the harness writes);
	// surfaceEvents are what the v0 projections read of a v3 log (its system messages and replacements as
	// the harness's released restore validates them), nil when they read Events
	Generation    int
	surfaceEvents []event.Event

	// mtime answers ModTime; for a loaded log it reads every event, so it runs on first use (`cat` of
	// the events view never asks)
	mtime func() time.Time

	store *eventstore.Store
	opts  Options

	foldOnce sync.Once
	fold     *surface.Result
	foldErr  error

	tracerOnce sync.Once
	tracer     *surface.Tracer
	tracerErr  error

	classOnce sync.Once
	classes   []surface.Class
	classErr  error

	compOnce sync.Once
	records  []compaction.Record
	prunes   []compaction.Prune
	compErr  error
}

// Load reads one snapshot of a session. A refusal is not an error: it is kept in Session.Refusal, because
// header.json, status.json and raw.jsonl still describe a refused session. Errors are for sessions that
// do not exist or cannot be read at all.
func Load(ctx context.Context, st *eventstore.Store, id string, opts Options) (*Session, error) {
	s := &Session{ID: id, Backend: st.Backend().Name(), store: st, opts: opts}
	ins, err := st.Inspect(ctx, id)
	if err != nil {
		if eventstore.IsNotFound(err) || unfinished(ctx, err) {
			return nil, err
		}
		s.Refusal = err
		e := opts.Entry
		if e == nil {
			e = entryOf(ctx, st, id)
		}
		if e != nil {
			s.Location, s.Revision, s.mtime, s.Header, s.HeaderLine = e.Path, e.Revision, fixedTime(e.ModTime), e.Header, e.HeaderLine
			// the entry may be older than the artifact, which a refused log does not stop anyone from
			// writing (a newer harness appends to its own generation): say the revision refused now
			if art, err := st.Backend().Stat(ctx, id, e.Path); err == nil && art.Token != "" {
				s.Revision, s.mtime = art.Token, fixedTime(art.ModTime)
			}
		}
		return s, nil
	}
	p := ins.Prefix
	h := ins.Header
	s.Header, s.Location, s.Revision, s.Identity, s.Torn, s.Closers = &h, st.Location(p.Path), p.Artifact.Token, p.Artifact.Identity, p.Torn, ins.Closers
	s.Generation, s.surfaceEvents = p.Generation, p.SurfaceEvents
	if opts.Inspect {
		s.Events = ins.Events
	} else {
		s.Events = ins.Events[:len(ins.Events)-len(ins.Closers)]
	}
	events, artifact, tuning := s.Events, p.Artifact.ModTime, st.Tuning
	s.mtime = sync.OnceValue(func() time.Time { return modTime(events, artifact, tuning) })
	if f := ins.Folder; f != nil && (opts.Inspect || len(ins.Closers) == 0) {
		// the validation already folded exactly these events: keep its result instead of folding again
		res := f.Result()
		s.foldOnce.Do(func() { s.fold = res })
	}
	return s, nil
}

// FromEntry is the snapshot of a session the listing already refused, without reading it again.
func FromEntry(st *eventstore.Store, e eventstore.Entry, opts Options) *Session {
	return &Session{ID: e.ID, Backend: st.Backend().Name(), Location: e.Path, Revision: e.Revision, mtime: fixedTime(e.ModTime),
		Header: e.Header, HeaderLine: e.HeaderLine, Refusal: e.Refusal, store: st, opts: opts}
}

// FromSnapshot is a view snapshot of a live session: stored and pending events (never synthetic ones),
// the engine's fold reused.
func FromSnapshot(st *eventstore.Store, snap eventstore.Snapshot, opts Options) *Session {
	h := snap.Header
	s := &Session{ID: snap.ID, Backend: st.Backend().Name(), Location: st.Location(snap.Path), Revision: snap.Revision.Artifact, Identity: snap.Revision.Identity,
		mtime: fixedTime(snap.ModTime), Header: &h, Events: snap.Events, Live: true, Pending: len(snap.Events) - snap.Durable,
		store: st, opts: opts}
	if snap.Generation >= 3 {
		// the engine of a later generation keeps no fold: the projections fold its surface view
		s.Generation = snap.Generation
		var err error
		if s.surfaceEvents, err = generation.SurfaceView(snap.Generation, snap.Events); err != nil {
			s.Refusal = err
		}
		return s
	}
	s.foldOnce.Do(func() { s.fold = snap.Fold })
	return s
}

// ModTime is the session's mtime: its newest event time; the artifact's mtime for an empty or refused
// session.
func (s *Session) ModTime() time.Time {
	if s.mtime == nil {
		return time.Time{}
	}
	return s.mtime()
}

func fixedTime(t time.Time) func() time.Time { return func() time.Time { return t } }

// modTime is the newest event time of a log (a view's mtime comes from its data, so it is the same on
// every mount); an empty log uses the artifact's mtime.
//
// It reads a member of every event, scattered over the whole session (a tenth of a second for 500k
// events, most of it cache misses), so large logs are split over the store's workers (t).
func modTime(events []event.Event, artifact time.Time, t eventstore.Tuning) time.Time {
	var mu sync.Mutex
	var newest int64 = -1
	t.Parallel(len(events), 1<<15, func(lo, hi int) error {
		var part int64 = -1
		for _, e := range events[lo:hi] {
			if raw, ok := e.Member("time"); ok {
				if ms, err := strconv.ParseInt(string(raw), 10, 64); err == nil && ms > part {
					part = ms
				}
			}
		}
		mu.Lock()
		newest = max(newest, part)
		mu.Unlock()
		return nil
	})
	if newest >= 0 {
		return time.UnixMilli(newest)
	}
	return artifact
}

func entryOf(ctx context.Context, st *eventstore.Store, id string) *eventstore.Entry {
	l, err := st.List(ctx)
	if err != nil {
		return nil
	}
	for i := range l.Entries {
		if l.Entries[i].ID == id {
			return &l.Entries[i]
		}
	}
	return nil
}

// semantic is the event list the projections (fold, trace, compactions, classification) read: Events,
// or for a v3 log the view of it the harness's release folds.
func (s *Session) semantic() []event.Event {
	if s.surfaceEvents != nil {
		return s.surfaceEvents
	}
	return s.Events
}

// forkSeed is the seq of a fork's end-seed — the header's seedLength, the events copied from the parent —
// and -1 for a session that is no fork.
func (s *Session) forkSeed() int64 {
	if h := s.Header; h != nil && h.ParentSession != nil && h.SeedLength != nil && h.SeedLength.Kind == event.KindNumber {
		return int64(h.SeedLength.Num)
	}
	return -1
}

// Fold is the surface fold of the session's events (computed once).
func (s *Session) Fold() (*surface.Result, error) {
	s.foldOnce.Do(func() { s.fold, s.foldErr = surface.Fold(s.semantic()) })
	return s.fold, s.foldErr
}

// classify is every event's class — current, shadowed, log-only — over the fold (computed once: the
// shadowed view, the spill index and the transcript all read it).
func (s *Session) classify() ([]surface.Class, error) {
	s.classOnce.Do(func() {
		fold, err := s.Fold()
		if err != nil {
			s.classErr = err
			return
		}
		s.classes = surface.Classify(s.semantic(), fold)
	})
	return s.classes, s.classErr
}

// Tracer answers traces for this snapshot (built once).
func (s *Session) Tracer() (*surface.Tracer, error) {
	s.tracerOnce.Do(func() { s.tracer, s.tracerErr = surface.NewTracer(s.semantic()) })
	return s.tracer, s.tracerErr
}

// Compactions returns the compaction records and prunes (computed once).
func (s *Session) Compactions() ([]compaction.Record, []compaction.Prune, error) {
	s.compOnce.Do(func() {
		fold, err := s.Fold()
		if err != nil {
			s.compErr = err
			return
		}
		if s.records, s.compErr = compaction.Records(s.semantic(), fold); s.compErr != nil {
			return
		}
		s.prunes, s.compErr = compaction.Prunes(s.semantic(), fold)
	})
	return s.records, s.prunes, s.compErr
}

// Kind names a view as `dshfs cat --view` spells it.
type Kind string

// The view kinds: whole-session views, then the per-item ones that take a number (`event:SEQ`, `turn:N`,
// `trace:SEQ`).
const (
	KindEvents      Kind = "events"
	KindRaw         Kind = "raw"
	KindHeader      Kind = "header"
	KindStatus      Kind = "status"
	KindSurface     Kind = "surface"
	KindMessages    Kind = "messages"
	KindShadowed    Kind = "shadowed"
	KindCompactions Kind = "compactions"
	KindPrunes      Kind = "prunes"
	KindSpill       Kind = "spill"
	KindTranscript  Kind = "transcript"
	// KindTranscriptHTML is the transcript as one HTML page
	KindTranscriptHTML Kind = "transcript-html"
	KindUsage          Kind = "usage"
	KindUsageSVG       Kind = "usage-svg"
	KindEvent          Kind = "event"
	KindTurn           Kind = "turn"
	KindTrace          Kind = "trace"
)

// View is one renderable view of a session: a kind and, for the per-item kinds, its number. It is a
// comparable value (a cache key as it is); only the CLI spells it as text.
type View struct {
	Kind Kind
	N    int64 // the seq or turn number of event, turn and trace views
}

// The whole-session views.
var (
	Events         = View{Kind: KindEvents}
	Raw            = View{Kind: KindRaw}
	Header         = View{Kind: KindHeader}
	Status         = View{Kind: KindStatus}
	Surface        = View{Kind: KindSurface}
	Messages       = View{Kind: KindMessages}
	Shadowed       = View{Kind: KindShadowed}
	Compactions    = View{Kind: KindCompactions}
	Prunes         = View{Kind: KindPrunes}
	Spill          = View{Kind: KindSpill}
	Transcript     = View{Kind: KindTranscript}
	TranscriptHTML = View{Kind: KindTranscriptHTML}
	Usage          = View{Kind: KindUsage}
	UsageSVG       = View{Kind: KindUsageSVG}
)

// Event is the view of one event line (events/<seq>.<type>.json).
func Event(seq int64) View { return View{Kind: KindEvent, N: seq} }

// Turn is the view of one turn (turns/<n>.jsonl).
func Turn(n int64) View { return View{Kind: KindTurn, N: n} }

// Trace is the trace of one event (trace/<seq>.json).
func Trace(seq int64) View { return View{Kind: KindTrace, N: seq} }

// Volatile reports whether a view depends on more than the session's revision: the spill index and the
// transcript (which shows each spill locator's status) re-resolve locators whose targets live outside the
// store, so they are rendered at every read, never cached.
func (v View) Volatile() bool {
	return v.Kind == KindSpill || v.Kind == KindTranscript || v.Kind == KindTranscriptHTML
}

// numbered reports whether views of kind k carry a number.
func (k Kind) numbered() bool { return k == KindEvent || k == KindTurn || k == KindTrace }

// String is the view as `dshfs cat --view` spells it.
func (v View) String() string {
	if v.Kind.numbered() {
		return string(v.Kind) + ":" + strconv.FormatInt(v.N, 10)
	}
	return string(v.Kind)
}

// ParseView reads a `--view` argument; ok is false for anything that names no view.
func ParseView(s string) (View, bool) {
	switch k := Kind(s); k {
	case KindEvents, KindRaw, KindHeader, KindStatus, KindSurface, KindMessages, KindShadowed,
		KindCompactions, KindPrunes, KindSpill, KindTranscript, KindTranscriptHTML, KindUsage, KindUsageSVG:
		return View{Kind: k}, true
	}
	name, arg, ok := strings.Cut(s, ":")
	if !ok || !Kind(name).numbered() {
		return View{}, false
	}
	n, err := strconv.ParseInt(arg, 10, 64)
	if err != nil {
		return View{}, false
	}
	return View{Kind: Kind(name), N: n}, true
}

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
			src = s.Events
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
		if n < 0 || n >= int64(len(s.Events)) {
			return nil, fmt.Errorf("%w: event %d", ErrNotFound, n)
		}
		return append(bytes.Clone(s.Events[n].Raw), '\n'), nil
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
		return s.Events, true, nil
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
		if !s.withTurns(func(ts *eventstore.TurnScan) { evs, found = ts.TurnEvents(s.Events, view.N) }) {
			evs, found = eventstore.TurnEvents(s.Events, view.N)
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
// the events view of a 500k-event session), and raw.jsonl a zstd frame at a time. Errors from w come back
// wrapped in *WriteError.
func (s *Session) WriteView(ctx context.Context, w io.Writer, view View) error {
	if view.Kind == KindRaw {
		return s.store.WriteRaw(ctx, s.ID, w) // a zstd artifact's text a frame at a time
	}
	var evs []event.Event
	ok := false
	if s.Refusal == nil {
		var err error
		if evs, ok, err = s.logLines(view); ok && err != nil {
			return err
		}
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
			out = append(out, s.Events[seq])
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
	return spill.Index(spill.Extract(s.Events), roots, func(seq int64) bool {
		return seq >= 0 && seq < int64(len(classes)) && classes[seq] == surface.Shadowed
	}), nil
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
		Revision: s.Revision, Events: s.Events, Closers: s.Closers, Torn: s.Torn, Refusal: s.Refusal,
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
		out = append(out, s.Events[q])
	}
	return out
}

// lines renders events as JSONL.
func lines(evs []event.Event) []byte {
	n := 0
	for _, e := range evs {
		n += len(e.Raw) + 1
	}
	out := make([]byte, 0, n)
	for _, e := range evs {
		out = append(append(out, e.Raw...), '\n')
	}
	return out
}

// unfinished reports whether a read failed for want of time — the caller gave up (an interrupted
// request), or a store's deadline passed (a fleet server that stopped answering) — rather than for what the
// session holds: an error then, never a refusal, which the caches would remember for the revision.
func unfinished(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
