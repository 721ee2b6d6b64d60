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
	opts := views.Options{Spill: spill.NewRootsExact([]string{filepath.Join(dir, "spill")})}
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
	if child.Header.ParentSession == nil || child.Header.ParentSession.Str != demo.ForkParent || child.Events[12].Type != "session/end-seed" || child.Events[11].Type != "turn/end" {
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
