package convert

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/eventstore/postgres"
	"github.com/dshfs/dshfs/internal/pgtest"
	"github.com/dshfs/dshfs/internal/synth"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// appendNote appends one event of its own text to session s of a store: what makes two copies differ.
func appendNote(t *testing.T, st *eventstore.Store, text string) {
	t.Helper()
	p, err := st.Backend().LoadStored(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := event.Canonical([]byte(`{"by":"` + text + `"}`))
	e := event.NewEventFrom("session/note", int64(len(p.Events)), 1778573709000, data,
		event.Member{Key: "ignorable", Value: event.Bool(true)})
	if err := st.Append(ctx, "s", []event.Event{e}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestHandoverDiverged hands a fleet session over into a JSONL root, then lets both copies grow on their
// own: a rerun of the handover refuses the root's copy, naming the first seq where it leaves the fleet
// store's log, and writes nothing there; the other direction (a root into the fleet store) likewise.
func TestHandoverDiverged(t *testing.T) {
	pg := pgtest.Shared(t)
	dsn := pg.DSN(pg.NewDatabase(t))
	fleet, err := postgres.Open(ctx, dsn, postgres.Options{Host: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	srcRoot := filepath.Join(t.TempDir(), "src")
	if err := synth.Write(srcRoot, jsonl.None, "s", 40); err != nil {
		t.Fatal(err)
	}
	open := func(root string) *eventstore.Store {
		b, err := jsonl.Open(root, jsonl.None)
		if err != nil {
			t.Fatal(err)
		}
		return eventstore.New(b)
	}
	if r, err := Run(ctx, open(srcRoot), fleet, Options{}); err != nil || r[0].Outcome != Converted {
		t.Fatalf("into the fleet store: %+v %v", r, err)
	}
	handover := filepath.Join(t.TempDir(), "handover")
	hb, err := jsonl.Open(handover, jsonl.None)
	if err != nil {
		t.Fatal(err)
	}
	fleetStore := eventstore.New(fleet)
	if r, err := Run(ctx, fleetStore, hb, Options{Sessions: []string{"s"}}); err != nil || r[0].Outcome != Converted {
		t.Fatalf("the handover: %+v %v", r, err)
	}
	p, _ := fleet.LoadStored(ctx, "s")
	at := len(p.Events)

	// the harness resumes the handed-over copy, and the fleet store's copy grows through its source
	appendNote(t, open(handover), "the handover root")
	appendNote(t, open(srcRoot), "the source")
	if r, err := Run(ctx, open(srcRoot), fleet, Options{}); err != nil || r[0].Outcome != Completed {
		t.Fatalf("the fleet store grown: %+v %v", r, err)
	}
	before, err := os.ReadFile(artifactOf(t, handover))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(ctx, fleetStore, hb, Options{Sessions: []string{"s"}})
	want := "from seq " + strconv.Itoa(at) + " on"
	if err != nil || r[0].Outcome != Differs || !strings.Contains(r[0].Reason, want) {
		t.Fatalf("the handover rerun: %+v %v, want differs %q", r, err, want)
	}
	after, _ := os.ReadFile(artifactOf(t, handover))
	if string(after) != string(before) {
		t.Error("the refused handover wrote to the root's copy")
	}

	// the other direction: the handover root's diverged copy into the fleet store is refused as well
	held, _ := fleet.Held(ctx, "s")
	r, err = Run(ctx, open(handover), fleet, Options{})
	if err != nil || r[0].Outcome != Differs || !strings.Contains(r[0].Reason, want) {
		t.Fatalf("the root back into the fleet store: %+v %v, want differs %q", r, err, want)
	}
	if h, _ := fleet.Held(ctx, "s"); h.NextSeq != held.NextSeq || h.Revision != held.Revision {
		t.Errorf("the refused copy changed the fleet store: %+v, was %+v", h, held)
	}
}

// artifactOf is session s's file in a JSONL root.
func artifactOf(t *testing.T, root string) string {
	t.Helper()
	var found string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".jsonl") {
			found = p
		}
		return nil
	})
	if found == "" {
		t.Fatalf("no session file under %s", root)
	}
	return found
}
