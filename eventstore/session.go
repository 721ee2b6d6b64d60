package eventstore

import (
	"container/list"
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
	"github.com/dshfs/dshfs/surface"
)

// Session is the session engine of a session this process writes (docs/architecture.md#the-session-engine): one handle per live
// session that owns its event list (stored + pending), the logical revision, the data-derived mtime,
// the incremental surface fold and the writer state. Accepting k events costs O(k): they are validated
// against the fold and appended in memory, visible at once in every snapshot, and written by a
// write-behind batch (or Flush). While live it holds the backend's writer lock, so no other dshfs
// instance writes the session meanwhile; before every write the backend checks that the artifact is
// still what this engine last saw, so a foreign writer (the harness) is detected, never overwritten. While
// idle it may release its log to stay within the Store's live budget, keeping the lock, and read it back
// when next used (resident.go).
type Session struct {
	st *Store
	id string

	// wmu serializes batch writes; it is held across backend I/O, mu never is.
	wmu sync.Mutex

	mu       sync.Mutex
	h        event.Header
	path     string
	events   []event.Event   // stored + pending; append-only, so snapshots may share its array
	durable  int             // events[:durable] are durable
	packing  []event.Packing // packing classification of events[durable:], computed when accepted
	art      Artifact        // the artifact as this engine last read or wrote it
	folder   *surface.Folder
	newest   int64 // newest event time (epoch ms), -1 when none
	lock     WriterLock
	conflict *CommandError // the artifact changed under this engine: writes refused until rescan
	timer    *time.Timer
	closed   bool
	// bracket is the seq of the compaction/start holding the compaction lock, -1 when none: while a
	// compaction runs, turn boundaries are refused (the harness's invariant companion: a turn may not
	// cross an open compaction).
	bracket int64
	// trace is what the harness's live invariants know of events[:traced] (live.go), built when the first
	// event is accepted
	trace  *liveTrace
	traced int
	// inflight is the transaction running outside the locks that Close must end (inflight.go), nil when
	// none.
	inflight *Inflight
	// released: the writer lock is given up, so nothing may be written any more (closed alone also
	// covers an Abandon writing its sidecar).
	released bool
	// scanned is when this engine last looked for other processes holding its artifact open for writing
	// (scanDueLocked).
	scanned time.Time

	// The log in memory (resident.go). shed is non-nil while the idle engine has released its log
	// (events, packing, folder and trace are nil then); reloading is closed when a read of it back ends.
	shed      *shedLog
	reloading chan struct{}
	rawBytes  int64       // the text of events, for the resident estimate
	lastUse   time.Time   // when the log was last used (an append, a snapshot)
	idleTimer *time.Timer // the end of the idle period ([writer] live_idle), nil when none is running
	// relem and rsize are the engine's entry in the Store's residency and the cost it was counted at,
	// guarded by the residency's mutex.
	relem *list.Element
	rsize int64

	// later is a v4 log's header and cut (nil for v0): its appends are checked by the v4 reader's rules
	// (later.go), and no v0 fold, trace or packing applies to it.
	later *LaterLog
	// checker holds the v4 restore's state at the end of events, so that an append checks only its own
	// events (nil until the first append; dropped whenever the log is read again)
	checker *generation.V4Checker
	// restored is the artifact the log was decoded from, until the first append takes its checker from it
	restored *generation.Artifact
}

func newSession(st *Store, id string, ins *Inspection, l WriterLock) *Session {
	stored := ins.Events[:len(ins.Events)-len(ins.Closers)]
	w := &Session{st: st, id: id, h: ins.Header, path: ins.Prefix.Path, art: ins.Prefix.Artifact,
		events: stored[:len(stored):len(stored)], durable: len(stored), lock: l, newest: -1, bracket: -1}
	if i, ok := openCompaction(stored); ok {
		w.bracket = int64(i)
	}
	if w.adoptLater(ins); w.later != nil {
		// the v0 fold cannot read a v4 log; nothing of the engine reads a fold of one
	} else if f := ins.Folder; f != nil && len(ins.Closers) == 0 {
		w.folder = f
	} else {
		w.folder = foldAll(stored)
	}
	for _, e := range stored {
		w.noteTime(e)
		w.rawBytes += int64(len(e.Raw))
	}
	return w
}

// foldAll rebuilds the incremental fold over a log that already passed validation.
func foldAll(events []event.Event) *surface.Folder {
	f := surface.NewFolder(0)
	for _, e := range events {
		_ = f.Push(e) // validated when it was read or accepted
	}
	return f
}

func (w *Session) noteTime(e event.Event) {
	if ms, ok := eventMillis(e); ok && ms > w.newest {
		w.newest = ms
	}
}

// eventMillis is an event's "time" member when it is an integer.
func eventMillis(e event.Event) (int64, bool) {
	if raw, ok := e.Member("time"); ok {
		if ms, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
			return ms, true
		}
	}
	return 0, false
}

// ID is the session id.
func (w *Session) ID() string { return w.id }

