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
//   - Sessions of a later format generation (v2, v3, v4) are skipped: their files hold the harness's later
//     codec, not the v0 lines the fleet store keeps. One synced before its harness upgraded it is marked
//     stale in the fleet store, which then refuses it.
package fleetsync

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
	"github.com/dshfs/dshfs/eventstore/postgres"
)

// Fleet is the destination: the fleet store's sync API (*postgres.Backend).
type Fleet interface {
	Held(ctx context.Context, id string) (postgres.Holding, error)
	IngestRevision(ctx context.Context, host, id string, header []byte, from int64, lines [][]byte) (int64, error)
	Digests(ctx context.Context, id string) (revision int64, exists bool, digests []postgres.LineDigest, err error)
	StoredLine(ctx context.Context, id string, seq int64) ([]byte, error)
	NoteSync(ctx context.Context, host, id, state, reason string) error
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

// sync copies one session's lines past what the fleet store holds.
func (s *Syncer) sync(ctx context.Context, e eventstore.Entry) Report {
	r := Report{ID: e.ID}
	if e.Refusal != nil {
		r.Status, r.Reason = Skipped, "refused by this host's store: "+e.Refusal.Error()
		return r
	}
	held, err := s.held(ctx, e.ID)
	if err != nil {
		r.Status, r.Reason = Failed, "the fleet store cannot be read: "+err.Error()
		return r
	}
	if e.Generation != 0 {
		later := "session artifact " + stringify(e.Path) + " is format generation v" + strconv.Itoa(e.Generation) +
			", written by " + generation.WrittenBy(e.Generation)
		r.Status, r.Reason = Skipped, later+"; the fleet store keeps generation v0 logs only"
		if held.Exists && held.Host == s.opts.Host {
			// synced before the harness upgraded it: the copy there is no longer the session's log
			if err := s.dst.NoteSync(ctx, s.opts.Host, e.ID, postgres.Stale, later); err != nil {
				r.Status, r.Reason = Failed, "the fleet store's copy (the log before the upgrade) cannot be marked stale: "+err.Error()
				return r
			}
			r.Reason += "; its copy there (the log before the upgrade) is marked stale"
		}
		return r
	}
	if held.Exists && held.Host != s.opts.Host {
		return s.foreign(ctx, e, held)
	}
	r.From, r.To = held.NextSeq, held.NextSeq
	// Where the last read of this artifact ended is where this one starts, as long as the fleet store
	// holds exactly what that read found: anything else (another writer, a rerun after a failure) reads
	// the artifact from its start.
	s.mu.Lock()
	from := s.cursors[e.ID]
	delete(s.cursors, e.ID)
	pf, hasProof := s.proofs[e.ID]
	delete(s.proofs, e.ID)
	s.mu.Unlock()
	if from != nil && !(held.Exists && held.SyncHost == s.opts.Host && held.NextSeq == from.next && bytes.Equal(held.Header, from.header)) {
		from = nil
	}
	if from != nil && !s.read.resumes(ctx, e, from) {
		from = nil // the artifact was replaced or cut back since: what it holds now is read whole
	}
	// What is appended must continue the stored log by content: the fleet store's copy is compared, line
	// by line, with this host's log, unless it is still the copy this syncer proved (same revision) and
	// this host's artifact has only grown since (a cursor). A released session copies nothing.
	proven := !held.Exists || held.NextSeq == 0 || held.SyncHost == "" ||
		(hasProof && pf.rev == held.Revision && pf.next == held.NextSeq && from != nil)
	var digests []postgres.LineDigest
	if !proven {
		rev, exists, ds, err := s.dst.Digests(ctx, e.ID)
		if err != nil {
			r.Status, r.Reason = Failed, "the fleet store cannot be read: "+err.Error()
			return r
		}
		if !exists || rev != held.Revision {
			r.Status, r.Reason = Failed, "the fleet store's copy changed while it was read; tried again by the next pass"
			return r
		}
		digests, from = ds, nil // this host's log is read from its start to compare the overlap
	}
	c := copier{ctx: ctx, s: s, id: e.ID, held: held, r: &r, digests: digests, compare: !proven, rev: held.Revision,
		resumed: proven && from != nil && held.Exists && held.SyncHost != "" && held.NextSeq > 0}
	if from != nil {
		c.end = from.next
	}
	var known knownLine
	if c.compare {
		known = c.known
	}
	res, err := s.read.read(ctx, e, from, known, c.header, c.line)
	torn := res.torn
	if err == nil {
		err = c.flush(ctx, true)
	}
	var ce *corruptError
	switch {
	case c.refusal != "":
		r.Status, r.Reason = Refused, c.refusal
		return s.noteDiverged(ctx, e.ID, c.diverged, r)
	case errors.As(err, &ce):
		r.Status, r.Reason = Skipped, "refused by this host's store: "+ce.msg
		if r.Lines > 0 {
			r.Reason += fmt.Sprintf(" (%d lines before the damage were copied)", r.Lines)
		}
		return r
	case err != nil && c.dstErr:
		r.Status, r.Reason, r.busy = refusedOrFailed(err)
		return r
	case err != nil:
		if eventstore.Classify(err) == eventstore.KindIO || ctx.Err() != nil {
			r.Status, r.Reason = Failed, "this host's store cannot be read: "+err.Error()
		} else {
			r.Status, r.Reason = Skipped, "refused by this host's store: "+err.Error()
		}
		return r
	}
	if c.end < held.NextSeq {
		r.Status, r.Reason = Refused, fmt.Sprintf("the fleet store holds %d events of this session, this host's store %d: from seq %d on, the copy there is not this host's log; nothing copied, not merged", held.NextSeq, c.end, c.end)
		return s.noteDiverged(ctx, e.ID, held.SyncHost != "", r)
	}
	if held.Exists && held.SyncHost == "" && c.end > held.NextSeq {
		r.Status, r.Reason = Refused, fmt.Sprintf("released: this host's store holds %d more events, which are not copied (the session is written through the fleet store now)", c.end-held.NextSeq)
		return r
	}
	switch {
	case held.Exists && held.SyncHost == "":
		r.Status = Released
	case r.Lines > 0 || !held.Exists:
		r.Status = Copied
	default:
		r.Status = Unchanged // still held: the pass ends with one Refresh of every session this host feeds
	}
	s.mu.Lock()
	if r.Status != Released && res.at != nil && res.at.next <= r.To {
		s.cursors[e.ID] = res.at
	}
	if r.Status != Released {
		s.proofs[e.ID] = proof{rev: c.rev, next: r.To}
	}
	s.mu.Unlock()
	if torn > 0 && r.Status == Copied {
		r.Reason = fmt.Sprintf("%d bytes after the last complete line were left behind (torn or still being written)", torn)
	}
	return r
}

// refusedOrFailed classifies a write the fleet store refused; busy when a writer there held the session.
func refusedOrFailed(err error) (Status, string, bool) {
	var hc *postgres.HostConflictError
	var rel *postgres.ReleasedError
	if errors.As(err, &hc) || errors.As(err, &rel) {
		return Refused, err.Error(), false
	}
	var ce *eventstore.CommandError
	if errors.As(err, &ce) && ce.Failure == eventstore.Busy {
		return Refused, "the fleet store refused the write: " + err.Error(), true
	}
	// what the fleet store cannot hold stays so until the session changes: skipped, not tried on every pass
	var us *postgres.UnstorableError
	var le *postgres.LineError
	if errors.As(err, &us) || errors.As(err, &le) {
		return Skipped, "the fleet store cannot hold it: " + err.Error(), false
	}
	return Failed, "the fleet store refused the write: " + err.Error(), false
}

// copier takes a session's lines as the reader produces them and ingests those past what the fleet store
// holds, a bounded transaction at a time.
type copier struct {
	ctx     context.Context
	s       *Syncer
	id      string
	held    postgres.Holding
	r       *Report
	hdr     []byte
	batch   [][]byte
	bytes   int64
	events  int64
	from    int64 // seq of the batch's first line
	end     int64 // the seq after the last committed line read
	created bool  // the session row exists (held, or created by this copy)
	refusal string
	dstErr  bool // the error came from the fleet store
	// compare: the fleet store's copy is not proven a prefix of this host's log; each line this host's
	// log holds below held.NextSeq must equal the stored line digests[di] before anything is appended
	compare bool
	// resumed: proven by the cursor alone, so the read must start past what the fleet store holds; a line
	// below it means the artifact was replaced between the check and the read
	resumed  bool
	diverged bool // the refusal is a log that differs from the fleet store's copy
	digests  []postgres.LineDigest
	di       int
	rev      int64 // the fleet store's revision of the session: as held, then as this copy's writes left it
}

// proof is what a Syncer knows of a session's copy in the fleet store: at revision rev it held this host's
// log up to seq next (exclusive), proven line by line or written by the syncer onto such a prefix.
type proof struct {
	rev, next int64
}

func (c *copier) header(h []byte) error {
	c.hdr = h
	c.created = c.held.Exists
	if c.held.Exists && !bytes.Equal(c.held.Header, h) {
		c.refusal = "the fleet store holds a session of this id with another header: " + string(c.held.Header)
		return errStop
	}
	if c.held.Exists && c.held.SyncHost == "" {
		// released: read on to count what would be left behind, copy nothing
		return nil
	}
	c.from = c.held.NextSeq
	return nil
}

func (c *copier) line(l line) error {
	c.end = l.last + 1
	switch {
	case l.last < c.held.NextSeq:
		if c.resumed {
			return &eventstore.IOError{Err: errors.New("the session's artifact was replaced while it was read; it is compared again by the next pass")}
		}
		if c.compare && !l.proven {
			if why := c.same(l); why != "" {
				c.refusal = why
				return errStop
			}
		}
		return nil // held already
	case l.first < c.held.NextSeq:
		c.refusal = fmt.Sprintf("the fleet store's copy ends at seq %d, inside this host's stored line of seqs %d..%d: the copy there is not this host's log", c.held.NextSeq, l.first, l.last)
		return errStop
	case c.held.Exists && c.held.SyncHost == "":
		return nil // released
	}
	if len(c.batch) > 0 && (len(c.batch) >= c.s.opts.MaxLines || c.bytes+int64(len(l.raw)) > c.s.opts.MaxBytes) {
		if err := c.flush(c.ctx, false); err != nil {
			return err
		}
	}
	c.batch = append(c.batch, l.raw)
	c.bytes += int64(len(l.raw))
	c.events += int64(l.events)
	return nil
}

// flush ingests the batch as one transaction; final also creates a session that has no line to copy.
func (c *copier) flush(ctx context.Context, final bool) error {
	if c.refusal != "" || c.hdr == nil {
		return nil
	}
	if len(c.batch) == 0 && (!final || c.created) {
		return nil
	}
	rev, err := c.s.dst.IngestRevision(ctx, c.s.opts.Host, c.id, c.hdr, c.from, c.batch)
	if err != nil {
		c.dstErr = true
		return err
	}
	c.rev = rev
	c.created = true
	c.r.Lines += len(c.batch)
	c.r.Bytes += c.bytes
	c.r.Events += c.events
	c.from += c.events
	c.r.To = c.from
	c.batch, c.bytes, c.events = c.batch[:0], 0, 0
	return nil
}

// known is the reader's knownLine while the fleet store's copy is compared: the next stored line, when
// this host's line at seq next is byte for byte that line (it is then not decoded, and not compared again).
func (c *copier) known(raw []byte, next int64) (int64, bool) {
	if c.di >= len(c.digests) {
		return 0, false
	}
	d := c.digests[c.di]
	if d.Seq != next || d.Sum != sha256.Sum256(raw) {
		return 0, false
	}
	c.di++
	return d.LastSeq, true
}

// same checks one of this host's lines below what the fleet store holds against the stored line it must
// equal, and says how they differ ("" when equal): the first seq whose event differs, so that a copy of
// this host's store from elsewhere (a clone, a restored backup) synced under the same host name, or a
// write through the fleet store, is never continued with this host's lines.
func (c *copier) same(l line) string {
	if c.di < len(c.digests) {
		d := c.digests[c.di]
		c.di++
		if d.Seq == l.first && d.LastSeq == l.last && d.Sum == sha256.Sum256(l.raw) {
			return ""
		}
		c.diverged = true
		if d.Seq == l.first {
			if theirs, err := c.s.dst.StoredLine(c.ctx, c.id, d.Seq); err == nil {
				return differsAt(firstDiffering(l, theirs))
			}
		}
	}
	c.diverged = true
	return differsAt(l.first)
}

// noteDiverged records in the fleet store that this host's sync holds another log of the session (when
// diverged), so that its listing and status.json show it; r is the report, failed when that cannot be
// recorded (the next pass tries again).
func (s *Syncer) noteDiverged(ctx context.Context, id string, diverged bool, r Report) Report {
	if !diverged {
		return r
	}
	if err := s.dst.NoteSync(ctx, s.opts.Host, id, postgres.Diverged, r.Reason); err != nil {
		r.Status, r.Reason = Failed, r.Reason+"; this cannot be recorded in the fleet store: "+err.Error()
	}
	return r
}

func differsAt(seq int64) string {
	return fmt.Sprintf("this host's log differs from the fleet store's copy at seq %d: the copy there came from another copy of this host's store (a clone, a restored backup) or was written through the fleet store; nothing copied, not merged", seq)
}

// firstDiffering is the first seq at which the events of this host's line l and the stored line theirs
// (both starting at l.first) differ: l.first when either does not decode.
func firstDiffering(l line, theirs []byte) int64 {
	decode := func(raw []byte) []event.Event {
		canon, err := event.Canonical(raw)
		if err != nil {
			return nil
		}
		evs, _, err := event.DecodeStored(canon)
		if err != nil {
			return nil
		}
		return evs
	}
	mine, other := decode(l.raw), decode(theirs)
	for i := range min(len(mine), len(other)) {
		if !bytes.Equal(mine[i].Raw, other[i].Raw) {
			return l.first + int64(i)
		}
	}
	return l.first + int64(min(len(mine), len(other)))
}

// foreign handles a session the fleet store holds from another host: identical copies are nothing to do,
// anything else is refused.
func (s *Syncer) foreign(ctx context.Context, e eventstore.Entry, held postgres.Holding) Report {
	r := Report{ID: e.ID, From: held.NextSeq, To: held.NextSeq}
	refuse := func(why string) Report {
		r.Status = Refused
		r.Reason = "the fleet store holds this session from host " + stringify(held.Host) + "; " + why + ": not merged, not overwritten"
		return r
	}
	// the whole stored log of both sides, read as each backend reads it
	mine, err := s.src.Backend().LoadStored(ctx, e.ID)
	if err != nil {
		return refuse("this host's copy cannot be read (" + err.Error() + ")")
	}
	ld, ok := s.dst.(loader)
	if !ok {
		return refuse("this fleet store cannot read the session back to compare it")
	}
	theirs, err := ld.LoadStored(ctx, e.ID)
	if err != nil {
		r.Status, r.Reason = Failed, "the fleet store cannot be read: "+err.Error()
		return r
	}
	if !bytes.Equal(mine.Header.WithDepth().Meta(), theirs.Header.WithDepth().Meta()) {
		return refuse("this host's header differs")
	}
	if len(mine.Events) != len(theirs.Events) {
		return refuse(fmt.Sprintf("this host's copy holds %d events, the fleet store's %d", len(mine.Events), len(theirs.Events)))
	}
	for i := range mine.Events {
		if !bytes.Equal(mine.Events[i].Raw, theirs.Events[i].Raw) {
			return refuse("the event at seq " + strconv.Itoa(i) + " differs")
		}
	}
	r.Status, r.Reason = Identical, "held from host "+stringify(held.Host)+"; this host's copy is identical"
	return r
}
