package convert

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/eventstore/sqlite"
	"github.com/dshfs/dshfs/internal/fixtures"
)

// TestGenerations: a session whose current generation this build does not read is skipped by name and
// reason (the v3 file named), never converted from its stale v0 log; and a destination that holds an id
// in a later generation is left alone, with nothing written beside it.
func TestGenerations(t *testing.T) {
	root := fixtures.CopyTree(t, fixtures.Path(t, "generations", "beside", "raw"))
	b, err := jsonl.Open(root, jsonl.None)
	if err != nil {
		t.Fatal(err)
	}
	dstRoot := filepath.Join(t.TempDir(), "dst")
	dst, err := jsonl.Open(dstRoot, jsonl.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	reports, err := Run(ctx, eventstore.New(b), dst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 6 {
		t.Fatalf("%d reports", len(reports))
	}
	for _, r := range reports {
		if r.Outcome != Skipped || !strings.Contains(r.Reason, "session.v3.jsonl\" is format generation v3") {
			t.Fatalf("%s: %s %s", r.ID, r.Outcome, r.Reason)
		}
	}
	if _, err := os.Stat(dstRoot); !os.IsNotExist(err) {
		t.Fatalf("the destination was written: %v", err)
	}

	// the v3 store as the destination of the same sessions in v0 (the v3 files removed from the source)
	v3 := fixtures.CopyTree(t, fixtures.Path(t, "generations", "v3", "raw"))
	matches, _ := filepath.Glob(filepath.Join(root, "*", "*", "session.v3.jsonl"))
	for _, m := range matches {
		os.Remove(m)
	}
	into, err := jsonl.Open(v3, jsonl.None)
	if err != nil {
		t.Fatal(err)
	}
	reports, err = Run(ctx, eventstore.New(b), into, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reports {
		if r.Outcome != Differs || !strings.Contains(r.Reason, "generation v3") {
			t.Fatalf("%s: %s %s", r.ID, r.Outcome, r.Reason)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(v3, "*", "*", "session.jsonl")); len(left) != 0 {
		t.Fatalf("v0 logs written beside the v3 files: %v", left)
	}
}

// TestV4ToSQLite: a v4 session is never written into a SQLite database (no release with the SQLite
// provider reads v4): each is skipped by name with that reason, and the database holds none of them.
func TestV4ToSQLite(t *testing.T) {
	b, err := jsonl.Open(fixtures.CopyTree(t, fixtures.Path(t, "generations", "v4", "zstd-root")), jsonl.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "sessions.db")
	dst, err := sqlite.Open(db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	reports, err := Run(ctx, eventstore.New(b), dst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 11 {
		t.Fatalf("%d reports", len(reports))
	}
	for _, r := range reports {
		if r.Outcome != Skipped || !strings.Contains(r.Reason, "is format generation v4") || !strings.Contains(r.Reason, "never had format v4") {
			t.Fatalf("%s: %s %s", r.ID, r.Outcome, r.Reason)
		}
	}
	l, err := dst.List(ctx)
	if err != nil || len(l.Entries) != 0 {
		t.Fatalf("the database lists %d sessions, %v", len(l.Entries), err)
	}
}

// TestV4ToJSONL: a v4 store converted into a JSONL root of the other encoding is written in v4, each
// session a v4 file restoring to the source's header and events (verified), and a second run finds every
// session identical; a v0 session of the same id in the destination is left alone (differs).
func TestV4ToJSONL(t *testing.T) {
	src, err := jsonl.Open(fixtures.CopyTree(t, fixtures.Path(t, "generations", "v4", "raw-root")), jsonl.None)
	if err != nil {
		t.Fatal(err)
	}
	dstRoot := filepath.Join(t.TempDir(), "dst")
	reopen := func() (eventstore.Backend, error) { return jsonl.Open(dstRoot, jsonl.Zstd) }
	dst, _ := reopen()
	reports, err := Run(ctx, eventstore.New(src), dst, Options{Verify: true, Reopen: reopen})
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 11 {
		t.Fatalf("%d reports", len(reports))
	}
	for _, r := range reports {
		if r.Outcome != Converted || r.Events == 0 {
			t.Errorf("%s: %s %s", r.ID, r.Outcome, r.Reason)
		}
	}
	if files, _ := filepath.Glob(filepath.Join(dstRoot, "*", "*", "session.v4.jsonl.zstd")); len(files) != 11 {
		t.Fatalf("%d v4 files written", len(files))
	}
	again, err := Run(ctx, eventstore.New(src), dst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range again {
		if r.Outcome != Identical {
			t.Errorf("second run %s: %s %s", r.ID, r.Outcome, r.Reason)
		}
	}

	v0, err := jsonl.Open(fixtures.CopyTree(t, fixtures.Path(t, "generated", "raw")), jsonl.None)
	if err != nil {
		t.Fatal(err)
	}
	reports, err = Run(ctx, eventstore.New(src), v0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	differs := 0
	for _, r := range reports {
		if r.Outcome == Differs && strings.Contains(r.Reason, "another format generation") {
			differs++
		}
	}
	if differs != 5 {
		t.Fatalf("%d sessions held as v0 in the destination left alone, want 5: %+v", differs, reports)
	}
}
