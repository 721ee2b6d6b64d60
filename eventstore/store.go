package eventstore

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/load"
	"github.com/dshfs/dshfs/surface"
)

// Store is the store seam (docs/architecture.md#the-store-seam) over one backend. It is safe for concurrent
// use; operations on one session are serialized, as the harness's coordinator does with its per-id chain. A
// Store is also the home of the session engines (Session) of the sessions it writes: at most one per id,
// holding the backend's writer lock while live.
type Store struct {
	b Backend
	// Window is the write-behind batch window: the first accepted event of a batch starts it, and the batch
	// is written when it ends (docs/architecture.md#the-session-engine). Zero: only explicit flushes (and
	// Close) write.
	Window time.Duration
	// MaxLine is the longest append line a writer accepts (config writer.max_line_bytes); 0: no limit.
	MaxLine int64
	// ForeignQuiet is [writer] foreign_quiet: a session whose artifact another process changed this
	// recently, with no dshfs writer having made or acknowledged the change, is live elsewhere (a harness
	// without the write lease may be between two of its batches). Zero: only a writer holding the
	// artifact open, or a change under a live engine, counts.
	ForeignQuiet time.Duration
	// LiveBytes is [writer] live_bytes: what the engines' logs may cost in memory together (estimated,
	// logCost); past it the least recently used idle engines release theirs (resident.go). Zero: no budget.
	LiveBytes int64
	// LiveIdle is [writer] live_idle: an engine idle this long releases its log whatever the budget.
	// Zero: only the budget releases logs.
	LiveIdle time.Duration
	// Tuning is how parallel a large append's parse and a large load's validation run (the program
	// decides; the zero Tuning takes one worker per P).
	Tuning Tuning

	// newSurface builds the surface check Inspect runs over every event, as the harness's Session
	// constructor does: the surface package's fold (New), or in this package's tests one that fails on cue.
	newSurface func() load.Surface

	res     residency
	mu      sync.Mutex
	live    map[string]*Session
	results map[string]*results
	locks   map[string]*sync.Mutex
	foreign map[string]bool // sessions refused as live elsewhere, for a rescan to acknowledge
	q       quiescence
}

// results are the last command outcomes of one session, for status.json.
type results struct {
	last, lastErr *Result
	gen           uint64 // bumped on every record, so a status rendered before is known stale
}

// New wraps a backend.
func New(b Backend) *Store {
	return &Store{b: b, newSurface: func() load.Surface { return surface.NewFolder(0) },
		live: map[string]*Session{}, results: map[string]*results{}, locks: map[string]*sync.Mutex{}, foreign: map[string]bool{}}
}

// Location is where a session is stored, for status.json: its artifact path, or — for a backend without
// one artifact per session (SQLite), whose prefixes name no path so that refusals carry no raw-log
// suffix — the database file holding it.
func (s *Store) Location(path string) string {
	if d, ok := s.b.(interface{ Path() string }); ok && path == "" {
		return d.Path()
	}
	return path
}

// Backend returns the wrapped backend.
func (s *Store) Backend() Backend { return s.b }

