package convert

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/eventstore/sqlite"
	"github.com/dshfs/dshfs/internal/fixtures"
	"github.com/dshfs/dshfs/internal/synth"
)

var ctx = context.Background()

func source(t *testing.T, n int) *eventstore.Store {
	t.Helper()
	root := filepath.Join(t.TempDir(), "src")
	if err := synth.Write(root, jsonl.Zstd, "s", n); err != nil {
		t.Fatal(err)
	}
	b, err := jsonl.Open(root, jsonl.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	return eventstore.New(b)
}

func database(t *testing.T) (*sqlite.Backend, string) {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o700)
	path := filepath.Join(dir, "s.db")
	b, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, path
}

func same(t *testing.T, got, want []event.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].Raw, want[i].Raw) {
			t.Fatalf("event %d:\n got %s\nwant %s", i, got[i].Raw, want[i].Raw)
		}
	}
}

// TestResume: an interrupted conversion (the destination holds a prefix) is completed, a second run finds
// the session identical, and --verify agrees.
func TestResume(t *testing.T) {
	src := source(t, 300)
	want, err := src.ReadFrom(ctx, "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	dst, path := database(t)
	if _, err := dst.Materialize(ctx, want.Header, want.Events[:100]); err != nil {
		t.Fatal(err)
	}
	reopen := func() (eventstore.Backend, error) { return sqlite.Open(path, sqlite.Options{ReadOnly: true}) }
	reports, err := Run(ctx, src, dst, Options{Verify: true, Reopen: reopen})
	if err != nil || len(reports) != 1 || reports[0].Outcome != Completed {
		t.Fatalf("%+v %v", reports, err)
	}
	got, err := dst.LoadStored(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	same(t, got.Events, want.Events)
	reports, err = Run(ctx, src, dst, Options{Verify: true, Reopen: reopen})
	if err != nil || reports[0].Outcome != Identical {
		t.Fatalf("second run: %+v %v", reports, err)
	}
}

// TestDiffers: a destination session of the same id that is not a prefix is refused and left alone.
func TestDiffers(t *testing.T) {
	src := source(t, 50)
	p, _ := src.ReadFrom(ctx, "s", 0)
	dst, _ := database(t)
	other := append([]event.Event(nil), p.Events[:5]...)
	other[4] = event.NewEventFrom("plugin/x", 4, 1, []byte(`{}`), event.Member{Key: "ignorable", Value: event.Bool(true)})
	if _, err := dst.Materialize(ctx, p.Header, other); err != nil {
		t.Fatal(err)
	}
	reports, err := Run(ctx, src, dst, Options{})
	if err != nil || reports[0].Outcome != Differs {
		t.Fatalf("%+v %v", reports, err)
	}
	got, _ := dst.LoadStored(ctx, "s")
	same(t, got.Events, other)
}

// TestBatches: a JSONL destination gets batches ending at step/turn boundaries once a quarter of the limit
// is reached, never longer than the limit; a SQLite destination one batch.
func TestBatches(t *testing.T) {
	src := source(t, 2000)
	p, _ := src.ReadFrom(ctx, "s", 0)
	jb, err := jsonl.Open(t.TempDir(), jsonl.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	batches := batchesFor(jb, p.Events, 100)
	total := 0
	for i, b := range batches {
		total += len(b)
		last := b[len(b)-1].Type
		boundary := last == "step/end" || last == "turn/end" || last == "session/end-seed"
		if len(b) > 100 || (i < len(batches)-1 && !boundary && len(b) != 100) || (boundary && len(b) < 25 && i < len(batches)-1) {
			t.Fatalf("batch %d: %d events ending in %s", i, len(b), last)
		}
	}
	if total != len(p.Events) {
		t.Fatalf("batches hold %d of %d events", total, len(p.Events))
	}
	db, _ := database(t)
	if got := batchesFor(db, p.Events, 100); len(got) != 1 || len(got[0]) != len(p.Events) {
		t.Fatalf("a SQLite destination got %d batches", len(got))
	}
}

// crashedID is the fixture session with an open turn after a durable tool/call: a crashed session.
const crashedID = "main-session-30628611-e45f-4f98-9688-010e1428e585"

// TestSessionsFilter: with Sessions only those ids are converted — a crashed one stays crashed, and its
// copy verifies, surface and closers included — and an id the source lacks is reported missing, with
// nothing written for it.
func TestSessionsFilter(t *testing.T) {
	root := fixtures.CopyTree(t, fixtures.Path(t, "generated", "raw"))
	b, err := jsonl.Open(root, jsonl.None)
	if err != nil {
		t.Fatal(err)
	}
	src := eventstore.New(b)
	l, err := src.List(ctx)
	if err != nil || len(l.Entries) < 2 {
		t.Fatalf("fixture listing: %d sessions, %v", len(l.Entries), err)
	}
	dir := t.TempDir()
	dst, err := jsonl.Open(dir, jsonl.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	reopen := func() (eventstore.Backend, error) { return jsonl.Open(dir, jsonl.Zstd) }
	reports, err := Run(ctx, src, dst, Options{Verify: true, Reopen: reopen, Sessions: []string{crashedID, "no-such-session", crashedID}})
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 2 {
		t.Fatalf("reports %+v, want one missing and one converted", reports)
	}
	byID := map[string]Report{}
	for _, r := range reports {
		byID[r.ID] = r
	}
	if r := byID["no-such-session"]; r.Outcome != Missing || r.Reason == "" {
		t.Errorf("missing id: %+v", r)
	}
	if r := byID[crashedID]; r.Outcome != Converted || r.Events == 0 {
		t.Errorf("crashed session: %+v", r)
	}
	got, err := dst.List(ctx)
	if err != nil || len(got.Entries) != 1 || got.Entries[0].ID != crashedID {
		t.Fatalf("destination lists %+v, %v; want the one session", got.Entries, err)
	}
	want, _ := src.ReadFrom(ctx, crashedID, 0)
	back, err := dst.LoadStored(ctx, crashedID)
	if err != nil {
		t.Fatal(err)
	}
	same(t, back.Events, want.Events)
	ins, err := eventstore.New(dst).Inspect(ctx, crashedID)
	if err != nil || len(ins.Closers) == 0 {
		t.Fatalf("the copy is no longer crashed: %d closers, %v", len(ins.Closers), err)
	}
}

// TestVerifySurface: the surface comparison accepts an identical copy and finds a copy of that id that
// derives another surface (events equal to the source's cannot, so the check is shown on a shorter log).
func TestVerifySurface(t *testing.T) {
	src := source(t, 300)
	p, _ := src.ReadFrom(ctx, "s", 0)
	dir := t.TempDir()
	dst, err := jsonl.Open(dir, jsonl.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Materialize(ctx, p.Header, p.Events); err != nil {
		t.Fatal(err)
	}
	if r := sameSurface(ctx, src, eventstore.New(dst), "s"); r != "" {
		t.Fatalf("identical copies: %s", r)
	}
	// a destination holding a shorter log of that id derives another surface
	dir2 := t.TempDir()
	dst2, _ := jsonl.Open(dir2, jsonl.Zstd)
	cut := len(p.Events) / 2
	for cut > 0 && p.Events[cut-1].Type != "turn/end" && p.Events[cut-1].Type != "step/end" {
		cut--
	}
	if cut == 0 {
		t.Fatal("no turn or step end in the synthetic session")
	}
	if _, err := dst2.Materialize(ctx, p.Header, p.Events[:cut]); err != nil {
		t.Fatal(err)
	}
	if r := sameSurface(ctx, src, eventstore.New(dst2), "s"); r == "" {
		t.Fatal("a destination with half the log derives the same surface")
	}
}
