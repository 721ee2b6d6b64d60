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
