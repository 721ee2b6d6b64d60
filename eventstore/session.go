package eventstore

import (
	"container/list"
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
	"github.com/dshfs/dshfs/eventstore/load"
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
}

func newSession(st *Store, id string, ins *Inspection, l WriterLock) *Session {
	stored := ins.Events[:len(ins.Events)-len(ins.Closers)]
	w := &Session{st: st, id: id, h: ins.Header, path: ins.Prefix.Path, art: ins.Prefix.Artifact,
		events: stored[:len(stored):len(stored)], durable: len(stored), lock: l, newest: -1, bracket: -1}
	if i, ok := openCompaction(stored); ok {
		w.bracket = int64(i)
	}
	if w.later = laterOf(ins); w.later != nil {
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
	gen4 := 0
	if w.later != nil {
		gen4 = 4
	}
	return Snapshot{ID: w.id, Header: w.h, Path: w.path, Events: w.events[:n:n], Durable: w.durable, Generation: gen4,
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

// Accept parses and validates the lines of one write request (each one event in the append syntax of
// docs/writing.md) and accepts them all, or none: the error names the first bad line.
func (w *Session) Accept(lines [][]byte) error {
	if err := w.checkElsewhere(); err != nil {
		return err
	}
	defer w.st.trimLive(w)
	err := w.lockResident(context.Background(), true)
	defer w.mu.Unlock()
	if err != nil {
		return AsCommandError(err)
	}
	if err := w.writableLocked(); err != nil {
		return err
	}
	if max := w.st.MaxLine; max > 0 {
		for i, l := range lines {
			if int64(len(l)) > max {
				return &CommandError{Failure: Invalid, Code: CodeBadInput, Line: i + 1,
					Message: fmt.Sprintf("line of %d bytes exceeds [writer] max_line_bytes (%d)", len(l), max)}
			}
		}
	}
	next := int64(len(w.events))
	now := time.Now().UnixMilli()
	if w.later != nil {
		return w.acceptLaterLines(lines, next, now)
	}
	ins := make([]input, len(lines))
	// Lines parse independently, and parsing is most of an append's cost: a large request uses every core.
	// A line's failure is kept for acceptLocked, which reports the first bad line in order.
	err = w.st.Tuning.Parallel(len(lines), 256, func(lo, hi int) error {
		for i := lo; i < hi; i++ {
			in, err := parseInput(lines[i], next+int64(i), now)
			if err != nil {
				ins[i] = input{prepared: true, invalid: err} // no event: only validate can refuse it
				continue
			}
			w.prepare(&in)
			ins[i] = in
		}
		return nil
	})
	if err != nil {
		return err
	}
	return w.acceptLocked(ins)
}

// AcceptEvents accepts already encoded events, whose seqs must continue the log.
func (w *Session) AcceptEvents(evs []event.Event) error {
	if err := w.checkElsewhere(); err != nil {
		return err
	}
	defer w.st.trimLive(w)
	err := w.lockResident(context.Background(), true)
	defer w.mu.Unlock()
	if err != nil {
		return AsCommandError(err)
	}
	if err := w.writableLocked(); err != nil {
		return err
	}
	return w.acceptEncodedLocked(evs)
}

// acceptEncodedLocked accepts encoded events whose seqs must continue the log (mu held).
func (w *Session) acceptEncodedLocked(evs []event.Event) error {
	next := int64(len(w.events))
	ins := make([]input, len(evs))
	for i, e := range evs {
		if e.Seq != next+int64(i) {
			return &CommandError{Failure: Invalid, Code: CodeBadInput, Line: i + 1,
				Message: fmt.Sprintf("append seq mismatch for %s: expected %d at index %d, got %s", jsQuote(w.id), next+int64(i), i, e.SeqText())}
		}
		if w.later != nil {
			continue
		}
		rec, err := e.Record()
		if err != nil {
			return &CommandError{Failure: Invalid, Code: CodeBadInput, Line: i + 1, Message: err.Error(), Err: err}
		}
		ins[i] = input{ev: e, rec: rec}
	}
	if w.later != nil {
		return w.acceptLaterLocked(evs)
	}
	return w.acceptLocked(ins)
}

func (w *Session) acceptLocked(ins []input) error {
	if len(ins) == 0 {
		return nil
	}
	bracket := w.bracket
	trace := w.liveTraceLocked().clone() // staged: the request's events are accepted all or none
	for i := range ins {
		in := &ins[i]
		err := w.crossesBracket(in.ev, bracket, trace)
		if err == nil {
			err = w.validate(in)
		}
		if err == nil {
			if ce := trace.acceptInput(in); ce != nil {
				w.folder = foldAll(w.events) // validate pushed this event too
				ce.Line = i + 1
				return ce
			}
		}
		if err != nil {
			if i > 0 {
				w.folder = foldAll(w.events) // undo the events of this request already pushed
			}
			if ce, ok := err.(*CommandError); ok {
				ce.Line = i + 1
				return ce
			}
			return &CommandError{Failure: Invalid, Code: CodeBadInput, Line: i + 1, Message: err.Error(), Err: err}
		}
		switch in.ev.Type {
		case "compaction/start":
			bracket = in.ev.Seq
		case "compaction/end", "session/end-seed":
			bracket = -1
		}
	}
	w.bracket = bracket
	w.trace, w.traced = trace, len(w.events)+len(ins)
	for _, in := range ins {
		w.events = append(w.events, in.ev)
		w.packing = append(w.packing, in.packing)
		if in.timed && in.millis > w.newest {
			w.newest = in.millis
		}
		w.rawBytes += int64(len(in.ev.Raw))
	}
	w.usedLocked()
	if w.timer == nil && w.st.Window > 0 {
		w.timer = time.AfterFunc(w.st.Window, w.batchDue)
	}
	return nil
}

// liveTraceLocked is the live invariants' trace of the events accepted so far, seeded from the stored log
// on first use and brought up to date with events that reached the log another way (mu held).
func (w *Session) liveTraceLocked() *liveTrace {
	if w.trace == nil || w.traced > len(w.events) {
		w.trace, w.traced = seedLiveTrace(w.events), len(w.events)
	}
	if w.traced < len(w.events) {
		for _, e := range w.events[w.traced:] {
			if rec, err := e.Record(); err == nil {
				w.trace.apply(e.Type, jsv{rec, true})
			}
		}
		w.traced = len(w.events)
	}
	return w.trace
}

// crossesBracket refuses a turn boundary while a compaction holds the lock: the harness never starts or
// ends a turn during maintenance, and its invariant companion rejects a log where one does.
// The text is the harness's compaction invariant's, which names the compaction's owner.
func (w *Session) crossesBracket(e event.Event, bracket int64, trace *liveTrace) error {
	if bracket < 0 || (e.Type != "turn/start" && e.Type != "turn/end") {
		return nil
	}
	owner := "standalone compaction"
	if c := trace.compaction; c != nil {
		owner = c.owner(owner, "compaction for turn ")
	}
	return &CommandError{Failure: Busy, Code: CodeCompactionLock, Message: fmt.Sprintf(
		`invariant violated by "%s": %s cannot cross an open %s (compaction/start at seq %d is still open in this process); write it when the compaction has ended`,
		compactionInvariant, e.Type, owner, bracket)}
}

// View is what Transact shows its builder: the session's events (stored + pending) and its current
// surface. Its slices must not be changed.
type View struct {
	Header event.Header
	Events []event.Event
	Fold   *surface.Result
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
	err := w.lockResident(context.Background(), true)
	defer w.mu.Unlock()
	if err != nil {
		return nil, AsCommandError(err)
	}
	if err := w.writableLocked(); err != nil {
		return nil, err
	}
	if w.later != nil {
		return nil, laterTransactRefusal(w.id)
	}
	n := len(w.events)
	evs, err := build(View{Header: w.h, Events: w.events[:n:n], Fold: w.folder.Result()})
	if err != nil || len(evs) == 0 {
		return nil, err
	}
	if err := w.acceptEncodedLocked(evs); err != nil {
		return nil, err
	}
	return evs, nil
}

// validate runs, on one new event, every check a later load of the log will run on it (so an accepted
// event can never make the session unreadable) — the checks of the event alone (check, or its outcome
// computed beforehand) and then the fold's.
func (w *Session) validate(in *input) error {
	w.prepare(in)
	if in.invalid != nil {
		return in.invalid
	}
	if err := w.folder.Push(in.ev); err != nil {
		return fmt.Errorf("invalid event at seq %d: %w", in.ev.Seq, err)
	}
	return nil
}

// prepare does the work on one new event that reads nothing of the session that changes — its checks
// (check) and, for a valid one, its packing and time — so that Accept does it on every core as it parses.
// An input already prepared (by Accept, or by quickInput as it read the line) is left as it is.
func (w *Session) prepare(in *input) {
	if in.prepared {
		return
	}
	in.invalid = w.check(*in)
	if in.invalid == nil {
		in.packing = event.PackingOf(in.ev, in.rec)
		in.millis, in.timed = eventMillis(in.ev)
	}
	in.prepared = true
}

// check runs the checks of one new event that need nothing but the event, in the load's order: retired
// vocabulary, legacy shapes (which a load would rewrite: refused, so the log holds what the views show),
// the message shape, the vocabulary, the envelope and request/header rules. It reads nothing of the
// session that changes, so the lines of a request are checked in parallel as they are parsed.
func (w *Session) check(in input) error {
	e, rec := in.ev, in.rec
	one := []event.Event{e}
	if err := load.CheckSupportedEvents(one, []event.Value{rec}, w.id); err != nil {
		return err
	}
	if _, changed, err := load.MigrateEvent(rec, w.id, map[float64]string{}); err != nil {
		return err
	} else if changed {
		return fmt.Errorf("%s event at seq %d has a legacy shape the harness upgrades on load; write the current shape", e.Type, e.Seq)
	}
	at := "session event at seq " + strconv.FormatInt(e.Seq, 10)
	if err := load.CheckMessageEventShape(rec, func() string { return at }); err != nil {
		return err
	}
	if !event.IsKnownType(e.Type) {
		if ign, ok := rec.Get("ignorable"); !ok || ign.Kind != event.KindBool || !ign.Bool {
			return unknownType(e.Type)
		}
	}
	if err := load.CheckEnvelope(rec, int(e.Seq)); err != nil {
		return err
	}
	if err := load.CheckSupportedRequestHeader(rec, func() string { return at }); err != nil {
		return err
	}
	switch e.Type {
	case "turn/start", "turn/end", "step/start", "step/end", "assistant/message", "tool/call", "tool/result":
		// the crash repair reads these events' data on every load
		if d, _ := rec.Get("data"); d.Kind != event.KindObject {
			return fmt.Errorf("%s event at seq %d must carry an object as data", e.Type, e.Seq)
		}
	}
	return nil
}

// batchDue is the end of a write-behind window: the batch is written; a failure is recorded and retried
// after another window.
func (w *Session) batchDue() {
	w.mu.Lock()
	w.timer = nil
	w.mu.Unlock()
	if err := w.Flush(context.Background()); err != nil {
		ce := AsCommandError(err)
		if ce.Code == CodeQuiesced {
			return // held: the quiesce's end starts the batch again (held)
		}
		w.st.Record(w.id, Result{Command: "flush (write-behind batch)", Err: ce})
		if ce.Failure == Failed {
			w.mu.Lock()
			if w.timer == nil && !w.closed {
				w.timer = time.AfterFunc(max(w.st.Window, time.Second), w.batchDue)
			}
			w.mu.Unlock()
		}
	}
}

// held starts the write of a batch held by a quiesce that has ended.
func (w *Session) held() {
	w.mu.Lock()
	due := w.timer == nil && !w.closed && w.durable < len(w.events) && w.st.Window > 0
	if due {
		w.timer = time.AfterFunc(0, w.batchDue)
	}
	w.mu.Unlock()
}

// Pending is how many accepted events are not durable yet.
func (w *Session) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lenLocked() - w.durable
}

// Flush makes every event accepted before the call durable, in batches (one zstd frame each); events
// accepted meanwhile may ride along. On failure the events stay pending and the error says why: a
// storage failure (Failed; a later flush retries) or a conflict with another writer (Busy; the pending
// events are kept in a sidecar and writes are refused until a rescan). An engine idle after it may leave
// others over the live budget: they are trimmed then.
func (w *Session) Flush(ctx context.Context) error {
	err := w.flush(ctx, false)
	w.st.trimLive(w)
	return err
}

// flush is Flush; a draining flush (Quiesce's own) writes while the store is quiesced, any other is
// refused then.
func (w *Session) flush(ctx context.Context, draining bool) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	// checked under wmu: a flush that was waiting for another write when a quiesce drained the session
	// must not then write what was accepted after the quiesce
	if !draining {
		if err := w.st.WritesHeld(); err != nil {
			return err
		}
	}
	w.mu.Lock()
	if w.released {
		// a late flush (a transaction finishing after Close) must not write without the writer lock
		pending := w.lenLocked() - w.durable
		w.mu.Unlock()
		if pending == 0 {
			return nil
		}
		return cmdErr(Busy, CodeNotLive, "session "+jsQuote(w.id)+" was released by this writer; write again to reopen it")
	}
	target := w.lenLocked()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.mu.Unlock()
	for {
		w.mu.Lock()
		if w.conflict != nil {
			err := w.conflict
			w.mu.Unlock()
			return err
		}
		if w.durable >= target {
			w.mu.Unlock()
			return nil
		}
		batch := w.events[w.durable:len(w.events):len(w.events)]
		packing := w.packing[:len(batch):len(batch)]
		h, art := w.h, w.art
		scan := w.scanDueLocked()
		w.mu.Unlock()

		// the last look before the bytes go out: a writer without the lease that has the artifact open
		// is writing a batch right now, which would land between or after these bytes (the backend
		// checks the artifact's revision itself, under its own open descriptor: CodeConflict)
		var err error
		if scan {
			err = w.st.probe(ctx, LiveCheck{ID: w.id, Path: w.path, Scan: true})
		}
		var next Artifact
		if err == nil {
			next, err = w.st.b.AppendBatch(ctx, h, art, batch, packing)
		}

		w.mu.Lock()
		if err != nil {
			ce := AsCommandError(err)
			if next.Token != "" && !foreignWrite(ce) {
				w.art = next // the backend cut its own partial write back: that state is ours
			}
			if !foreignWrite(ce) {
				w.mu.Unlock()
				return ce
			}
			// Refuse further events first, so that the sidecar, written without holding mu, holds every
			// accepted event that is not in the log.
			w.conflict = ce
			pending, h := w.events[w.durable:len(w.events):len(w.events)], w.h
			w.mu.Unlock()
			ce = w.keepPending(ctx, h, pending, ce, "; run rescan to read the session again")
			w.mu.Lock()
			w.conflict = ce
			w.mu.Unlock()
			return ce
		}
		w.durable += len(batch)
		w.packing = w.packing[len(batch):]
		w.art = next
		w.mu.Unlock()
	}
}

// foreignWrite reports whether a write was refused because another process writes the session: the
// engine's log is then stale (or about to be), so its pending events are kept aside, never retried.
func foreignWrite(ce *CommandError) bool {
	return ce.Code == CodeConflict || ce.Code == CodeLiveElsewhere
}

// keepPending saves events that could not be written beside the artifact and returns cause extended by
// how many there are and where they are kept, with the same failure class. The caller has made the engine
// refuse new events, so pending is all there is to keep.
func (w *Session) keepPending(ctx context.Context, h event.Header, pending []event.Event, cause *CommandError, then string) *CommandError {
	first, last := pending[0].Seq, pending[len(pending)-1].Seq
	where, err := w.st.b.KeepPending(ctx, h, pending)
	msg := fmt.Sprintf("%s; %d accepted events (seq %d..%d) were not written", cause.Message, len(pending), first, last)
	if err != nil {
		msg += fmt.Sprintf(" and could not be kept in a sidecar (%v)", err)
	} else {
		msg += " and are kept in " + where
	}
	return &CommandError{Failure: cause.Failure, Code: cause.Code, Message: msg + then, Err: cause}
}

// Close flushes and releases the session: the writer lock is given up and the engine forgotten. A failed
// flush keeps the session live (its events are not lost); a conflict releases it, its events being kept
// in the sidecar. It returns once the accepted events are durable, never waiting for a compaction that is
// still summarizing: that transaction is ended as failed, its compaction/end written with the rest
// (see inflight.go for why it is not left to commit later).
func (w *Session) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.inflight != nil && w.shed != nil {
		// the transaction's end follows the log (a shed log is read back for it; nothing else needs it)
		w.mu.Unlock()
		_ = w.lockResident(ctx, true)
	}
	w.endInflightLocked()
	w.mu.Unlock()
	err := w.Flush(ctx)
	if ce := AsCommandError(err); ce != nil && !foreignWrite(ce) {
		return err
	}
	w.release()
	return err
}

