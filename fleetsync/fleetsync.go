// Package fleetsync copies a host's session store (JSONL raw, JSONL zstd or SQLite) into a fleet store
// (eventstore/postgres), incrementally and safely against a kill at any moment:
//
//   - What is copied is the stored log, line by line as the host's store keeps it: the header line and
//     every committed line (an event, or a packed chunk row) — never a torn fragment, never a repair. A
//     live session is copied up to its last complete line (raw) or frame (zstd); an interrupted one as it
//     is stored. The source is only read.
//   - Only lines past what the fleet store holds (Holding.NextSeq) are copied, in transactions of at most
//     MaxLines lines and MaxBytes bytes (Ingest). A transaction commits whole or not at all, and the fleet
//     store accepts one only where its session's log ends: a rerun after a kill finds where the last
//     committed one ended, so nothing is lost, duplicated or half-written.
//   - What is appended continues the fleet store's copy by content: before anything is appended to a
//     session (or it is called unchanged), the host's lines below the copy's end are compared with digests
//     of the stored lines, once per change of either side (a proof kept by revision and artifact). A copy
//     that differs — another copy of this host's store synced under the same host name — is refused, naming
//     the first differing seq, and recorded in the fleet store as diverged.
//   - A session belongs to the host that first synced it. The same id from another host is refused and
//     reported, never merged or overwritten — unless that host's copy is identical to the fleet store's,
//     which is nothing to do. A session its host released (sync --release) is no longer followed.
//   - A format v4 session (session.v4.jsonl[.zstd] of a JSONL store: harness 0.2.x) is carried as v4: its
//     physical header line and rows, byte for byte, the rows being those the v4 restore accepts, with the
//     same content proof. A followed session is read from where its last read ended, the appended rows
//     checked from the restore's state there; otherwise the file is restored whole, the rows already
//     copied proven by the cursor's digest. One synced as v0 whose harness upgraded it
//     since is carried as its new generation when its v4 log holds every event of the v0 copy (compared
//     on what the migration keeps: type, time, turn, step, call id), the v0 copy kept in the fleet store
//     (kind superseded); else it is marked stale, with the reason, and the fleet store refuses it.
//   - Sessions of generations v2 and v3 (and v4 in a SQLite store) are skipped: the fleet store keeps v0
//     and v4 logs only. One synced before its harness upgraded it so is marked stale.
package fleetsync

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/postgres"
)

// Fleet is the destination: the fleet store's sync API (*postgres.Backend).
type Fleet interface {
	Held(ctx context.Context, id string) (postgres.Holding, error)
	IngestRevision(ctx context.Context, host, id string, header []byte, from int64, lines [][]byte) (int64, error)
	Digests(ctx context.Context, id string) (revision int64, exists bool, digests []postgres.LineDigest, err error)
	StoredLine(ctx context.Context, id string, seq int64) ([]byte, error)
	NoteSync(ctx context.Context, host, id, state, reason string) error
	// ReadRaw is the stored log as JSONL text, header line first; Supersede replaces a v0 log by its v4
	// successor (postgres.Backend.Supersede)
	ReadRaw(ctx context.Context, id string) ([]byte, error)
	Supersede(ctx context.Context, host, id string, rev int64, header []byte, lines [][]byte) (int64, error)
	Release(ctx context.Context, host, id string) error
	Touch(ctx context.Context, host string, fresh time.Duration) error
}

// loader is a fleet store that reads a session back (an eventstore.Backend): without one, another host's
// copy cannot be proven identical and is refused.
type loader interface {
	LoadStored(ctx context.Context, id string) (*eventstore.Prefix, error)
}

// Status is what one sync of one session did.
type Status string

// Statuses.
const (
	Copied    Status = "copied"    // lines were copied
	Unchanged Status = "unchanged" // the fleet store already held everything this host has
	Identical Status = "identical" // another host's session, whose copy here is identical: nothing to do
	Released  Status = "released"  // this host released it: no longer followed
	Refused   Status = "refused"   // another host's session of this id, or a copy that differs: left alone
	Skipped   Status = "skipped"   // this host's store refuses it, or it is of a later format generation
	Failed    Status = "failed"    // reading the source or writing the fleet store failed
)

