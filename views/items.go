package views

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/spill"
)

// A session's per-item directories (events/, surface/, shadowed/, trace/, turns/, compactions/, spill/)
// list what a snapshot holds. Which entries they hold and what each one serves are projection rules, so
// they live here beside the views they name: the mount maps the items to inodes and nothing more.

// Dir names a per-item directory of a session.
type Dir string

// The per-item directories, by their names in a session's directory.
const (
	DirEvents      Dir = "events"
	DirSurface     Dir = "surface"
	DirShadowed    Dir = "shadowed"
	DirTrace       Dir = "trace"
	DirTurns       Dir = "turns"
	DirCompactions Dir = "compactions"
	DirSpill       Dir = "spill"
)

// Dirs are the per-item directories of a readable session.
var Dirs = []Dir{DirEvents, DirSurface, DirShadowed, DirTrace, DirTurns, DirCompactions, DirSpill}

// Addressable reports whether Find answers for d without listing it: events/ can hold a million entries,
// and trace/ answers seqs it does not list.
func (d Dir) Addressable() bool { return d == DirEvents || d == DirTrace }

// Source says where an item's bytes come from.
type Source int

const (
	// FromView is Item.View of the session, cached by revision like any view.
	FromView Source = iota
	// FromCompaction is one record of the compactions view (Session.CompactionRecord of Item.ID).
	FromCompaction
	// FromSpillIndex is the spill index, re-resolved at every read (Session.SpillIndex): presence is a
	// property of files outside the store.
	FromSpillIndex
	// FromSpilled is a spilled tool result outside the store, at Item.Path, re-checked at every open.
	FromSpilled
)

// Item is one entry of a per-item directory.
type Item struct {
	Name string // the file name
	// Key names the item inside its directory for its inode number: the name, but trace/'s seq (the trace
	// of a seq is the same file whatever the name looked up)
	Key    string
	Source Source
	View   View   // FromView: the view served
	ID     string // FromCompaction: the compactionId
	Path   string // FromSpilled: the locator's path
}

