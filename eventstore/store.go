package eventstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
	"github.com/dshfs/dshfs/eventstore/load"
	"github.com/dshfs/dshfs/surface"
)

// Entry is one session found by List: read from its header alone.
type Entry struct {
	ID         string        // the session id (decoded directory name, or the header id)
	ProjectDir string        // JSONL: the project directory name; "" for other backends
	Path       string        // artifact path
	Header     *event.Header // nil when the header could not be read
	HeaderLine []byte        // the first line verbatim (no LF) when it is a JSON object, else nil
	Revision   string        // opaque change token; "" when the artifact could not be stat'ed
	Identity   string        // the artifact's storage identity (Artifact.Identity)
	ModTime    time.Time     // when the artifact last changed; zero when it could not be stat'ed
	Owner      *Owner        // the artifact's owner and permission bits; nil when unknown
	Refusal    error         // why the harness would not list or open this session; nil when listed
	// Host is the session's source host in a store of many hosts' sessions (a fleet store: the host that
	// synced it, or that wrote it there); "" for backends of one host's store.
	Host string
	// Generation is the format generation of the artifact (JSONL: 0 for session.jsonl, N for
	// session.vN.jsonl); only generation 0 is ever written.
	Generation int
	// Beside are the session's other generation files kept beside its artifact (JSONL: the older
	// generations an upgraded harness leaves untouched when it publishes a newer one, and generation files
	// in the other encoding, for which the session is refused). They are never read as the session; store/
	// and backups carry them byte for byte. Nil where a backend has none.
	Beside []string
}

// RootError is a problem of the store root itself (mixed encodings, flat-layout files). It is reported beside
// the sessions instead of hiding them, unlike the harness, whose list() fails as a whole.
type RootError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Listing is the result of List: sessions in a stable order plus root errors.
type Listing struct {
	Entries    []Entry
	RootErrors []RootError
}

// Torn describes what lies after the committed prefix that a repair would drop.
type Torn struct {
	TruncateTo int64 // JSONL: the artifact is cut back to this size by a repair
	Bytes      int64 // physical bytes past the committed prefix
	Recovered  int   // JSONL: events decoded from a torn zstd frame (re-appended by a repair)
	// Seq is, in a backend of rows (SQLite), the seq of the first torn row: a repair deletes the rows
	// from it on (the harness's tornMarker).
	Seq int64
}

// Artifact is what a backend knows of a stored session's physical state without reading its content.
type Artifact struct {
	// Token changes whenever the stored bytes change (JSONL: `<dev>:<ino>:<size>:<mtimeNs>:<ctimeNs>`,
	// the harness's revision token). Only compared for equality, never parsed.
	Token string
	// Identity names the artifact's storage, not its bytes: it changes when the artifact is replaced (a
	// new file renamed over it), never when it grows (JSONL: `<dev>:<ino>`). The mount gives a replaced
	// artifact's files new inodes, so a reader holding the old ones keeps its snapshot. "" when unknown.
	Identity string
	ModTime  time.Time // when the artifact last changed
	Size     int64     // physical bytes
	Owner    *Owner    // nil when the backend has no per-session owner
}

// FileToken is a file's change token, `<dev>:<ino>:<size>:<mtimeNs>:<ctimeNs>`: equal tokens mean the same
// bytes, since no one can set a file's ctime (to the clock's tick). ok is false where the platform gives no
// inode and ctime. It is the JSONL artifact's Token, and the stamp the mount's index keeps of its view files.
func FileToken(fi os.FileInfo) (token string, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", false
	}
	// strconv rather than Sprintf: a listing makes one token per session
	b := make([]byte, 0, 80)
	b = strconv.AppendUint(b, uint64(st.Dev), 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, st.Ino, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, st.Size, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, st.Mtim.Nano(), 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, st.Ctim.Nano(), 10)
	return string(b), true
}

// Frozen is the durable prefix of an artifact, as a backup copies it (docs/tree.md, store/): its first
// Size bytes end at a complete line (raw) or a complete zstd frame — at a flush point for a session this
// process writes — so a copy of them never ends in a torn record. ModTime is derived from the data: the
// time of the last event in the prefix (the header's createdAt when it holds none), so it changes exactly
// when the prefix does. Token is the artifact revision it was computed at.
type Frozen struct {
	Token, Identity string
	Size            int64
	ModTime         time.Time
}