func (s *Store) lock(id string) func() {
	s.mu.Lock()
	l := s.locks[id]
	if l == nil {
		l = &sync.Mutex{}
		s.locks[id] = l
	}
	s.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// List returns every session's header-level entry and the root errors.
func (s *Store) List(ctx context.Context) (Listing, error) { return s.b.List(ctx) }

// ReadRaw returns the artifact bytes verbatim; it works for refused sessions too.
func (s *Store) ReadRaw(ctx context.Context, id string) ([]byte, error) { return s.b.ReadRaw(ctx, id) }

// rawWriter is a backend that can write ReadRaw's bytes out piece by piece (JSONL: a zstd frame at a time).
type rawWriter interface {
	WriteRaw(ctx context.Context, id string, w io.Writer) error
}

// WriteRaw writes ReadRaw's bytes to w, without holding them whole where the backend can (rawWriter).
// Errors of w come back wrapped in *WriteError; a read error after some bytes were written is returned
// as it is.
func (s *Store) WriteRaw(ctx context.Context, id string, w io.Writer) error {
	out := &writeTracker{w: w}
	var err error
	if rw, ok := s.b.(rawWriter); ok {
		err = rw.WriteRaw(ctx, id, out)
	} else {
		var b []byte
		b, err = s.b.ReadRaw(ctx, id)
		if _, werr := out.Write(b); werr != nil && err == nil {
			err = werr
		}
	}
	if out.err != nil {
		return &WriteError{Err: out.err}
	}
	return err
}

// WriteError is a failure of the writer a session's bytes are written to (WriteRaw, views.WriteView), as
// opposed to one of reading or rendering them: `dshfs cat` exits 2 on it, and the mount's index falls back to
// memory.
type WriteError struct{ Err error }

func (e *WriteError) Error() string { return "writing output: " + e.Err.Error() }

// Unwrap returns the writer's error.
func (e *WriteError) Unwrap() error { return e.Err }

// writeTracker remembers its writer's first error.
type writeTracker struct {
	w   io.Writer
	err error
}

func (t *writeTracker) Write(p []byte) (int, error) {
	if t.err != nil {
		return 0, t.err
	}
	n, err := t.w.Write(p)
	t.err = err
	return n, err
}

// Locate returns the artifact path for a header.
func (s *Store) Locate(h event.Header) (string, error) { return s.b.Locate(h) }

// Stat returns the artifact state of a stored session (path: where it was listed, or "").
func (s *Store) Stat(ctx context.Context, id, path string) (Artifact, error) {
	return s.b.Stat(ctx, id, path)
}

// ReadFrom is the harness's readFrom(id, seq): the stored, normalized log from seq on, without repair.
func (s *Store) ReadFrom(ctx context.Context, id string, seq int64) (*Prefix, error) {
	if seq < 0 {
		return nil, fmt.Errorf("readFrom fromSeq must be a non-negative safe integer, got %d", seq)
	}
	p, err := s.b.LoadStored(ctx, id)
	if err != nil {
		return nil, err
	}
	events, err := readStored(id, p.Header, p.Events, p.RowMembers, p.Path, s.Tuning)
	if err != nil {
		return nil, err
	}
	out := *p
	if seq > int64(len(events)) {
		seq = int64(len(events))
	}
	out.Events = events[seq:]
	out.RowMembers = nil // its bits name the stored events from 0, not these
	return &out, nil
}

// Inspection is the harness's inspect()/load() result.
type Inspection struct {
	Header  event.Header
	Events  []event.Event // stored (normalized) events followed by Closers
	Closers []event.Event // synthetic repair events, in memory unless committed by Load
	Prefix  *Prefix
	// Folder is the surface fold over Events (nil only in this package's tests, whose surface check is a stand-in).
	Folder *surface.Folder
	// Packed are the chunk rows kept packed (InspectPacked only): their members are Events' hollow events.
	Packed []event.PackedRow
}

// Inspect is the harness's inspect(): the validated stored log plus the synthetic closers, in memory only.
func (s *Store) Inspect(ctx context.Context, id string) (*Inspection, error) {
	return s.inspect(ctx, id, false)
}

// InspectPacked is Inspect keeping the chunk rows a backend can keep packed so (Inspection.Packed), for a
// reader that takes the members' records only through event.ExpandPacked, AppendPackedLines or
// Materialize: it spares the expansion of the rows, most of a large log's memory, until a view needs it.
func (s *Store) InspectPacked(ctx context.Context, id string) (*Inspection, error) {
	return s.inspect(ctx, id, true)
}

// inspect is Inspect, keeping rows packed when packed is set. The load keeps them packed either way (the
// checks read a member's type and seq only); for Inspect they are expanded once the checks are done.
func (s *Store) inspect(ctx context.Context, id string, packed bool) (*Inspection, error) {
	pb, ok := s.b.(ProgressiveBackend)
	if !ok {
		p, err := s.b.LoadStored(ctx, id)
		if err != nil {
			return nil, err
		}
		return s.inspectPrefix(id, p)
	}
	// The checks run on their own goroutine over what the backend has decoded so far, once that is
	// enough to be worth it (overlapEvents); a small session is checked after its load, on this goroutine.
	// Their result counts only when the load succeeds: a load error comes first, as when the checks follow
	// the load.
	feed := load.NewProgress()
	sc := s.surfaceChecker()
	type checked struct {
		events, closers []event.Event
		err             error
	}
	res := make(chan checked, 1)
	check := func() {
		events, closers, err := inspectFeed(id, feed, sc, s.Tuning)
		res <- checked{events, closers, err}
	}
	sink := &overlapSink{Progress: feed, start: func() { go check() }}
	p, err := pb.LoadStoredProgress(ctx, id, sink)
	if err != nil || p.Generation != 0 {
		feed.Abort()
		if sink.started {
			<-res
		}
		if err != nil {
			return nil, err
		}
		return laterInspection(p), nil
	}
	feed.FinishPacked(p.Header, p.Path, p.Events, p.RowMembers, p.Packed)
	if !sink.started {
		check()
	}
	r := <-res
	if r.err == nil && len(p.Packed) > 0 && !packed {
		if err := expandPacked(p, r.events); err != nil {
			return nil, err
		}
	}
	return inspection(id, p, sc, r.events, r.closers, r.err)
}

// expandPacked gives the members of p's packed rows their records in p's events and in events (the checks'
// list, a copy of p's when an upgrade changed an event), and leaves p with none packed. A copy of the same
// length shares the records made for it rather than expanding every row a second time.
func expandPacked(p *Prefix, events []event.Event) error {
	if err := event.MaterializeInPlace(events, p.Packed); err != nil {
		return err
	}
	if len(p.Events) > 0 && len(events) > 0 && &p.Events[0] != &events[0] {
		if len(p.Events) != len(events) {
			if err := event.MaterializeInPlace(p.Events, p.Packed); err != nil {
				return err
			}
		} else {
			for _, r := range p.Packed { // MaterializeInPlace checked every row against len(events)
				for i := r.First; i < r.First+r.Members; i++ {
					p.Events[i].Raw = events[i].Raw
				}
			}
		}
	}
	p.Packed = nil
	return nil
}

// overlapEvents is how many decoded events make it worth checking a load while it runs: below it, the
// goroutine the checks would start on costs more (its stack grows for them) than the overlap saves.
const overlapEvents = 4096

// overlapSink is the load's progress sink: it starts the checks (start, on their own goroutine) once the
// backend has reported overlapEvents events. started is read once the backend has returned.
type overlapSink struct {
	*load.Progress
	start   func()
	started bool
	once    sync.Once
}

// Packed is PackedSink.Packed: the load checks read only the type and seq of a chunk row's member.
func (s *overlapSink) Packed() bool { return true }

// Events is ProgressSink.Events.
func (s *overlapSink) Events(events []event.Event, rows []uint64) {
	s.Progress.Events(events, rows)
	if len(events) >= overlapEvents {
		s.once.Do(func() {
			s.started = true
			s.start()
		})
	}
}

func (s *Store) surfaceChecker() load.Surface {
	if s.newSurface == nil {
		return nil
	}
	return s.newSurface()
}

func (s *Store) inspectPrefix(id string, p *Prefix) (*Inspection, error) {
	if p.Generation != 0 {
		return laterInspection(p), nil
	}
	sc := s.surfaceChecker()
	events, closers, err := inspect(id, p.Header, p.Events, p.RowMembers, p.Path, sc, s.Tuning)
	return inspection(id, p, sc, events, closers, err)
}

// laterInspection is Inspect's result for a log of a later generation: the events the backend decoded,
// which the generation's codec already validated as the harness's release does. No v0 check applies to
// them and no closer is planned: the harness's repair of those generations is not this package's.
//
// A v4 log is the exception: dshfs writes v4, so its repair is planned as v0's is (generation.Artifact.Repair),
// and its closers follow its events as a v0 log's do.
func laterInspection(p *Prefix) *Inspection {
	if p.Later != nil && len(p.Later.Closers) > 0 {
		all := make([]event.Event, 0, len(p.Events)+len(p.Later.Closers))
		all = append(append(all, p.Events...), p.Later.Closers...)
		return &Inspection{Header: p.Header, Events: all, Closers: p.Later.Closers, Prefix: p}
	}
	return &Inspection{Header: p.Header, Events: p.Events, Prefix: p}
}

// inspection is what Inspect returns for prefix p, given the checks' result.
func inspection(id string, p *Prefix, sc load.Surface, events, closers []event.Event, err error) (*Inspection, error) {
	if err != nil {
		return nil, inspectError(id, err)
	}
	// Without closers the log is the list as loaded (capped by load.Inspect, so that a later append
	// copies instead of writing into the prefix's spare capacity). Copying 500k events here cost a quarter
	// of a second of a cold load, most of it the write barriers of a slice of pointers.
	all := events
	if len(closers) > 0 {
		all = make([]event.Event, 0, len(events)+len(closers))
		all = append(append(all, events...), closers...)
	}
	ins := &Inspection{Header: p.Header, Events: all, Closers: closers, Prefix: p, Packed: p.Packed}
	ins.Folder, _ = sc.(*surface.Folder)
	return ins, nil
}

// Load is the harness's load(): Inspect, then a durable repair (torn tail dropped and kept in a sidecar,
// recovered events and closers appended) when one is needed, then a re-read of the committed log. Like
// the harness it refuses a session this Store holds live with an open turn; a session another process
// holds is refused by the writer lock.
func (s *Store) Load(ctx context.Context, id string) (*Inspection, error) {
	defer s.lock(id)()
	if w := s.Live(id); w != nil {
		return w.inspection(ctx)
	}
	l, err := s.writeLock(ctx, id, true)
	if err != nil {
		return nil, err
	}
	defer l.Release()
	return s.repair(ctx, id)
}

// repair commits the crash repair of a session whose writer lock is held, and returns the re-read log.
func (s *Store) repair(ctx context.Context, id string) (*Inspection, error) {
	for range 3 {
		ins, err := s.Inspect(ctx, id)
		if err != nil {
			return nil, err
		}
		p := ins.Prefix
		if p.Later != nil && p.Later.RepairErr != nil {
			return nil, cmdErr(Invalid, CodeBadInput, fmt.Sprintf("session %s cannot be resumed: %v; nothing was written", jsQuote(id), p.Later.RepairErr))
		}
		if p.Torn == nil && len(ins.Closers) == 0 {
			return ins, nil
		}
		var recovered []event.Event
		if p.Torn != nil && p.Torn.Recovered > 0 {
			recovered = p.Events[len(p.Events)-p.Torn.Recovered:]
		}
		if _, err := s.b.CommitRepair(ctx, p.Header, p.Artifact, p.Torn, recovered, ins.Closers); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("session %s: repair did not converge", jsQuote(id))
}
