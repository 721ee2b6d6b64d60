package fleetsync

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/generation"
	"github.com/dshfs/dshfs/eventstore/postgres"
)

// One session's sync: where the fleet store's copy stands, what is copied past it, how the fleet store's
// refusals are reported, and a session the fleet store holds from another host.

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
	read := s.read
	if ob, ok := s.src.Backend().(artifactOpener); ok && e.Generation == 4 {
		if held.Exists && held.Host == s.opts.Host && held.Generation == 0 {
			return s.upgrade(ctx, e, held, ob)
		}
		read = v4Reader{b: ob, workers: s.src.Tuning.N()}
	} else if e.Generation != 0 {
		later := "session artifact " + stringify(e.Path) + " is format generation v" + strconv.Itoa(e.Generation) +
			", written by " + generation.WrittenBy(e.Generation)
		r.Status, r.Reason = Skipped, later+"; the fleet store keeps generation v0 and v4 logs of JSONL stores only"
		if held.Exists && held.Host == s.opts.Host && held.Generation == 0 {
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
	if from != nil && from.v4 != nil && from.v4.events != nil {
		s.v4Kept -= from.v4.bytes
	}
	pf, hasProof := s.proofs[e.ID]
	delete(s.proofs, e.ID)
	s.mu.Unlock()
	if from != nil && !(held.Exists && held.SyncHost == s.opts.Host && held.NextSeq == from.next && bytes.Equal(held.Header, from.header)) {
		from = nil
	}
	if from != nil && !read.resumes(ctx, e, from) {
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
	res, err := read.read(ctx, e, from, known, c.header, c.line)
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
		s.keepV4(res.at)
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

// keepV4 decides whether a v4 cursor keeps the restore's state (mu held): only while the syncer follows
// the store (a one-shot sync reads each session once) and within v4KeepBytes over every session; without
// it, the next read of the session restores its whole file and proves the rows copied by the digest.
func (s *Syncer) keepV4(at *cursor) {
	st := at.v4
	if st == nil || st.events == nil {
		return
	}
	if !s.follow || s.v4Kept+st.bytes > v4KeepBytes {
		st.events, st.checker = nil, nil
		return
	}
	s.v4Kept += st.bytes
}