// Freezer is implemented by backends whose store is a tree of artifact files (JSONL), which the mount's
// store/ mirrors file for file.
type Freezer interface {
	// Freeze computes the frozen prefix of the artifact at path. prev, an earlier answer for the same
	// path (or the zero value), lets an artifact that only grew be read from where prev ended.
	Freeze(ctx context.Context, path string, prev Frozen) (Frozen, error)
	// OpenArtifact opens the artifact at path for reading with the backend's safety rules (regular
	// files inside the root only, never blocking).
	OpenArtifact(ctx context.Context, path string) (*os.File, Artifact, error)
}

// Owner is who may read a session's artifact: the mount serves the session's files with these, so that
// no user reads through dshfs what they could not read in the store.
type Owner struct {
	UID, GID uint32
	Perm     uint32 // permission bits (0o777) of the artifact
}

// Prefix is what a backend read yields: the stored prefix before any normalization or validation.
type Prefix struct {
	Header event.Header
	Events []event.Event // packed rows expanded, torn fragment excluded
	// RowMembers has bit i (word i/64, bit i%64) set when Events[i] is a member of a chunk row the backend
	// validated, with a seq that is a non-negative safe integer (event.DecodeStored): the load checks then
	// know its envelope without scanning it. Nil, or shorter than Events, where a backend does not say.
	RowMembers []uint64
	Artifact   Artifact // the state the bytes were read at
	Path       string
	Torn       *Torn // nil when the artifact ends on a committed boundary
	// Generation is the artifact's format generation: 0 for the v0 log this package validates, 2 or 3 for
	// a later one, whose events the backend decoded and validated with the harness's published codec
	// (package eventstore/generation): Inspect then applies no v0 check and no v0 repair to them.
	Generation int
	// SurfaceEvents are the events the surface fold reads, where they differ from Events (a v3 or v4 log:
	// its system messages and replacements as the released restore hands them to the v0 fold); nil
	// otherwise.
	SurfaceEvents []event.Event
	// Later is a v4 log's logical header and inherited cut, as its codec restored them: what a v4 writer
	// checks its appends against. Nil for other generations.
	Later *LaterLog
}

// LaterLog is what a v4 writer keeps of its log beyond the events.
type LaterLog struct {
	Header generation.Header
	Cut    int64
	// Closers are the v4 repair of a log that ends inside an open turn (generation.RepairV4), nil when it
	// is balanced; RepairErr says why no repair could be planned.
	Closers   []event.Event
	RepairErr error
}

// WriterLock is a held single-writer lock of one session; Release gives it up.
type WriterLock interface{ Release() error }

// Backend is what a storage format implements (the harness's PersistenceBackend hooks). Shared semantics —
// validation, legacy normalization, crash repair, seq checks, the session engine — live above it.
//
// Every durable write names the artifact state the writer last saw (expect); when the artifact is no
// longer in that state (another process wrote it), the backend writes nothing and returns a *CommandError
// with Failure Busy and Code CodeConflict. Writes return the state they left the artifact in.
type Backend interface {
	// Name is the backend name status.json reports ("jsonl", "jsonl+raw", "sqlite").
	Name() string
	// List reads headers only.
	List(ctx context.Context) (Listing, error)
	// LoadStored reads the whole stored prefix of one session; *NotFoundError when absent.
	LoadStored(ctx context.Context, id string) (*Prefix, error)
	// ReadRaw returns the artifact text verbatim (zstd: complete frames decoded).
	ReadRaw(ctx context.Context, id string) ([]byte, error)
	// Locate returns the artifact path a header maps to, without I/O.
	Locate(h event.Header) (string, error)
	// Stat returns the artifact state of a stored session without reading its content. path, when not
	// empty, is where a listing or read found the artifact, which spares the backend a lookup.
	Stat(ctx context.Context, id, path string) (Artifact, error)
	// Lock takes the single-writer lock of a stored session without waiting; a *CommandError with
	// Failure Busy and Code CodeLocked when another process (or another Store) holds it.
	Lock(ctx context.Context, id string) (WriterLock, error)
	// Materialize publishes a new session with its first batch (possibly empty) atomically; it never
	// replaces an existing artifact.
	Materialize(ctx context.Context, h event.Header, batch []event.Event) (Artifact, error)
	// AppendBatch durably appends one batch (one zstd frame), cut back on failure. packing, when not nil,
	// holds each event's packing classification (event.PackingOf), computed when it was accepted, so that
	// the write parses nothing.
	AppendBatch(ctx context.Context, h event.Header, expect Artifact, batch []event.Event, packing []event.Packing) (Artifact, error)
	// CommitRepair truncates a torn tail (keeping the cut bytes) and appends recovered events plus
	// closers as one batch.
	CommitRepair(ctx context.Context, h event.Header, expect Artifact, torn *Torn, recovered, closers []event.Event) (Artifact, error)
	// KeepPending stores events that were accepted but could not be written beside the artifact, where
	// the harness's discovery does not look, and returns where.
	KeepPending(ctx context.Context, h event.Header, events []event.Event) (string, error)
}

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
}

