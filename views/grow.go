package views

import (
	"io"
	"sync"

	"github.com/dshfs/dshfs/compaction"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/status"
	"github.com/dshfs/dshfs/surface"
)

// Incremental views of a live session (issue: the write path at scale). A live engine's event list only
// grows, so a later snapshot of the same engine holds an earlier one's events as its prefix. The views
// that are lists of the log's lines in log order then grow by appends alone: events.jsonl always (one line
// per event), a turn's file (its turn's events, while it is open), surface.jsonl and messages.jsonl while
// the new events only append to the surface. Extend
// writes just what an appended batch adds, so that following a large live session (`tail -f`) costs
// O(batch) rather than a rendering of the whole view per batch.

// Reach is how far a whole rendering of a view of a live session goes: the engine it came from and the
// events it covers. It is what Extend continues from.
type Reach struct {
	lineage any
	events  int
}

// Events is the number of events the rendering covers.
func (r Reach) Events() int { return r.events }

// Of reports whether the rendering that reached r was of s's lineage.
func (r Reach) Of(s *Session) bool { return s.Lineage != nil && r.lineage == s.Lineage }

// Growable reports whether view can grow by appends as a live session's events are accepted (Extend may
// continue it): events.jsonl, surface.jsonl, messages.jsonl and a turn's file.
func Growable(view View) bool {
	return view == Events || view == Surface || view == Messages || view.Kind == KindTurn
}

// GrowsByAppend reports whether an accepted event can only add bytes at the end of view, never change the
// bytes before: events.jsonl, a turn's file (only the open turn gains events) and a per-event file (which
// never changes). Surface and messages may be rewritten (a compaction, a prune) and are not among them.
func GrowsByAppend(view View) bool {
	return view == Events || view.Kind == KindTurn || view.Kind == KindEvent
}

// Reach is where a whole rendering of view of this snapshot ends, for a later Extend; ok is false when
// the view cannot be extended from it (not Growable, not a live engine's snapshot, refused, or a log
// whose surface the v0 projections read another way).
func (s *Session) Reach(view View) (Reach, bool) {
	if !Growable(view) || s.Lineage == nil || s.Refusal != nil || s.Generation != 0 {
		return Reach{}, false
	}
	return Reach{lineage: s.Lineage, events: len(s.Events())}, true
}

// Extend writes to w what view gains from the rendering that reached from to this snapshot, and returns
// where it reaches now. ok is false, with nothing written, when the bytes cannot be had by appending: the
// snapshot is of another engine or older than from, or — for surface.jsonl and messages.jsonl — an event
// since then replaces part of the surface (a compaction's checkpoint, a prune rewrites lines already
// rendered), or a message cannot be derived (a whole rendering then reports why). The caller then renders
// the view whole. It reads only the events after from.
func (s *Session) Extend(w io.Writer, view View, from Reach) (next Reach, ok bool, err error) {
	next, ok = s.Reach(view)
	if !ok || from.lineage != s.Lineage || from.events > len(s.Events()) {
		return Reach{}, false, nil
	}
	added := s.Events()[from.events:]
	var out [][]byte // the lines to add, decided before anything is written
	switch view {
	case Events:
		for _, e := range added {
			out = append(out, e.Raw)
		}
	case Surface, Messages:
		for _, e := range added {
			appends, replaces := surface.Appends(e)
			if replaces {
				return Reach{}, false, nil
			}
			if !appends {
				continue
			}
			line := e.Raw
			if view == Messages {
				if line, err = surface.Project(e); err != nil {
					return Reach{}, false, nil
				}
				if line == nil {
					continue // a node that derives no message (an assistant/message with empty content)
				}
			}
			out = append(out, line)
		}
	default:
		if view.Kind != KindTurn {
			return Reach{}, false, nil
		}
		// a turn's events are one contiguous run of the log, and a live log's seqs are its indexes: the
		// turn gains the events it holds past from (none once it has ended)
		var evs []event.Event
		found := false
		if !s.withTurns(func(ts *eventstore.TurnScan) { evs, found = ts.TurnEvents(s.Events(), view.N) }) || !found || len(evs) == 0 {
			return Reach{}, false, nil
		}
		lo := int(evs[0].Seq)
		if lo < 0 || lo > from.events || s.Events()[lo].Seq != evs[0].Seq {
			return Reach{}, false, nil // the turn began after the rendering (which then failed), or seqs are not indexes
		}
		for _, e := range evs[min(from.events-lo, len(evs)):] {
			out = append(out, e.Raw)
		}
	}
	if err := writeLines(w, out); err != nil {
		return Reach{}, true, err
	}
	return next, true, nil
}

