package jsonl

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/eventtest"
)

// TestProgressReportsRows: a zstd load of frames holding chunk rows, a piece per frame, reports a
// growing list at lengths that are not multiples of 64, each a prefix of the loaded one with the row
// words it covers final.
func TestProgressReportsRows(t *testing.T) {
	ctx := context.Background()
	_, st, _ := zstdSession(t, "rows")
	seq := 0
	for n := 1; n <= 40; n++ {
		var lines []string
		add := func(typ, data string) {
			lines = append(lines, fmt.Sprintf(`{"type":"%s","seq":%d,"time":1,"data":%s}`, typ, seq, data))
			seq++
		}
		add("turn/start", fmt.Sprintf(`{"turn":%d}`, n))
		add("step/start", fmt.Sprintf(`{"turn":%d,"step":1}`, n))
		for k := range 29 {
			add("assistant/chunk", fmt.Sprintf(`{"turn":%d,"step":1,"chunk":{"type":"text-delta","index":0,"text":"w%d "}}`, n, k))
		}
		add("step/end", fmt.Sprintf(`{"turn":%d,"step":1}`, n))
		add("turn/end", fmt.Sprintf(`{"turn":%d,"reason":{"kind":"completed"}}`, n))
		if err := st.Append(ctx, "rows", eventtest.Events(t, lines...)); err != nil {
			t.Fatal(err)
		}
	}
	b := st.Backend().(*Backend)
	defer func(old int64) { zstdPieceBytes = old }(zstdPieceBytes)
	zstdPieceBytes = 1
	rec := &recordingSink{}
	p, err := b.LoadStoredProgress(ctx, "rows", rec)
	if err != nil {
		t.Fatal(err)
	}
	rec.check(t, "rows", p)
	members := 0
	for _, w := range p.RowMembers {
		for ; w != 0; w &= w - 1 {
			members++
		}
	}
	unaligned := 0
	for _, r := range rec.reports {
		if len(r)%64 != 0 {
			unaligned++
		}
	}
	if len(p.Events) != seq || members < 40*29 || len(rec.reports) < 40 || unaligned < 30 {
		t.Fatalf("%d events (want %d), %d row members, %d reports (%d of unaligned length): the test proves little",
			len(p.Events), seq, members, len(rec.reports), unaligned)
	}
}

// recordingSink keeps a copy of every report of a progressive load.
type recordingSink struct {
	header  *event.Header
	path    string
	reports [][]event.Event
	rows    [][]uint64
}

func (r *recordingSink) Header(h event.Header, path string) { r.header, r.path = &h, path }

func (r *recordingSink) Events(events []event.Event, rows []uint64) {
	if r.header == nil {
		panic("events reported before the header")
	}
	r.reports = append(r.reports, slices.Clone(events))
	r.rows = append(r.rows, slices.Clone(rows[:min(len(rows), len(events)/64)])) // the final words
}

// check verifies the reports against the load's result p (nil: the load failed): the header first, then
// lists each a prefix of the next and of p's, with the row words they cover final.
func (r *recordingSink) check(t *testing.T, where string, p *eventstore.Prefix) {
	t.Helper()
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
	for i := 1; i < len(r.reports); i++ {
		if !prefix(r.reports[i-1], r.reports[i]) {
			t.Fatalf("%s: report %d is not a prefix of report %d", where, i-1, i)
		}
	}
	if p == nil {
		return
	}
	if len(r.reports) > 0 && (r.header == nil || r.header.ID != p.Header.ID || r.path != p.Path) {
		t.Fatalf("%s: header reported as %v at %q, loaded %v at %q", where, r.header, r.path, p.Header, p.Path)
	}
	for i, rep := range r.reports {
		if !prefix(rep, p.Events) {
			t.Fatalf("%s: report %d (%d events) is not a prefix of the %d loaded", where, i, len(rep), len(p.Events))
		}
		for w, word := range r.rows[i] {
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
