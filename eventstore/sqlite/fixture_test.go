package sqlite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/eventtest"
	"github.com/dshfs/dshfs/internal/fixtures"
)

var ctx = context.Background()

// generated lists the five generated sessions in the fixture database's rowid order (the harness imported
// them sorted by id).
func generated(t *testing.T) []string {
	var ids []string
	for _, line := range strings.Split(string(must(os.ReadFile(fixtures.Path(t, "generated", "NAMES.tsv")))), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 0 {
			ids = append(ids, f[0])
		}
	}
	sort.Strings(ids)
	if len(ids) != 5 {
		t.Fatalf("NAMES.tsv lists %d sessions", len(ids))
	}
	return ids
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func fileSum(t *testing.T, path string) [32]byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// TestFixtureReads opens the harness's schema-17 database in place, read-only, and reads every session
// exactly as the harness's readFrom(id, 0) gave it from the JSONL twin; the file is not changed.
func TestFixtureReads(t *testing.T) {
	path := fixtures.Path(t, "generated", "sqlite-v17.db")
	before := fileSum(t, path)
	b, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	l, err := b.List(ctx)
	if err != nil || len(l.Entries) != 5 || len(l.RootErrors) != 0 {
		t.Fatalf("list: %v %+v", err, l)
	}
	for _, id := range generated(t) {
		golden := fixtures.Path(t, "golden", "generated-raw", id)
		p, err := b.LoadStored(ctx, id)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if got, want := string(p.Header.Meta()), strings.TrimSpace(string(must(os.ReadFile(filepath.Join(golden, "header.json"))))); got != want {
			t.Errorf("%s header\n got %s\nwant %s", id, got, want)
		}
		want := eventtest.ReadFile(t, filepath.Join(golden, "stored.jsonl"))
		if len(p.Events) != len(want) {
			t.Fatalf("%s: %d events, want %d", id, len(p.Events), len(want))
		}
		for i := range want {
			if !bytes.Equal(p.Events[i].Raw, want[i].Raw) {
				t.Fatalf("%s event %d\n got %s\nwant %s", id, i, p.Events[i].Raw, want[i].Raw)
			}
		}
		if p.Torn != nil {
			t.Errorf("%s: torn %+v", id, p.Torn)
		}
	}
	b.Close()
	if fileSum(t, path) != before {
		t.Fatal("a read-only open changed the fixture database")
	}
	if _, err := os.Stat(path + "-wal"); err == nil {
		t.Fatal("a read-only open left a WAL beside the fixture")
	}
}

// TestFixtureV14Refused: a schema-14 database is refused with the harness's schema-version text, and is
// not touched.
func TestFixtureV14Refused(t *testing.T) {
	path := fixtures.Path(t, "generated", "sqlite-v14.db")
	for _, ro := range []bool{true, false} {
		p := path
		if !ro { // a read-write open of a copy: refused before anything is written
			p = filepath.Join(t.TempDir(), "v14.db")
			if err := os.WriteFile(p, must(os.ReadFile(path)), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		before := fileSum(t, p)
		_, err := Open(p, Options{ReadOnly: ro})
		want := `session database at "` + p + `" has schema version 14, incompatible with this build (17)`
		if err == nil || err.Error() != want {
			t.Errorf("read-only=%v: %v, want %s", ro, err, want)
		}
		if fileSum(t, p) != before {
			t.Errorf("read-only=%v: the refused database changed", ro)
		}
	}
}

func sqlite3CLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("sqlite3", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("sqlite3 %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestCreatedMatchesFixture: a database this package creates has the fixture's `.schema` dump, user_version
// and application_id, and passes the same check on reopen.
func TestCreatedMatchesFixture(t *testing.T) {
	fixture := fixtures.Path(t, "generated", "sqlite-v17.db")
	path := filepath.Join(t.TempDir(), "new.db")
	b, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	for _, q := range []string{".schema", "PRAGMA user_version", "PRAGMA application_id"} {
		if got, want := sqlite3CLI(t, "-readonly", path, q), sqlite3CLI(t, "-readonly", fixture, q); got != want {
			t.Errorf("%s\n got %s\nwant %s", q, got, want)
		}
	}
	if got := sqlite3CLI(t, "-readonly", path, "PRAGMA journal_mode"); strings.TrimSpace(got) != "wal" {
		t.Errorf("journal mode %q", got)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	if _, err := Open(path, Options{}); err != nil {
		t.Fatalf("reopen: %v", err)
	}
}

// rowDump is every column of every row with its storage class, as the comparison of re-imported rows
// needs them; data BLOBs decompressed.
func rowDump(t *testing.T, path string) (sessions, events []string, blobs int) {
	b, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rs, err := readDB(t, b).Query(`SELECT id, typeof(version), version, typeof(created_at), created_at, typeof(cwd), cwd, typeof(parent_session), parent_session,
		typeof(seed_length), seed_length, typeof(origin), origin, typeof(delegation_depth), delegation_depth, typeof(agent_preset), agent_preset,
		typeof(incarnation), typeof(revision), revision FROM sessions ORDER BY rowid`)
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		cols := make([]any, 20)
		ptrs := make([]any, len(cols))
		for i := range cols {
			ptrs[i] = &cols[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, dump(cols))
	}
	rs.Close()
	rs, err = readDB(t, b).Query(`SELECT rowid, session_id, typeof(seq), seq, typeof(type), type, typeof(time), time, typeof(data), data,
		typeof(source_event_seqs), source_event_seqs, typeof(surface_op), surface_op, typeof(ignorable), ignorable FROM events ORDER BY rowid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	for rs.Next() {
		cols := make([]any, 16)
		ptrs := make([]any, len(cols))
		for i := range cols {
			ptrs[i] = &cols[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		if blob, ok := cols[9].([]byte); ok {
			blobs++
			cols[9] = "zstd:" + string(must(scalarDecoder.DecodeAll(blob, nil)))
		}
		events = append(events, dump(cols))
	}
	return sessions, events, blobs
}

// TestReimportMatchesFixture imports the five generated sessions as the fixture was made (one append each,
// from the raw root's stored events, in the fixture's order) and compares every row, column by column with
// each value's storage class, with the harness's; only the random incarnations and store id differ, and
// data BLOBs are compared decompressed (their zstd bytes may differ).
func TestReimportMatchesFixture(t *testing.T) {
	path := filepath.Join(t.TempDir(), "re.db")
	b, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range generated(t) {
		golden := fixtures.Path(t, "golden", "generated-raw", id)
		meta := bytes.TrimSpace(must(os.ReadFile(filepath.Join(golden, "header.json"))))
		h, err := event.ParseHeaderLine(append([]byte(`{"type":"session",`+string(meta[1:])), '\n'))
		if err != nil {
			t.Fatalf("%s header: %v", id, err)
		}
		if _, err := b.Materialize(ctx, h, eventtest.ReadFile(t, filepath.Join(golden, "stored.jsonl"))); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	b.Close()
	gotS, gotE, gotBlobs := rowDump(t, path)
	wantS, wantE, wantBlobs := rowDump(t, fixtures.Path(t, "generated", "sqlite-v17.db"))
	eventtest.SameLines(t, gotS, wantS)
	eventtest.SameLines(t, gotE, wantE)
	if gotBlobs != wantBlobs {
		t.Errorf("%d data BLOBs, the fixture has %d", gotBlobs, wantBlobs)
	}
}

func dump(cols []any) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		switch v := c.(type) {
		case []byte:
			parts[i] = fmt.Sprintf("x'%x'", v)
		default:
			parts[i] = fmt.Sprintf("%#v", v)
		}
	}
	return strings.Join(parts, " | ")
}
