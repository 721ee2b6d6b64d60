package eventstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/dshfs/dshfs/eventstore/event"
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
	Refusal    error         // why the harness would not list or open this session; nil when listed
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

// Torn describes bytes after the committed prefix that a repair would drop.
type Torn struct {
	TruncateTo int64 // the artifact is cut back to this size by a repair
	Bytes      int64 // physical bytes past TruncateTo
	Recovered  int   // events decoded from a torn zstd frame (re-appended by a repair)
}

// Prefix is what a backend read yields: the stored prefix before any normalization or validation.
type Prefix struct {
	Header   event.Header
	Events   []event.Event // packed rows expanded, torn fragment excluded
	Revision string
	Path     string
	Torn     *Torn // nil when the artifact ends on a committed boundary
}

// Backend is what a storage format implements (the harness's PersistenceBackend hooks). Shared semantics —
// validation, legacy normalization, crash repair, seq checks — live in Store above it.
type Backend interface {
	// Name is the backend name status.json reports ("jsonl", "jsonl+raw", "sqlite").
	Name() string
	// List reads headers only.
	List(ctx context.Context) (Listing, error)
	// LoadStored reads the whole stored prefix of one session; *NotFoundError when absent.
	LoadStored(ctx context.Context, id string) (*Prefix, error)
	// ReadRaw returns the artifact text verbatim (zstd: complete frames decoded).
	ReadRaw(ctx context.Context, id string) ([]byte, error)
	// Materialize publishes a new session with its first batch atomically.
	Materialize(ctx context.Context, h event.Header, batch []event.Event) error
	// AppendBatch durably appends one batch to a materialized session (one zstd frame).
	AppendBatch(ctx context.Context, h event.Header, batch []event.Event) error
	// CommitRepair truncates a torn tail and appends recovered events plus closers as one batch.
	CommitRepair(ctx context.Context, h event.Header, torn *Torn, recovered, closers []event.Event) error
	// Locate returns the artifact path a header maps to, without I/O.
	Locate(h event.Header) (string, error)
	// Revision returns the change token of a stored session without reading its content.
	Revision(ctx context.Context, id string) (string, error)
}

// Inspection is the harness's inspect()/load() result.
type Inspection struct {
	Header  event.Header
	Events  []event.Event // stored (normalized) events followed by Closers
	Closers []event.Event // synthetic repair events, in memory unless committed by Load
	Prefix  *Prefix
}

// Store is the seam of DESIGN.md §3 over one backend. It is safe for concurrent use; operations on one
// session are serialized, as the harness's coordinator does with its per-id chain.
type Store struct {
	b Backend
	// Surface builds the surface validator Inspect runs over every event, as the harness's Session
	// constructor does; New installs the surface package's fold.
	Surface func() SurfaceChecker

	mu      sync.Mutex
	pending map[string]event.Header // created but not yet materialized (lazy materialization)
	cursors map[string]cursor       // durable length of sessions this Store wrote or loaded
	locks   map[string]*sync.Mutex
}

