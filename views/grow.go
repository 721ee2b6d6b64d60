package views

import (
	"io"

	"github.com/dshfs/dshfs/surface"
)

// Incremental views of a live session (issue: the write path at scale). A live engine's event list only
// grows, so a later snapshot of the same engine holds an earlier one's events as its prefix. The views
// that are lists of the log's lines in log order then grow by appends alone: events.jsonl always (one line
// per event), surface.jsonl and messages.jsonl while the new events only append to the surface. Extend
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

// Growable reports whether view can grow by appends as a live session's events are accepted (Extend may
// continue it): events.jsonl, surface.jsonl, messages.jsonl.
func Growable(view View) bool {
	return view == Events || view == Surface || view == Messages
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
	if !Growable(view) || s.Lineage == nil || s.Refusal != nil || s.surfaceEvents != nil || s.Generation != 0 {
		return Reach{}, false
	}
	return Reach{lineage: s.Lineage, events: len(s.Events)}, true
}

// Extend writes to w what view gains from the rendering that reached from to this snapshot, and returns
// where it reaches now. ok is false, with nothing written, when the bytes cannot be had by appending: the
// snapshot is of another engine or older than from, or — for surface.jsonl and messages.jsonl — an event
// since then replaces part of the surface (a compaction's checkpoint, a prune rewrites lines already
// rendered), or a message cannot be derived (a whole rendering then reports why). The caller then renders
// the view whole. It reads only the events after from.
func (s *Session) Extend(w io.Writer, view View, from Reach) (next Reach, ok bool, err error) {
	next, ok = s.Reach(view)
	if !ok || from.lineage != s.Lineage || from.events > len(s.Events) {
		return Reach{}, false, nil
	}
	added := s.Events[from.events:]
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
		return Reach{}, false, nil
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