// Report is one session's result.
type Report struct {
	ID     string
	Status Status
	Events int64 // events copied
	Lines  int   // stored lines copied
	Bytes  int64 // bytes of those lines
	// From and To are the seqs copied (To exclusive): To is what the fleet store holds after.
	From, To int64
	Reason   string // why refused, skipped or failed; for a copied one a note (a torn tail left behind)
	// busy: refused because a writer of the fleet store held the session; tried again by the next pass
	busy bool
	rev  string // the source revision this report is of
}

// Found reports whether the status is a finding (exit code 1): something was not copied that exists.
func (r Report) Found() bool { return r.Status == Refused || r.Status == Skipped }

// Options configure a Syncer.
type Options struct {
	Host     string // this host's name, recorded on every session it syncs
	MaxLines int    // lines of one transaction (0: 1000)
	MaxBytes int64  // bytes of one transaction (0: 4 MiB); a single larger line goes alone
	// Progress is called after each session of a pass with the sessions done, the total, and the events
	// and bytes copied so far in the pass.
	Progress func(done, total int, events, bytes int64)
}

// Syncer syncs one source store into one fleet store. It remembers what it last saw of each session,
// so that a pass (Watch) reads only the sessions that changed since.
type Syncer struct {
	src  *eventstore.Store
	dst  Fleet
	opts Options
	read lineReader

	mu      sync.Mutex
	entries map[string]eventstore.Entry // the last listing, by id
	seen    map[string]string           // id → the source revision whose sync completed
	cursors map[string]*cursor          // where the last clean read of a JSONL artifact ended
	// follow: Watch runs, so a v4 cursor keeps its log's restore state (keepV4), v4Kept bytes of it in all
	follow bool
	v4Kept int64
	// proofs is, by id, the fleet store's revision at which its copy of the session was last proven, line
	// by line, to be a prefix of this host's log (or written by this syncer onto such a prefix): while the
	// fleet store keeps that revision and this host's artifact has only grown, nothing needs comparing
	proofs map[string]proof
	// prefetched is what the fleet store held of every session at the start of the running pass (one
	// query, where the store can): each is used once, by that session's sync, whose ingest re-checks it
	prefetched map[string]postgres.Holding
}

// heldAll is a fleet store that reads every session's holding at once (postgres.Backend).
type heldAll interface {
	HeldAll(ctx context.Context) (map[string]postgres.Holding, error)
}

// refreshAfter is how old a session's sync_seen may grow before a sync that has nothing to copy for it
// refreshes it anyway: a session stays held (not writable through the fleet store) while its host's
// sync runs, and becomes writable [fleet] release_after (10 minutes by default) after the last run.
const refreshAfter = time.Minute

// New returns a Syncer from src to dst.
func New(src *eventstore.Store, dst Fleet, opts Options) *Syncer {
	if opts.MaxLines <= 0 {
		opts.MaxLines = 1000
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 4 << 20
	}
	var rd lineReader = rowReader{b: src.Backend(), t: src.Tuning}
	if b, ok := src.Backend().(artifactOpener); ok {
		rd = fileReader{b: b}
	}
	return &Syncer{src: src, dst: dst, opts: opts, read: rd, entries: map[string]eventstore.Entry{}, seen: map[string]string{},
		cursors: map[string]*cursor{}, proofs: map[string]proof{}}
}

