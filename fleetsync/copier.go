package fleetsync

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/postgres"
)

// The copier that ingests a session's lines past what the fleet store holds, a bounded transaction at a
// time, after proving by content that the fleet store's copy is a prefix of this host's log; and how a
// log that differs is named and recorded.

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