// New wraps a backend.
func New(b Backend) *Store {
	return &Store{b: b, Surface: func() SurfaceChecker { return surface.NewFolder(0) },
		pending: map[string]event.Header{}, cursors: map[string]cursor{}, locks: map[string]*sync.Mutex{}}
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

// Locate returns the artifact path for a header.
func (s *Store) Locate(h event.Header) (string, error) { return s.b.Locate(h) }

// Revision returns the stored session's change token.
func (s *Store) Revision(ctx context.Context, id string) (string, error) {
	return s.b.Revision(ctx, id)
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
	events, err := ReadStored(id, p.Header, p.Events, p.Path)
	if err != nil {
		return nil, err
	}
	out := *p
	if seq > int64(len(events)) {
		seq = int64(len(events))
	}
	out.Events = events[seq:]
	return &out, nil
}

// Inspect is the harness's inspect(): the validated stored log plus the synthetic closers, in memory only.
func (s *Store) Inspect(ctx context.Context, id string) (*Inspection, error) {
	p, err := s.b.LoadStored(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.inspectPrefix(id, p)
}

func (s *Store) inspectPrefix(id string, p *Prefix) (*Inspection, error) {
	var sc SurfaceChecker
	if s.Surface != nil {
		sc = s.Surface()
	}
	events, closers, err := Inspect(id, p.Header, p.Events, p.Path, sc)
	if err != nil {
		return nil, err
	}
	all := make([]event.Event, 0, len(events)+len(closers))
	all = append(append(all, events...), closers...)
	return &Inspection{Header: p.Header, Events: all, Closers: closers, Prefix: p}, nil
}

// Load is the harness's load(): Inspect, then a durable repair (torn tail dropped, recovered events and
// closers appended) when one is needed, then a re-read of the committed log.
func (s *Store) Load(ctx context.Context, id string) (*Inspection, error) {
	defer s.lock(id)()
	return s.load(ctx, id)
}

func (s *Store) load(ctx context.Context, id string) (*Inspection, error) {
	for range 3 {
		p, err := s.b.LoadStored(ctx, id)
		if err != nil {
			return nil, err
		}
		ins, err := s.inspectPrefix(id, p)
		if err != nil {
			return nil, err
		}
		if p.Torn == nil && len(ins.Closers) == 0 {
			s.setCursor(id, ins.Header, int64(len(ins.Events)))
			return ins, nil
		}
		var recovered []event.Event
		if p.Torn != nil && p.Torn.Recovered > 0 {
			recovered = p.Events[len(p.Events)-p.Torn.Recovered:]
		}
		if err := s.b.CommitRepair(ctx, p.Header, p.Torn, recovered, ins.Closers); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("session %s: repair did not converge", jsQuote(id))
}

// cursor is the durable state of a session this Store has written or loaded.
type cursor struct {
	h event.Header
	n int64
}

func (s *Store) setCursor(id string, h event.Header, n int64) {
	s.mu.Lock()
	s.cursors[id] = cursor{h, n}
	s.mu.Unlock()
}

// Create records a new session; nothing reaches disk until its first Append (lazy materialization).
func (s *Store) Create(ctx context.Context, h event.Header) error {
	defer s.lock(h.ID)()
	if _, err := s.b.Locate(h); err != nil {
		return err
	}
	if _, err := s.b.Revision(ctx, h.ID); err == nil {
		return fmt.Errorf("session %s already has a persisted log on disk; load/resume it instead of creating", jsQuote(h.ID))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.pending[h.ID]; ok {
		return fmt.Errorf("session %s already exists", jsQuote(h.ID))
	}
	s.pending[h.ID] = h
	return nil
}

// Append durably appends one batch (one zstd frame): the first seq must equal the stored length. The first
// append of a created session materializes it. Appending to a session this Store has not loaded first commits
// its crash repair, as the harness does when it adopts a disk-only session.
func (s *Store) Append(ctx context.Context, id string, batch []event.Event) error {
	if len(batch) == 0 {
		return nil
	}
	defer s.lock(id)()
	s.mu.Lock()
	h, isPending := s.pending[id]
	cur, known := s.cursors[id]
	s.mu.Unlock()
	switch {
	case isPending:
		cur = cursor{h, 0}
	case !known:
		ins, err := s.load(ctx, id)
		if err != nil {
			return err
		}
		cur = cursor{ins.Header, int64(len(ins.Events))}
	}
	for i, e := range batch {
		if e.Seq != cur.n+int64(i) {
			return fmt.Errorf("append seq mismatch for %s: expected %d at index %d, got %s", jsQuote(id), cur.n+int64(i), i, e.SeqText())
		}
	}
	var err error
	if isPending {
		err = s.b.Materialize(ctx, h, batch)
	} else {
		err = s.b.AppendBatch(ctx, cur.h, batch)
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.pending, id)
	s.cursors[id] = cursor{cur.h, cur.n + int64(len(batch))}
	s.mu.Unlock()
	return nil
}
