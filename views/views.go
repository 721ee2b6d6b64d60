// Package views renders every file a user reads about a session — the mount's files and `dshfs cat --view`
// output — from one consistent snapshot of the session, so that the two are byte-identical by
// construction. All projections (surface, messages, shadowed, trace, turns, compactions, spill, status) are
// computed over the same event list as events.jsonl: the stored log, or with Inspect the harness's
// in-memory repair of it.
package views

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dshfs/dshfs/compaction"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
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
	// Expanded loads the log with its chunk rows expanded, for a caller that will read members' records
	// anyway (a human view in `dshfs cat`): the load then expands them in place, where a snapshot that kept
	// them packed would expand them into a copy of its list.
	Expanded bool
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
	// list is the list every view is computed from (Events), with the chunk rows kept packed, as a load
	// keeps them for the views (eventstore.Store.InspectPacked); once a view expands them, the expanded
	// list replaces it (a reader keeps the one it loaded, consistent with itself)
	list       atomic.Pointer[eventList]
	expandOnce sync.Once
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
	// Generation is the log's format generation (0, 2, 3 or 4); surfaceEvents are what the v0 projections
	// read of a v3 or v4 log (its system and developer messages and replacements as the released restore
	// validates them), made on first use: `cat` of the events view never needs them
	Generation    int
	surfaceOnce   sync.Once
	surfaceEvents []event.Event
	surfaceErr    error

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

	locOnce sync.Once
	locs    []spill.Locator

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
	inspect := st.InspectPacked
	if opts.Expanded {
		inspect = st.Inspect
	}
	ins, err := inspect(ctx, id)
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
	s.Generation = p.Generation
	events := ins.Events[:len(ins.Events)-len(ins.Closers)]
	if opts.Inspect {
		events = ins.Events
	}
	s.list.Store(&eventList{events: events, rows: ins.Packed})
	artifact, tuning := p.Artifact.ModTime, st.Tuning
	s.mtime = sync.OnceValue(func() time.Time {
		l := s.current()
		return modTime(l.events, l.rows, artifact, tuning)
	})
	if f := ins.Folder; f != nil && (opts.Inspect || len(ins.Closers) == 0) {
		// the validation already folded exactly these events: keep its result instead of folding again
		res := f.Result()
		s.foldOnce.Do(func() { s.fold = res })
	}
	return s, nil
}

// Events is the session's event list, every event with its record: a chunk row the load kept packed is
// expanded on first use (once per snapshot). The events view and the mtime read the packed rows without
// it.
func (s *Session) Events() []event.Event {
	l := s.current()
	if len(l.rows) == 0 {
		return l.events
	}
	s.expandOnce.Do(func() {
		whole, err := event.Materialize(l.events, l.rows)
		if err != nil {
			s.rowGone(err)
		}
		s.list.Store(&eventList{events: whole})
	})
	return s.current().events
}

// rowGone ends the program on a packed row that no longer expands. The rows were read by the same reader
// when the session was loaded, and their bytes are the load's own: a row that no longer reads is memory
// gone wrong, not a session's fault, and no view may be served from it.
func (s *Session) rowGone(err error) {
	panic("views: a packed chunk row of session " + s.ID + " no longer expands: " + err.Error())
}

// eventList is a session's events, hollow where rows holds a packed chunk row (event.PackedRow).
type eventList struct {
	events []event.Event
	rows   []event.PackedRow
}

var noEvents = &eventList{}

// current is the session's list as it is now: with its rows packed, or expanded.
func (s *Session) current() *eventList {
	if l := s.list.Load(); l != nil {
		return l
	}
	return noEvents
}

// eventAt is s.Events()[i], expanding no more than its row when the list is not expanded yet (a view of one
// event, or of a few picked out of a long log).
func (s *Session) eventAt(i int) event.Event {
	l := s.current()
	e, err := event.MemberAt(l.events, l.rows, i)
	if err != nil {
		s.rowGone(err)
	}
	return e
}

// EventCount is len(s.Events()), without expanding packed rows.
func (s *Session) EventCount() int { return len(s.current().events) }

// RecordBytes is how many events the session holds and the size of their records, packed rows counted
// as expanded, without expanding them (a cache's estimate of what the snapshot may come to hold).
func (s *Session) RecordBytes() (events int, bytes int64) { return s.current().recordBytes() }

func (l *eventList) recordBytes() (events int, bytes int64) {
	n := len(l.events)
	return n, int64(l.linesSize(0, n) - n) // the events view less its line feeds
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
		mtime: fixedTime(snap.ModTime), Header: &h, Live: true, Pending: len(snap.Events) - snap.Durable,
		store: st, opts: opts}
	s.list.Store(&eventList{events: snap.Events})
	if snap.Generation >= 3 {
		// the engine of a later generation keeps no fold: the projections fold its surface view
		s.Generation = snap.Generation
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
func modTime(events []event.Event, packed []event.PackedRow, artifact time.Time, t eventstore.Tuning) time.Time {
	var mu sync.Mutex
	var newest int64 = -1
	for _, r := range packed { // the times of a packed row's hollow members
		newest = max(newest, r.Newest)
	}
	t.Parallel(len(events), 1<<15, func(lo, hi int) error {
		var part int64 = -1
		for _, e := range events[lo:hi] {
			if e.IsHollow() {
				continue // its time is its row's (packed)
			}
			if raw, ok := e.Time(); ok {
				if ms, ok := millis(raw); ok && ms > part {
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

// millis reads a time member's canonical token as whole milliseconds: digits (a safe integer has at most
// 16) straight from the bytes, any other spelling as strconv reads it.
func millis(tok []byte) (int64, bool) {
	if len(tok) == 0 || len(tok) > 16 {
		ms, err := strconv.ParseInt(string(tok), 10, 64)
		return ms, err == nil
	}
	var n int64
	for _, c := range tok {
		if c < '0' || c > '9' {
			ms, err := strconv.ParseInt(string(tok), 10, 64)
			return ms, err == nil
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
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
	if s.Generation < 3 {
		return s.Events()
	}
	s.surfaceOnce.Do(func() {
		if s.surfaceEvents, s.surfaceErr = generation.SurfaceView(s.Generation, s.Events()); s.surfaceErr != nil {
			s.surfaceEvents = s.Events() // Fold reports surfaceErr first
		}
	})
	return s.surfaceEvents
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
	s.foldOnce.Do(func() {
		events := s.semantic()
		if s.foldErr = s.surfaceErr; s.foldErr == nil {
			s.fold, s.foldErr = generation.FoldView(s.Generation, events)
		}
	})
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
