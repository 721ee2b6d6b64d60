package storetest

import (
	"bytes"
	"slices"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
)

// ProgressRecorder is an eventstore.ProgressSink that keeps a copy of every report of a progressive
// load, for Check.
type ProgressRecorder struct {
	Head    *event.Header   // the reported header
	Path    string          // and path
	Reports [][]event.Event // each reported list, copied when reported
	Rows    [][]uint64      // the row words each report says are final (those below its length / 64)
	early   bool            // events were reported before the header
}

var _ eventstore.ProgressSink = (*ProgressRecorder)(nil)

// Header is eventstore.ProgressSink.Header.
func (r *ProgressRecorder) Header(h event.Header, path string) { r.Head, r.Path = &h, path }

// Events is eventstore.ProgressSink.Events.
func (r *ProgressRecorder) Events(events []event.Event, rows []uint64) {
	r.early = r.early || r.Head == nil
	r.Reports = append(r.Reports, slices.Clone(events))
	r.Rows = append(r.Rows, slices.Clone(rows[:min(len(rows), len(events)/64)]))
}

// Check verifies the reports against the load's result p (nil: the load failed): the header first, then
// lists each a prefix of the next and of p's, with the row words they cover final.
func (r *ProgressRecorder) Check(t testing.TB, where string, p *eventstore.Prefix) {
	t.Helper()
	if r.early {
		t.Fatalf("%s: events reported before the header", where)
	}
	prefix := func(a, b []event.Event) bool {
		if len(a) > len(b) {
			return false
		}
		for i := range a {
			if a[i].Seq != b[i].Seq || a[i].Type != b[i].Type || !bytes.Equal(a[i].Raw, b[i].Raw) {
				return false
			}
		}
		return true
	}
	for i := 1; i < len(r.Reports); i++ {
		if !prefix(r.Reports[i-1], r.Reports[i]) {
			t.Fatalf("%s: report %d is not a prefix of report %d", where, i-1, i)
		}
	}
	if p == nil {
		return
	}
	if len(r.Reports) > 0 && (r.Head == nil || r.Head.ID != p.Header.ID || r.Path != p.Path) {
		t.Fatalf("%s: header reported as %v at %q, loaded %v at %q", where, r.Head, r.Path, p.Header, p.Path)
	}
	for i, rep := range r.Reports {
		if !prefix(rep, p.Events) {
			t.Fatalf("%s: report %d (%d events) is not a prefix of the %d loaded", where, i, len(rep), len(p.Events))
		}
		for w, word := range r.Rows[i] {
			final := uint64(0)
			if w < len(p.RowMembers) {
				final = p.RowMembers[w]
			}
			if word != final {
				t.Fatalf("%s: report %d has row word %d %x, the load %x", where, i, w, word, final)
			}
		}
	}
}