// Abandon is the last resort when a flush failed and the writer must go (the process ends): the pending
// events are kept in a sidecar beside the artifact and the session released. It returns cause extended by
// where the events are.
func (w *Session) Abandon(ctx context.Context, cause error) error {
	w.mu.Lock()
	ce := AsCommandError(cause)
	keep := w.durable < len(w.events) && w.conflict == nil
	pending, h := w.events[w.durable:len(w.events):len(w.events)], w.h
	w.closed = true // refuse new events while the sidecar is written
	w.mu.Unlock()
	if keep {
		ce = w.keepPending(ctx, h, pending, ce, "")
	}
	w.release()
	return ce
}

// conflicted reports whether writes are refused because the artifact changed under this engine.
func (w *Session) conflicted() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.conflict != nil
}

// release gives up the writer lock and forgets the engine, whatever is pending.
func (w *Session) release() {
	w.mu.Lock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if w.idleTimer != nil {
		w.idleTimer.Stop()
		w.idleTimer = nil
	}
	w.closed = true
	w.released = true
	l := w.lock
	w.lock = nil
	w.mu.Unlock()
	if l != nil {
		_ = l.Release()
	}
	w.st.forgetResident(w)
	w.st.release(w)
}

// resumable refuses a resume of a session this engine holds with an open turn: its writer is alive.
func (w *Session) resumable() error {
	err := w.lockResident(context.Background(), true)
	defer w.mu.Unlock()
	if err != nil {
		return AsCommandError(err)
	}
	if err := w.writableLocked(); err != nil {
		return err
	}
	if t, open := load.OpenTurn(w.events); open {
		return cmdErr(Busy, CodeLive, fmt.Sprintf("session %s is live in this process with open turn %d: its writer is alive, so there is nothing to resume", jsQuote(w.id), t))
	}
	return nil
}