// Pass syncs every session of the source. With changedOnly, a session whose source revision is the one
// a previous complete sync saw is not read again. The reports are in id order; root errors of the source
// are reported as skipped.
func (s *Syncer) Pass(ctx context.Context, changedOnly bool) ([]Report, error) {
	l, err := s.src.List(ctx)
	if err != nil {
		return nil, err
	}
	entries := append([]eventstore.Entry(nil), l.Entries...)
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].ID < entries[j].ID })
	var pre map[string]postgres.Holding
	if ha, ok := s.dst.(heldAll); ok {
		pre, _ = ha.HeldAll(ctx) // on an error each session asks for itself
	}
	s.mu.Lock()
	s.entries = make(map[string]eventstore.Entry, len(entries))
	for _, e := range entries {
		s.entries[e.ID] = e
	}
	s.prefetched = pre
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.prefetched = nil
		s.mu.Unlock()
	}()
	var reports []Report
	var events, bytes int64
	for i, e := range entries {
		if err := ctx.Err(); err != nil {
			return reports, err
		}
		if changedOnly && s.unchangedSince(e.ID, e.Revision) {
			continue
		}
		r := s.one(ctx, e)
		events += r.Events
		bytes += r.Bytes
		reports = append(reports, r)
		if s.opts.Progress != nil {
			s.opts.Progress(i+1, len(entries), events, bytes)
		}
		if err := ctx.Err(); err != nil {
			return reports, err
		}
	}
	// nothing new in a session is no reason to let it go: this run is a sync of its host, so every session
	// it feeds stays held (one statement, not one per session)
	s.Refresh(ctx)
	for _, re := range l.RootErrors {
		reports = append(reports, Report{ID: re.Path, Status: Skipped, Reason: "root error: " + re.Message})
	}
	return reports, nil
}

// Session syncs one session of the last listing by id, when its source revision changed since its last
// complete sync; ok is false when there was nothing to do (or the id is not listed: a Pass finds it).
func (s *Syncer) Session(ctx context.Context, id string) (r Report, ok bool) {
	s.mu.Lock()
	e, listed := s.entries[id]
	s.mu.Unlock()
	if !listed {
		return Report{}, false
	}
	art, err := s.src.Backend().Stat(ctx, id, e.Path)
	if err != nil {
		return Report{}, false // gone or replaced: the next listing pass sees what became of it
	}
	if s.unchangedSince(id, art.Token) {
		return Report{}, false
	}
	e.Revision = art.Token
	return s.one(ctx, e), true
}

func (s *Syncer) listed(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.entries[id]
	return ok
}

func (s *Syncer) unchangedSince(id, rev string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return rev != "" && s.seen[id] == rev
}

func (s *Syncer) remember(id, rev string, r Report) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.Status {
	case Copied, Unchanged, Identical, Released, Refused, Skipped:
		// read in full and settled until the source changes; a failure, or a writer holding the session,
		// is tried again by the next pass
		if r.busy {
			delete(s.seen, id)
			return
		}
		s.seen[id] = rev
	default:
		delete(s.seen, id)
	}
}

// Refresh tells the fleet store that this host's sync still runs for every session it feeds whose
// sync_seen is older than a minute, so that none becomes writable there while the sync runs (Watch
// calls it every minute): one statement for all of them. A session released meanwhile is left released.
func (s *Syncer) Refresh(ctx context.Context) {
	s.dst.Touch(ctx, s.opts.Host, refreshAfter)
}

// Release marks a session this host synced as released: the fleet store's writers may take it over, and
// this host's sync no longer follows it.
func (s *Syncer) Release(ctx context.Context, id string) error {
	return s.dst.Release(ctx, s.opts.Host, id)
}

func (s *Syncer) one(ctx context.Context, e eventstore.Entry) Report {
	r := s.sync(ctx, e)
	r.rev = e.Revision
	if ctx.Err() == nil {
		s.remember(e.ID, e.Revision, r)
	}
	return r
}

// held is what the fleet store holds of session id: the running pass's prefetched answer when it has one
// (a session it did not hold then is asked again: another host may have created it since).
func (s *Syncer) held(ctx context.Context, id string) (postgres.Holding, error) {
	s.mu.Lock()
	h, ok := s.prefetched[id]
	delete(s.prefetched, id)
	s.mu.Unlock()
	if ok {
		return h, nil
	}
	return s.dst.Held(ctx, id)
}