// Inspect is the harness's inspect(): the validated stored log plus the synthetic closers, in memory only.
func (s *Store) Inspect(ctx context.Context, id string) (*Inspection, error) {
	pb, ok := s.b.(ProgressiveBackend)
	if !ok {
		p, err := s.b.LoadStored(ctx, id)
		if err != nil {
			return nil, err
		}
		return s.inspectPrefix(id, p)
	}
	// The checks run on their own goroutine over what the backend has decoded so far. Their result
	// counts only when the load succeeds: a load error comes first, as when the checks follow the load.
	feed := load.NewProgress()
	sc := s.surfaceChecker()
	type checked struct {
		events, closers []event.Event
		err             error
	}
	res := make(chan checked, 1)
	go func() {
		events, closers, err := inspectFeed(id, feed, sc, s.Tuning)
		res <- checked{events, closers, err}
	}()
	p, err := pb.LoadStoredProgress(ctx, id, feed)
	if err != nil || p.Generation != 0 {
		feed.Abort()
		<-res
		if err != nil {
			return nil, err
		}
		return laterInspection(p), nil
	}
	feed.Finish(p.Header, p.Path, p.Events, p.RowMembers)
	r := <-res
	return inspection(id, p, sc, r.events, r.closers, r.err)
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
// A v4 log is the exception: dshfs writes v4, so its repair is planned as v0's is (generation.RepairV4),
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
	ins := &Inspection{Header: p.Header, Events: all, Closers: closers, Prefix: p}
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

// Live returns the engine of a session this Store writes, nil when it holds none.
func (s *Store) Live(id string) *Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[id]
}

// LiveIDs lists the sessions this Store writes.
func (s *Store) LiveIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.live))
	for id := range s.live {
		ids = append(ids, id)
	}
	return ids
}

// Record remembers the outcome of a command on a session for its status.json.
func (s *Store) Record(id string, r Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.results[id]
	if rs == nil {
		rs = &results{}
		s.results[id] = rs
	}
	rs.last = &r
	if r.Err != nil {
		rs.lastErr = &r
	}
	rs.gen++
}

// Results returns the last command and the last failed command of a session (nil when none), and a
// generation that changes whenever either does.
func (s *Store) Results(id string) (last, lastErr *Result, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rs := s.results[id]; rs != nil {
		return rs.last, rs.lastErr, rs.gen
	}
	return nil, nil, 0
}

// Writer returns the engine of a session for writing: the live one, or the stored session opened live.
// A stored session is opened only when it can be continued as it is — balanced (no open turn), no live
// compaction lock, no torn tail — otherwise the error says to run resume: a crashed or foreign writer's
// turn is never closed implicitly. The writer lock is taken before the log is read.
func (s *Store) Writer(ctx context.Context, id string) (*Session, error) {
	defer s.lock(id)()
	if w := s.Live(id); w != nil {
		return w, nil
	}
	return s.lockAndAdopt(ctx, id, func() (*Inspection, error) {
		ins, err := s.Inspect(ctx, id)
		if err != nil {
			return nil, err
		}
		return ins, resumeNeeded(id, ins)
	})
}

// lockAndAdopt takes the session's writer lock, reads it with read (under the lock, so nobody writes in
// between) and makes it live; the lock is given back when read fails.
func (s *Store) lockAndAdopt(ctx context.Context, id string, read func() (*Inspection, error)) (*Session, error) {
	l, err := s.writeLock(ctx, id, true)
	if err != nil {
		return nil, err
	}
	ins, err := read()
	if err != nil {
		l.Release()
		return nil, err
	}
	return s.adopt(id, ins, l), nil
}

