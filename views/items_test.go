package views_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dshfs/dshfs/views"
)

func load(t *testing.T, lines ...string) *views.Session {
	t.Helper()
	s, err := views.Load(context.Background(), store(t, lines...), "s", views.Options{})
	if err != nil || s.Refusal != nil {
		t.Fatal(err, s.Refusal)
	}
	return s
}

func names(items []views.Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Name)
	}
	return out
}

// turns/ holds one file per turn number: the first turn of that number, as turn:N renders it.
func TestItemsTurnsFirstOfANumber(t *testing.T) {
	s := load(t,
		`{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}`,
		`{"type":"turn/end","seq":1,"time":6,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
		`{"type":"turn/start","seq":2,"time":7,"data":{"turn":1}}`,
		`{"type":"turn/end","seq":3,"time":8,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
		`{"type":"turn/start","seq":4,"time":9,"data":{"turn":2}}`,
	)
	items, err := s.Items(views.DirTurns)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(items); len(got) != 2 || got[0] != "0000000001.jsonl" || got[1] != "0000000002.jsonl" {
		t.Fatalf("turns/: %q", got)
	}
	if items[0].Source != views.FromView || items[0].View != views.Turn(1) {
		t.Fatalf("turns/0000000001.jsonl serves %+v", items[0])
	}
	b, err := s.Render(context.Background(), items[0].View)
	if err != nil || string(b) != `{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}`+"\n"+`{"type":"turn/end","seq":1,"time":6,"data":{"turn":1,"reason":{"kind":"completed"}}}`+"\n" {
		t.Fatalf("turn:1 is not the first turn 1: %q, %v", b, err)
	}
}

// events/ and trace/ answer a name without listing: events/ only the exact name of an event, trace/ any seq
// of the log, listed or not.
func TestFindAddressable(t *testing.T) {
	s := load(t,
		`{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}`,
		`{"type":"turn/end","seq":1,"time":6,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
	)
	for _, tc := range []struct {
		dir  views.Dir
		name string
		ok   bool
		view views.View
		key  string
	}{
		{views.DirEvents, "0000000001.turn~002Fend.json", true, views.Event(1), "0000000001.turn~002Fend.json"},
		{views.DirEvents, "0000000001.turn~002Fstart.json", false, views.View{}, ""},
		{views.DirEvents, "0000000002.turn~002Fend.json", false, views.View{}, ""},
		{views.DirEvents, "1.json", false, views.View{}, ""},
		{views.DirTrace, "0000000001.json", true, views.Trace(1), "1"},
		{views.DirTrace, "0000000001.jsonx", false, views.View{}, ""},
		{views.DirTrace, "0000000002.json", false, views.View{}, ""},
	} {
		if !tc.dir.Addressable() {
			t.Fatalf("%s is not addressable", tc.dir)
		}
		it, ok, err := s.Find(tc.dir, tc.name)
		if err != nil || ok != tc.ok || (ok && (it.View != tc.view || it.Key != tc.key || it.Name != tc.name)) {
			t.Errorf("%s/%s: %+v %v %v; want found %v, %v key %q", tc.dir, tc.name, it, ok, err, tc.ok, tc.view, tc.key)
		}
	}
	events, err := s.Items(views.DirEvents)
	if err != nil || len(events) != 2 || events[0].Name != "0000000000.turn~002Fstart.json" {
		t.Fatalf("events/: %q, %v", names(events), err)
	}
	if trace, err := s.Items(views.DirTrace); err != nil || len(trace) != 0 {
		t.Fatalf("trace/ lists %q (%v); no event takes part in a replacement", names(trace), err)
	}
}

// compactions/ lists prunes.jsonl and a file per record; CompactionRecord finds a record by its id, and a
// record the snapshot lacks is ErrNotFound.
func TestCompactionRecord(t *testing.T) {
	s := load(t,
		`{"type":"user/message","seq":0,"time":5,"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"compaction/start","seq":1,"time":6,"data":{"compactionId":"c/1","turn":null}}`,
	)
	items, err := s.Items(views.DirCompactions)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(items); len(got) != 2 || got[0] != "prunes.jsonl" || got[1] != "c~002F1.json" {
		t.Fatalf("compactions/: %q", got)
	}
	if items[0].View != views.Prunes || items[1].Source != views.FromCompaction || items[1].ID != "c/1" {
		t.Fatalf("compactions/ items: %+v", items)
	}
	b, err := s.CompactionRecord("c/1")
	all, _ := s.Render(context.Background(), views.Compactions)
	if err != nil || string(b) != string(all) {
		t.Fatalf("record c/1: %q, %v; the compactions view holds %q", b, err, all)
	}
	if _, err := s.CompactionRecord("c2"); !errors.Is(err, views.ErrNotFound) {
		t.Fatalf("a missing record: %v", err)
	}
}

// spill/index.json is the spill view, dated like the session; a session citing nothing lists only it.
func TestSpillIndexTime(t *testing.T) {
	s := load(t,
		`{"type":"turn/start","seq":0,"time":5000,"data":{"turn":1}}`,
		`{"type":"turn/end","seq":1,"time":6000,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
	)
	b, mtime, err := s.SpillIndex()
	want, _ := s.Render(context.Background(), views.Spill)
	if err != nil || string(b) != string(want) || !mtime.Equal(s.ModTime()) || mtime.UnixMilli() != 6000 {
		t.Fatalf("spill index %q at %v (%v); want %q at %v", b, mtime, err, want, s.ModTime())
	}
	items, err := s.Items(views.DirSpill)
	if err != nil || len(items) != 1 || items[0].Name != "index.json" || items[0].Source != views.FromSpillIndex {
		t.Fatalf("spill/: %+v, %v", items, err)
	}
}