// Items lists a per-item directory of this snapshot (unsorted: the mount sorts Readdir). The session
// must not be refused.
func (s *Session) Items(d Dir) ([]Item, error) {
	switch d {
	case DirEvents:
		l := s.current()
		out := make([]Item, len(l.events))
		for i, e := range l.events { // names need types only: packed rows stay packed
			out[i] = eventItem(EventName(int64(i), e.Type), int64(i))
		}
		return out, nil
	case DirSurface:
		fold, err := s.Fold()
		if err != nil {
			return nil, err
		}
		out := make([]Item, len(fold.Nodes))
		for pos, seq := range fold.Nodes {
			out[pos] = eventItem(fmt.Sprintf("%010d-%s", pos, EventName(seq, s.current().events[seq].Type)), seq)
		}
		return out, nil
	case DirShadowed:
		evs, err := s.Shadowed()
		if err != nil {
			return nil, err
		}
		out := make([]Item, len(evs))
		for i, e := range evs {
			out[i] = eventItem(EventName(e.Seq, e.Type), e.Seq)
		}
		return out, nil
	case DirTrace:
		tr, err := s.Tracer()
		if err != nil {
			return nil, err
		}
		var out []Item
		for _, seq := range tr.Seqs() {
			out = append(out, traceItem(seq))
		}
		return out, nil
	case DirTurns:
		return s.turnItems(), nil
	case DirCompactions:
		recs, _, err := s.Compactions()
		if err != nil {
			return nil, err
		}
		out := []Item{{Name: "prunes.jsonl", Key: "prunes.jsonl", Source: FromView, View: Prunes}}
		for i := range recs {
			name := spill.NameSegment(recs[i].CompactionID) + ".json"
			out = append(out, Item{Name: name, Key: name, Source: FromCompaction, ID: recs[i].CompactionID})
		}
		return out, nil
	case DirSpill:
		rows, err := s.SpillRows()
		if err != nil {
			return nil, err
		}
		out := []Item{{Name: "index.json", Key: "index.json", Source: FromSpillIndex}}
		for _, r := range rows {
			if r.Status != spill.Present || r.File == "" {
				continue
			}
			name := strings.TrimPrefix(r.File, "spill/")
			out = append(out, Item{Name: name, Key: name, Source: FromSpilled, Path: r.Locator})
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: directory %q", ErrUnknownView, string(d))
}

// turnItems lists turns/: a file per turn number, holding the first turn of that number, as turn:N does
// (eventstore.TurnEvents); a turn whose number cannot be named is in no file.
func (s *Session) turnItems() []Item {
	seen := map[int64]bool{}
	var out []Item
	var turns []eventstore.Turn
	if !s.withTurns(func(ts *eventstore.TurnScan) { turns = ts.Turns() }) {
		turns = eventstore.Turns(s.Events())
	}
	for _, turn := range turns {
		if turn.N < 0 || seen[turn.N] {
			continue
		}
		seen[turn.N] = true
		name := fmt.Sprintf("%010d.jsonl", turn.N)
		out = append(out, Item{Name: name, Key: name, Source: FromView, View: Turn(turn.N)})
	}
	return out
}

// Find is the item of an Addressable directory named name, without listing it; ok is false when there
// is none. For every other directory it searches the listing.
func (s *Session) Find(d Dir, name string) (Item, bool, error) {
	switch d {
	case DirEvents:
		seq, ok := parseSeqName(name)
		if l := s.current(); !ok || seq >= int64(len(l.events)) || EventName(seq, l.events[seq].Type) != name {
			return Item{}, false, nil
		}
		return eventItem(name, seq), true, nil
	case DirTrace:
		// Lookup accepts the trace of any seq of the log, listed or not (docs/tree.md)
		seq, ok := parseSeqName(name)
		if !ok || name != fmt.Sprintf("%010d.json", seq) || seq >= int64(s.EventCount()) {
			return Item{}, false, nil
		}
		return traceItem(seq), true, nil
	}
	items, err := s.Items(d)
	if err != nil {
		return Item{}, false, err
	}
	for _, it := range items {
		if it.Name == name {
			return it, true, nil
		}
	}
	return Item{}, false, nil
}

func eventItem(name string, seq int64) Item {
	return Item{Name: name, Key: name, Source: FromView, View: Event(seq)}
}

func traceItem(seq int64) Item {
	return Item{Name: fmt.Sprintf("%010d.json", seq), Key: strconv.FormatInt(seq, 10), Source: FromView, View: Trace(seq)}
}

// EventName is a per-event file's name, `<seq10>.<type>.json` (the type encoded as a name segment).
func EventName(seq int64, typ string) string {
	return fmt.Sprintf("%010d.%s.json", seq, spill.NameSegment(typ))
}

// parseSeqName reads the leading 10-digit number of a per-item file name.
func parseSeqName(name string) (int64, bool) {
	if len(name) < 11 {
		return 0, false
	}
	n, err := strconv.ParseInt(name[:10], 10, 64)
	return n, err == nil && n >= 0
}

// CompactionRecord is compactions/<id>.json: the record of compaction cid in this snapshot, one JSON line;
// ErrNotFound when the snapshot has none.
func (s *Session) CompactionRecord(cid string) ([]byte, error) {
	recs, _, err := s.Compactions()
	if err != nil {
		return nil, err
	}
	for _, rec := range recs {
		if rec.CompactionID == cid {
			return append(rec.JSON(), '\n'), nil
		}
	}
	return nil, fmt.Errorf("%w: compaction %q is gone", ErrNotFound, cid)
}

// SpillIndex is spill/index.json, its locators resolved now, and its time: the session's, since what
// changes it outside the store (a spilled file appearing or going) has no time of its own in the data.
func (s *Session) SpillIndex() ([]byte, time.Time, error) {
	rows, err := s.SpillRows()
	if err != nil {
		return nil, time.Time{}, err
	}
	return spill.IndexJSON(rows), s.ModTime(), nil
}