// resumeNeeded says why a stored session cannot be continued without a resume, nil when it can.
func resumeNeeded(id string, ins *Inspection) error {
	stored := ins.Events[:len(ins.Events)-len(ins.Closers)]
	switch {
	case len(ins.Closers) > 0:
		turn, _ := load.OpenTurn(stored)
		return cmdErr(Busy, CodeOpenTurn, fmt.Sprintf("session %s ends inside open turn %d, which a harness may still be writing (one before 0.1.5 takes no lock) or a crashed writer left open; nothing was written. Only when no harness runs this session, resume closes the turn with the harness's interrupted repair", jsQuote(id), turn))
	case ins.Prefix.Torn != nil:
		return cmdErr(Busy, CodeTornTail, fmt.Sprintf("session %s has %d torn bytes past its committed log; run resume to cut them (they are kept in a sidecar)", jsQuote(id), ins.Prefix.Torn.Bytes))
	case ins.Prefix.Later != nil && ins.Prefix.Later.RepairErr != nil:
		return cmdErr(Busy, CodeOpenTurn, fmt.Sprintf("session %s ends inside an open turn that no v4 repair closes: %v; nothing was written", jsQuote(id), ins.Prefix.Later.RepairErr))
	case CompactionLocked(stored):
		return cmdErr(Busy, CodeCompactionLock, fmt.Sprintf("session %s holds a live compaction lock (a compaction/start with no compaction/end); run resume to end its lifecycle", jsQuote(id)))
	}
	return nil
}

// CompactionLocked reports whether the log holds a live compaction lock, as the harness's
// inspectCompactionEntryState decides it (docs/harness.md#the-compaction-lock): scanning backwards, the
// newest compaction/start-or-end marker is a start, and no session/end-seed follows it. The harness does
// not match ids here: any newer end, of whatever transaction, hides an older start.
func CompactionLocked(events []event.Event) bool {
	_, locked := openCompaction(events)
	return locked
}

// openCompaction returns the index of the compaction/start holding the lock (see CompactionLocked).
func openCompaction(events []event.Event) (int, bool) {
	for i := len(events) - 1; i >= 0; i-- {
		switch events[i].Type {
		case "session/end-seed", "compaction/end":
			return -1, false
		case "compaction/start":
			return i, true
		}
	}
	return -1, false
}

// adopt makes a validated stored session live in this Store.
func (s *Store) adopt(id string, ins *Inspection, l WriterLock) *Session {
	w := newSession(s, id, ins, l)
	s.mu.Lock()
	s.live[id] = w
	s.mu.Unlock()
	w.mu.Lock()
	w.usedLocked()
	w.mu.Unlock()
	s.trimLive(w)
	return w
}

// release forgets a live engine (after Close, or a conflict being rescanned).
func (s *Store) release(w *Session) {
	s.mu.Lock()
	if s.live[w.id] == w {
		delete(s.live, w.id)
	}
	s.mu.Unlock()
}

// Resume is the harness's resume (prepare): take the writer lock, commit the crash repair (torn bytes
// kept in a sidecar, recovered events and closers appended), then append a session/end-seed unless the
// log already ends with one. The session stays live in this Store. A session this Store already holds
// live is refused when its turn is open (its writer is alive: nothing to repair) and otherwise resumed
// in place.
func (s *Store) Resume(ctx context.Context, id string) (*Session, error) {
	if err := s.WritesHeld(); err != nil {
		return nil, err
	}
	defer s.lock(id)()
	w := s.Live(id)
	if w == nil {
		var err error
		if w, err = s.lockAndAdopt(ctx, id, func() (*Inspection, error) { return s.repair(ctx, id) }); err != nil {
			return nil, err
		}
	} else if err := w.resumable(); err != nil {
		return nil, err
	}
	if err := w.endSeed(ctx); err != nil {
		return w, err
	}
	return w, nil
}

// Create materializes a header-only session at once (every create — ctl, mkdir, CLI — does, so the
// harness lists and opens it). An existing session, an empty id or one the backend cannot name is
// refused, and nothing is written. The header is written as given (commands build valid ones; tests
// build invalid ones on purpose).
func (s *Store) Create(ctx context.Context, h event.Header) error {
	defer s.lock(h.ID)()
	if err := checkNewID(h.ID); err != nil {
		return err
	}
	if g := int(h.Version); !s.writesGeneration(g) {
		return cmdErr(Invalid, CodeBadInput, fmt.Sprintf("the %s store does not write format generation v%d sessions (dshfs writes v4 in JSONL roots only); nothing was written", s.b.Name(), g))
	}
	if _, err := s.b.Locate(h); err != nil {
		return cmdErr(Invalid, CodeBadInput, err.Error())
	}
	if err := s.absent(ctx, h.ID); err != nil {
		return err
	}
	if err := s.WritesHeld(); err != nil {
		return err
	}
	if _, err := s.b.Materialize(ctx, h, nil); err != nil {
		return AsCommandError(err)
	}
	return nil
}