// endSeed appends the session/end-seed a resume writes (unless the log already ends with one) and
// flushes.
func (w *Session) endSeed(ctx context.Context) error {
	if err := w.lockResident(ctx, true); err != nil {
		w.mu.Unlock()
		return AsCommandError(err)
	}
	n := len(w.events)
	ends := n > 0 && w.events[n-1].Type == "session/end-seed"
	w.mu.Unlock()
	if !ends {
		seed := event.NewEventFrom("session/end-seed", int64(n), time.Now().UnixMilli(), []byte("{}"))
		if err := w.AcceptEvents([]event.Event{seed}); err != nil {
			return err
		}
	}
	return w.Flush(ctx)
}

// inspection is Store.Load's answer for a live session: refused while its turn is open, as the harness
// refuses to load a live session mid-turn.
func (w *Session) inspection(ctx context.Context) (*Inspection, error) {
	s, err := w.SnapshotContext(ctx)
	if err != nil {
		return nil, AsCommandError(err)
	}
	if _, open := load.OpenTurn(s.Events); open {
		return nil, cmdErr(Busy, CodeLive, "cannot load session "+jsQuote(w.id)+" while its live turn is open; use the live Session or wait for the turn to close")
	}
	p := &Prefix{Header: s.Header, Events: s.Events, Path: s.Path}
	if w.later != nil {
		p.Generation = 4
		if p.SurfaceEvents, err = generation.SurfaceView(4, s.Events); err != nil {
			return nil, err
		}
	}
	return &Inspection{Header: s.Header, Events: s.Events, Prefix: p}, nil
}

// Revision is the current logical revision, without taking a snapshot.
func (w *Session) Revision() Revision {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _, gen := w.st.Results(w.id)
	return Revision{Artifact: w.art.Token, Durable: int64(w.durable), Pending: int64(w.lenLocked() - w.durable), Results: gen, Identity: w.art.Identity}
}
