package sqlite

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/eventtest"
	"github.com/dshfs/dshfs/internal/fixtures"
)

func names(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return strings.Join(out, " ")
}

// TestNativeDatabase: the database the harness's rc.8 provider wrote through its own live API (WAL
// mode, delegation_depth NULL for top-level sessions) lists and loads with the harness's answers, and a
// read-only open leaves its directory as it was.
func TestNativeDatabase(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sessions.db")
	if err := os.WriteFile(path, must(os.ReadFile(fixtures.Path(t, "generated", "sqlite-native-v17.db"))), 0o600); err != nil {
		t.Fatal(err)
	}
	if !walFile(path) {
		t.Fatal("the native fixture is expected in WAL mode")
	}
	b, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	l, err := b.List(ctx)
	if err != nil || len(l.RootErrors) != 0 || len(l.Entries) != 5 {
		t.Fatalf("list: %v, root errors %+v, %d entries", err, l.RootErrors, len(l.Entries))
	}
	golden := fixtures.Path(t, "golden", "generated-sqlite-native")
	for _, e := range l.Entries {
		p, err := b.LoadStored(ctx, e.ID)
		if err != nil {
			t.Fatalf("%s: %v", e.ID, err)
		}
		want := strings.TrimSuffix(string(must(os.ReadFile(filepath.Join(golden, e.ID, "header.json")))), "\n")
		if got := string(p.Header.Meta()); got != want {
			t.Errorf("%s header\n got %s\nwant %s", e.ID, got, want)
		}
		if !p.Header.NoDelegationDepth || !strings.Contains(string(p.Header.Line()), `"delegationDepth":0`) {
			t.Errorf("%s: a NULL depth must read as absent and be written as 0 in a JSONL line: %s", e.ID, p.Header.Line())
		}
		stored := eventtest.ReadFile(t, filepath.Join(golden, e.ID, "stored.jsonl"))
		if len(p.Events) != len(stored) {
			t.Fatalf("%s: %d events, want %d", e.ID, len(p.Events), len(stored))
		}
		for i := range stored {
			if string(p.Events[i].Raw) != string(stored[i].Raw) {
				t.Fatalf("%s event %d\n got %s\nwant %s", e.ID, i, p.Events[i].Raw, stored[i].Raw)
			}
		}
	}
	if !b.reads.immutable {
		t.Error("a quiet WAL database should be read as immutable")
	}
	b.Close()
	if got := names(t, dir); got != "sessions.db" {
		t.Fatalf("a read-only open changed the directory: %s", got)
	}
}

// TestQuietReaderFollowsWriter: a read-only backend that opened a quiet WAL database as immutable sees
// what a writer commits after it opened (the writer's -wal ends the quiet read), and a header written
// without a delegation depth is stored NULL and read back without one.
func TestQuietReaderFollowsWriter(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.db")
	w, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := hdr("a")
	h.NoDelegationDepth = true
	first := eventtest.Events(t, `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`)
	art, err := w.Materialize(ctx, h, first)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if got := names(t, dir); got != "s.db" {
		t.Fatalf("after the writer closed: %s", got)
	}
	r, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p, err := r.LoadStored(ctx, "a")
	if err != nil || len(p.Events) != 1 || !r.reads.immutable {
		t.Fatalf("first read: %v, %d events, immutable %v", err, len(p.Events), r.reads.immutable)
	}
	if strings.Contains(string(p.Header.Meta()), "delegationDepth") {
		t.Errorf("a NULL depth came back as %s", p.Header.Meta())
	}
	w, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	more := eventtest.Events(t, `{"type":"turn/end","seq":1,"time":2,"data":{"turn":1}}`)
	if _, err := w.AppendBatch(ctx, h, art, more, nil); err != nil {
		t.Fatal(err)
	}
	p, err = r.LoadStored(ctx, "a")
	if err != nil || len(p.Events) != 2 {
		t.Fatalf("read after the writer's commit: %v, %d events", err, len(p.Events))
	}
	if r.reads.immutable {
		t.Error("the reader still reads without locks while a writer has the database open")
	}
	if l, err := r.List(ctx); err != nil || len(l.Entries) != 1 {
		t.Fatalf("list: %v %+v", err, l)
	}
}

func TestHeaderWithoutDepth(t *testing.T) {
	h := event.Header{ID: "x", CreatedAt: 5, NoDelegationDepth: true}
	if got, want := string(h.Meta()), `{"version":0,"id":"x","createdAt":5}`; got != want {
		t.Errorf("meta %s, want %s", got, want)
	}
	if got, want := string(h.Line()), `{"type":"session","version":0,"id":"x","createdAt":5,"delegationDepth":0}`; got != want {
		t.Errorf("line %s, want %s", got, want)
	}
	if string(h.WithDepth().Meta()) != string(event.Header{ID: "x", CreatedAt: 5}.Meta()) {
		t.Error("WithDepth differs from a depth-0 header")
	}
}

// readDB is the pool a read-only backend reads through now, for tests that query its rows directly.
func readDB(t *testing.T, b *Backend) *sql.DB {
	t.Helper()
	db, _, err := b.reader()
	if err != nil {
		t.Fatal(err)
	}
	return db
}