// absent refuses an id that a live engine or a stored artifact already uses, with the harness's text. A
// lookup that failed (the disk, the database) says nothing either way: it is that failure (EIO), never
// "exists" or "not found".
func (s *Store) absent(ctx context.Context, id string) error {
	exists := s.Live(id) != nil
	if !exists {
		_, err := s.b.Stat(ctx, id, "")
		var ioe *IOError
		if errors.As(err, &ioe) {
			return &CommandError{Failure: Failed, Code: CodeWriteFailed,
				Message: "cannot tell whether session " + jsQuote(id) + " exists: " + err.Error() + "; nothing was created", Err: err}
		}
		exists = err == nil || !IsNotFound(err)
	}
	if exists {
		return cmdErr(Exists, CodeAlreadyExists, "session "+jsQuote(id)+" already exists")
	}
	return nil
}

// Append is one writer run over explicit events: the session's engine (opened live if needed) accepts
// the batch, whose first seq must be the next one, and flushes it as one durable batch.
func (s *Store) Append(ctx context.Context, id string, batch []event.Event) error {
	if len(batch) == 0 {
		return nil
	}
	w, err := s.Writer(ctx, id)
	if err != nil {
		return err
	}
	if err := w.AcceptEvents(batch); err != nil {
		return err
	}
	return w.Flush(ctx)
}

// Close flushes and releases every live session. A session whose flush fails is abandoned with its
// pending events kept in a sidecar beside the artifact (Session.Abandon), so nothing accepted is lost when
// the process ends; the first error is returned and every failure recorded.
func (s *Store) Close(ctx context.Context) error {
	s.ResumeWrites("unmount") // closing ends a quiesce: what was accepted is written as usual
	var first error
	for _, id := range s.LiveIDs() {
		w := s.Live(id)
		if w == nil {
			continue
		}
		err := w.Close(ctx)
		if err != nil {
			err = w.Abandon(ctx, err)
			s.Record(id, Result{Command: "close", Err: AsCommandError(err)})
			if first == nil {
				first = err
			}
		}
	}
	return first
}

// Rescan releases every live session whose artifact changed under it (its pending events are already
// kept in a sidecar), so the next write reads the session again. It returns how many were released;
// AcknowledgeForeign then accepts their foreign changes, with those of the sessions refused as live
// elsewhere.
func (s *Store) Rescan() int {
	n := 0
	for _, id := range s.LiveIDs() {
		if w := s.Live(id); w != nil && w.conflicted() {
			w.release()
			s.mu.Lock()
			s.foreign[id] = true // another process wrote it: AcknowledgeForeign accepts that change too
			s.mu.Unlock()
			n++
		}
	}
	return n
}

// checkNewID refuses an id a new session (create, a fork's child) cannot take: an empty one, one holding
// NUL (which no C tool can pass around, though a directory name can encode it), and bytes that are not
// WTF-8 — UTF-8 plus the lone surrogates a JS string may hold — which encoding the header would silently
// replace with U+FFFD, so that the session created is not the one asked for.
func checkNewID(id string) error {
	if id == "" {
		return cmdErr(Invalid, CodeBadInput, "session id must be a non-empty string")
	}
	if strings.IndexByte(id, 0) >= 0 {
		return cmdErr(Invalid, CodeBadInput, "session id "+strconv.Quote(id)+" contains NUL; a session id cannot")
	}
	if at := invalidWTF8(id); at >= 0 {
		return cmdErr(Invalid, CodeBadInput, fmt.Sprintf("session id %s is not valid UTF-8 (byte 0x%02X at offset %d); nothing was created", strconv.Quote(id), id[at], at))
	}
	return nil
}

// invalidWTF8 is the offset of the first byte of s that is neither UTF-8 nor the WTF-8 form of a lone
// surrogate (ED A0..BF 80..BF), -1 when there is none.
func invalidWTF8(s string) int {
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			i++
			continue
		}
		if s[i] == 0xED && i+2 < len(s) && s[i+1] >= 0xA0 && s[i+1] <= 0xBF && s[i+2]&0xC0 == 0x80 {
			i += 3
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return -1
}