// writeLines writes each line and its newline in one write.
func writeLines(w io.Writer, lines [][]byte) error {
	n := 0
	for _, l := range lines {
		n += len(l) + 1
	}
	if n == 0 {
		return nil
	}
	buf := make([]byte, 0, n)
	for _, l := range lines {
		buf = append(append(buf, l...), '\n')
	}
	if _, err := w.Write(buf); err != nil {
		return &WriteError{Err: err}
	}
	return nil
}

// carry is what status.json and turns/ read of a live session's events, carried from one snapshot of a
// lineage to the next (Continue), so that each batch costs a scan of the batch alone: the scan of the open
// turn and the unknown outcomes, the active compaction (which only a compaction marker, a resume's
// end-seed or a surface replacement can change), and the turn brackets. It moves forward only; a snapshot
// older than it scans whole.
type carry struct {
	mu     sync.Mutex
	scan   status.StatusScan
	turns  eventstore.TurnScan
	active event.Value // the active compaction at scan.Len() events; valid when activeOK
	// activeOK: active is the active compaction of the events scanned
	activeOK bool
	// scanned counts the events scanned and actives the active compactions looked up again (tests: each
	// event is scanned once along a lineage, and the records are read only after a batch that can change
	// them)
	scanned, actives int
}

// Continue makes s, a later snapshot of prev's lineage, carry on from what prev's renderings have scanned
// (status.json), instead of scanning its whole log again; nothing happens for snapshots of different
// lineages.
func (s *Session) Continue(prev *Session) {
	if prev == nil || s.Lineage == nil || prev.Lineage != s.Lineage || len(prev.Events()) > len(s.Events()) {
		return
	}
	s.carry = prev.carryOf()
}

// changesCompactions reports whether an event can change the compaction records: a marker, a resume's
// end-seed, or a surface replacement (which a record's shadowed range reads).
func changesCompactions(e event.Event) bool {
	switch e.Type {
	case compaction.TypeStart, compaction.TypeSummary, compaction.TypeEnd, "session/end-seed":
		return true
	}
	_, replaces := surface.Appends(e)
	return replaces
}

// statusScan fills in's scan and active compaction from the carry, scanning the events it has not yet;
// false (in untouched) when the snapshot cannot use it (no lineage, or older than the carry). The caller
// renders the status while holding the carry (unlock), since the scan's state moves with the next batch.
func (s *Session) statusScan(in *status.StatusInput) (unlock func(), ok bool) {
	if s.Lineage == nil || s.Refusal != nil {
		return nil, false
	}
	c := s.carryOf()
	c.mu.Lock()
	if c.scan.Len() > len(s.Events()) {
		c.mu.Unlock()
		return nil, false
	}
	added := s.Events()[c.scan.Len():]
	for _, e := range added {
		if changesCompactions(e) {
			c.activeOK = false
			break
		}
	}
	c.scan.Add(added)
	c.scanned += len(added)
	if !c.activeOK {
		c.active, c.activeOK = s.activeCompaction(), true
		c.actives++
	}
	in.Scan, in.ActiveCompaction = &c.scan, c.active
	return c.mu.Unlock, true
}

// carryOf is the session's carry, made on first use.
func (s *Session) carryOf() *carry {
	s.carryOnce.Do(func() {
		if s.carry == nil {
			s.carry = &carry{}
		}
	})
	return s.carry
}

// withTurns runs fn with the lineage's turn scan brought up to this snapshot's events; false (fn not run)
// when the snapshot cannot use it (no lineage, or older than the carry).
func (s *Session) withTurns(fn func(*eventstore.TurnScan)) bool {
	if s.Lineage == nil || s.Refusal != nil {
		return false
	}
	c := s.carryOf()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.turns.Len() > len(s.Events()) {
		return false
	}
	c.turns.Add(s.Events()[c.turns.Len():])
	fn(&c.turns)
	return true
}