// Revision is a session's logical revision: what a view rendered from it depends on. It is a value, not
// a token to parse: String gives a cache key.
type Revision struct {
	Artifact string // the backend's artifact token
	Durable  int64  // durable events
	Pending  int64  // accepted events not yet durable
	Results  uint64 // generation of the recorded command results (status.json's lastError, lastCommand)
	// Identity is the artifact's storage identity (Artifact.Identity). The Artifact token already changes
	// with it, so it takes no part in String.
	Identity string
}

// String is the revision as one comparable key.
func (r Revision) String() string {
	return r.Artifact + "/" + strconv.FormatInt(r.Durable, 10) + "+" + strconv.FormatInt(r.Pending, 10) +
		"#" + strconv.FormatUint(r.Results, 10)
}

// Snapshot is one consistent state of a live session. Its slices are never changed afterwards.
type Snapshot struct {
	ID       string
	Header   event.Header
	Path     string
	Events   []event.Event // stored + pending
	Durable  int
	Revision Revision
	ModTime  time.Time // newest event time; the artifact's mtime for an empty log
	Fold     *surface.Result
	Conflict *CommandError // non-nil while writes are refused until a rescan
	// Generation is the log's format generation: 0, or 4 for a v4 log (whose Fold is nil).
	Generation int
}

// Snapshot returns the current state. The fold result is copied (O(surface)), events are shared. An engine
// that released its log while idle reads it back first; should that fail, the snapshot holds no events and
// Conflict says why. Callers that can report the failure use SnapshotContext.
func (w *Session) Snapshot() Snapshot {
	s, err := w.SnapshotContext(context.Background())
	if err != nil {
		w.mu.Lock()
		defer w.mu.Unlock()
		s = w.snapshotLocked()
		s.Conflict = AsCommandError(err)
	}
	return s
}

// SnapshotContext returns the current state, reading the log back when the idle engine released it.
func (w *Session) SnapshotContext(ctx context.Context) (Snapshot, error) {
	defer w.st.trimLive(w)
	err := w.lockResident(ctx, false)
	defer w.mu.Unlock()
	if err != nil {
		return Snapshot{}, err
	}
	return w.snapshotLocked(), nil
}

// snapshotLocked is Snapshot (mu held); the events of a shed log are nil.
func (w *Session) snapshotLocked() Snapshot {
	_, _, gen := w.st.Results(w.id)
	n := len(w.events)
	mt := w.art.ModTime
	if w.newest >= 0 {
		mt = time.UnixMilli(w.newest)
	}
	var fold *surface.Result
	if w.folder != nil {
		fold = w.folder.Result()
	}
	format := 0 // the log's generation (gen above is the results')
	if w.later != nil {
		format = 4
	}
	return Snapshot{ID: w.id, Header: w.h, Path: w.path, Events: w.events[:n:n], Durable: w.durable, Generation: format,
		Revision: Revision{Artifact: w.art.Token, Durable: int64(w.durable), Pending: int64(w.lenLocked() - w.durable), Results: gen, Identity: w.art.Identity},
		ModTime:  mt, Fold: fold, Conflict: w.conflict}
}

// writableLocked refuses writes to a closed engine or one whose artifact changed under it.
func (w *Session) writableLocked() error {
	if w.closed {
		return cmdErr(Busy, CodeNotLive, "session "+jsQuote(w.id)+" was released by this writer; write again to reopen it")
	}
	if w.conflict != nil {
		return w.conflict
	}
	return nil
}

// View is what Transact shows its builder: the session's events (stored + pending) and its current
// surface. Its slices must not be changed.
type View struct {
	Header event.Header
	Events []event.Event
	Fold   *surface.Result
	// Generation is the log's format generation (0, or 4): what it writes must be in its shapes.
	Generation int
}

// Next is the seq the next accepted event takes.
func (v View) Next() int64 { return int64(len(v.Events)) }

// Transact lets build inspect the session and returns the events it built after accepting them all, or
// none: no other event is accepted between the look and the append, so a condition checked on the view
// (a compaction's lock or selected span) still holds when its events land. build's error is returned as
// it is; an event that fails validation is refused like an invalid append line.
func (w *Session) Transact(build func(v View) ([]event.Event, error)) ([]event.Event, error) {
	if err := w.checkElsewhere(); err != nil {
		return nil, err
	}
	defer w.st.trimLive(w)
	err := w.lockWritable()
	defer w.mu.Unlock()
	if err != nil {
		return nil, err
	}
	n := len(w.events)
	v := View{Header: w.h, Events: w.events[:n:n]}
	if w.later != nil {
		// the engine of a v4 log keeps no fold: a transaction (a compaction) folds its surface view
		var err error
		if v.Fold, err = generation.FoldSurface(4, v.Events); err != nil {
			return nil, AsCommandError(err)
		}
		v.Generation = 4
	} else {
		v.Fold = w.folder.Result()
	}
	evs, err := build(v)
	if err != nil || len(evs) == 0 {
		return nil, err
	}
	if err := w.acceptEncodedLocked(evs); err != nil {
		return nil, err
	}
	return evs, nil
}

// Revision is the current logical revision, without taking a snapshot.
func (w *Session) Revision() Revision {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _, gen := w.st.Results(w.id)
	return Revision{Artifact: w.art.Token, Durable: int64(w.durable), Pending: int64(w.lenLocked() - w.durable), Results: gen, Identity: w.art.Identity}
}
