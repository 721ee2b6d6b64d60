package demo_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/demo"
	"github.com/dshfs/dshfs/spill"
	"github.com/dshfs/dshfs/views"
)

// written writes the demo into a fresh directory and opens its store.
func written(t *testing.T) (dir string, b *jsonl.Backend) {
	t.Helper()
	dir = t.TempDir()
	if err := demo.Write(dir); err != nil {
		t.Fatal(err)
	}
	b, err := jsonl.Open(filepath.Join(dir, "sessions"), "")
	if err != nil {
		t.Fatal(err)
	}
	return dir, b
}

func TestDemoStore(t *testing.T) {
	dir, b := written(t)
	st := eventstore.New(b)
	ctx := context.Background()
	l, err := st.List(ctx)
	if err != nil || len(l.Entries) != 6 || len(l.RootErrors) != 0 {
		t.Fatalf("listing %+v %v", l, err)
	}
	// the spill file is where a harness whose home is dir keeps it: the store's home root resolves it
	home, ok := spill.HomeRoot(filepath.Join(dir, "sessions"))
	if !ok || home != filepath.Join(dir, "spill") {
		t.Fatalf("the demo store's home spill root: %q %v", home, ok)
	}
	opts := views.Options{Spill: spill.NewRootsExact([]string{home})}
	load := func(id string) *views.Session {
		s, err := views.Load(ctx, st, id, opts)
		if err != nil || s.Refusal != nil {
			t.Fatalf("%s: %v %v", id, err, s.Refusal)
		}
		return s
	}
	status := func(s *views.Session) event.Value {
		v, err := event.Parse(s.Status())
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	get := func(v event.Value, k string) string { m, _ := v.Get(k); return string(event.Stringify(m)) }

	if st := status(load(demo.Clean)); get(st, "balanced") != "true" || get(st, "unknownOutcomes") != "[]" {
		t.Errorf("clean: %s", event.Stringify(st))
	}
	crashed := status(load(demo.Crashed))
	if get(crashed, "openTurn") != "2" || !strings.Contains(get(crashed, "unknownOutcomes"), `"callId":"call-migrate"`) ||
		!strings.Contains(get(crashed, "repairPreview"), "TOOL_OUTCOME_UNKNOWN") {
		t.Errorf("crashed: %s", event.Stringify(crashed))
	}
	comp := load(demo.Compacted)
	recs, _, err := comp.Compactions()
	if err != nil || len(recs) != 1 || recs[0].State != "complete" {
		t.Fatalf("compactions %+v %v", recs, err)
	}
	shadowed, err := comp.Shadowed()
	if err != nil || len(shadowed) != 8 {
		t.Fatalf("shadowed %d %v", len(shadowed), err)
	}
	child := load(demo.ForkChild)
	if child.Header.ParentSession == nil || child.Header.ParentSession.Str != demo.ForkParent || child.Events()[12].Type != "session/end-seed" || child.Events()[11].Type != "turn/end" {
		t.Fatalf("fork child header %s", child.Header.Meta())
	}
	rows, err := load(demo.Spilled).SpillRows()
	if err != nil || len(rows) != 1 || rows[0].Status != spill.Present || rows[0].Bytes == 0 {
		t.Fatalf("spill rows %+v %v", rows, err)
	}
}

// TestDemoReleasesLocks: Write leaves no session's writer lock behind, so the mount serving the demo in the
// same process writes at once (a lock left to the garbage collector refused writes until a collection).
func TestDemoReleasesLocks(t *testing.T) {
	_, b := written(t)
	for _, id := range []string{demo.Clean, demo.Crashed, demo.Compacted, demo.ForkParent, demo.ForkChild, demo.Spilled} {
		l, err := b.Lock(context.Background(), id)
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		l.Release()
	}
}

// TestDemoUsage: every step of every demo session records the tokens a provider would report, so that
// usage.jsonl, usage.svg and the index show a token account; the requests' context grows within a
// session and shrinks after the compaction.
func TestDemoUsage(t *testing.T) {
	_, b := written(t)
	st := eventstore.New(b)
	ctx := context.Background()
	for _, id := range []string{demo.Clean, demo.Crashed, demo.Compacted, demo.ForkParent, demo.ForkChild, demo.Spilled} {
		s, err := views.Load(ctx, st, id, views.Options{})
		if err != nil || s.Refusal != nil {
			t.Fatalf("%s: %v %v", id, err, s.Refusal)
		}
		steps, _, err := s.Usage()
		if err != nil || len(steps) == 0 {
			t.Fatalf("%s: %d steps, %v", id, len(steps), err)
		}
		for i, u := range steps {
			if u.From != "message" || u.Tokens[0] <= 0 || u.Tokens[1] <= 0 {
				t.Errorf("%s step %d: %+v: want input and output tokens from the assistant/message", id, i, u)
			}
		}
		row := views.IndexRowOf(s, id)
		if row.Input <= 0 || row.Output <= 0 {
			t.Errorf("%s: index row %+v shows no tokens", id, row)
		}
		svg, err := s.UsageSVG()
		if err != nil || !strings.Contains(string(svg), "<svg") {
			t.Errorf("%s: usage.svg %v", id, err)
		}
		if id != demo.Compacted {
			for i := 1; i < len(steps); i++ {
				if steps[i].Tokens[0] <= steps[i-1].Tokens[0] {
					t.Errorf("%s: step %d's context (%v) does not grow from step %d's (%v)", id, i, steps[i].Tokens[0], i-1, steps[i-1].Tokens[0])
				}
			}
		}
	}
	s, err := views.Load(ctx, st, demo.Compacted, views.Options{})
	if err != nil {
		t.Fatal(err)
	}
	steps, markers, _ := s.Usage()
	recs, _, _ := s.Compactions()
	if len(recs) != 1 || len(markers) == 0 || markers[0].Label != "compaction" {
		t.Fatalf("compacted: records %+v markers %+v", recs, markers)
	}
	var before, after float64
	for _, u := range steps {
		if u.Seq < recs[0].ReplacementSeq {
			before = u.Tokens[0]
		} else if after == 0 {
			after = u.Tokens[0]
		}
	}
	if after == 0 || after >= before {
		t.Errorf("compacted: the first request after the compaction sends %v tokens, the last before it %v", after, before)
	}
}
