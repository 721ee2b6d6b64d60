package backup

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/eventstore/sqlite"
	"github.com/dshfs/dshfs/internal/eventtest"
	"github.com/dshfs/dshfs/internal/fixtures"
	"github.com/dshfs/dshfs/internal/storetest"
)

// sessionsOptions are testOptions with a writable opener for the copy.
func sessionsOptions() Options {
	opts := testOptions()
	opts.Create = func(root string) (eventstore.Backend, error) { return jsonl.Open(root, jsonl.Zstd) }
	return opts
}

// TestFromSessions: a store backed up session by session (as a fleet store is) gives a JSONL store that
// verifies, holding every session's stored log as the source gives it — a crashed one still crashed —
// and no staging directory is left beside it.
func TestFromSessions(t *testing.T) {
	ctx := context.Background()
	root := fixtures.CopyTree(t, fixtures.Path(t, "generated", "raw"))
	opts := sessionsOptions()
	st, err := opts.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	l, err := st.List(ctx)
	if err != nil || len(l.Entries) == 0 {
		t.Fatalf("fixture: %d sessions, %v", len(l.Entries), err)
	}
	parent := t.TempDir()
	dest := filepath.Join(parent, "b")
	if err := os.Mkdir(dest, 0o755); err != nil { // an empty dest made beforehand takes the copy too
		t.Fatal(err)
	}
	opts.SourceSessions = len(l.Entries)
	m, err := FromSessions(ctx, st, "postgres://u@h/fleet", dest, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Sessions) != len(l.Entries) || m.Source != "postgres://u@h/fleet" || m.Backend != "jsonl" {
		t.Fatalf("manifest: %d sessions of %d, source %q, backend %q", len(m.Sessions), len(l.Entries), m.Source, m.Backend)
	}
	counts, problems, ioErr := Verify(ctx, dest, opts)
	if len(problems) > 0 || ioErr || counts.Sessions != int64(len(l.Entries)) {
		t.Fatalf("verify: %d sessions, io %v, problems:\n%s", counts.Sessions, ioErr, problemKinds(problems))
	}
	back, err := opts.Open(dest)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Entries {
		want, err := st.ReadFrom(ctx, e.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := back.ReadFrom(ctx, e.ID, 0)
		if err != nil {
			t.Fatalf("%s: %v", e.ID, err)
		}
		if len(got.Events) != len(want.Events) {
			t.Fatalf("%s: %d events, want %d", e.ID, len(got.Events), len(want.Events))
		}
		for i := range want.Events {
			if string(got.Events[i].Raw) != string(want.Events[i].Raw) {
				t.Fatalf("%s: event %d differs", e.ID, i)
			}
		}
	}
	entries, _ := os.ReadDir(parent)
	if len(entries) != 1 || entries[0].Name() != "b" {
		t.Fatalf("beside the backup: %v", entries)
	}
}

// TestFromSessionsRefusesAndLeavesNothing: a dest that is not empty is refused, and a backup that cannot
// copy every session (here: the source lists more sessions than it holds) leaves no dest and no staging
// directory behind.
func TestFromSessionsRefusesAndLeavesNothing(t *testing.T) {
	ctx := context.Background()
	root := fixtures.CopyTree(t, fixtures.Path(t, "generated", "raw"))
	opts := sessionsOptions()
	st, err := opts.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	full := filepath.Join(parent, "full")
	os.MkdirAll(full, 0o755)
	os.WriteFile(filepath.Join(full, "x"), nil, 0o644)
	if _, err := FromSessions(ctx, st, "src", full, opts); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("a non-empty dest: %v", err)
	}
	opts.SourceSessions = 1000
	dest := filepath.Join(parent, "b")
	if _, err := FromSessions(ctx, st, "src", dest, opts); err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Fatalf("a backup missing sessions: %v", err)
	}
	entries, _ := os.ReadDir(parent)
	if len(entries) != 1 || entries[0].Name() != "full" {
		t.Fatalf("left behind: %v", entries)
	}
}

// TestFromSessionsLeavesOutOneBadSession: a store holding one session the copy cannot hold (an id over the
// harness's limits, stored before create refused it) is backed up without it: the other sessions are
// copied and verify, the manifest names the one left out and why, and the error says so by name.
func TestFromSessionsLeavesOutOneBadSession(t *testing.T) {
	ctx := context.Background()
	src, err := sqlite.Open(filepath.Join(t.TempDir(), "sessions.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	st := eventstore.New(src)
	long := strings.Repeat("x", 300)
	for _, id := range []string{"good-1", long, "good-2"} {
		cwd := event.String("/p")
		storetest.Write(t, src, event.Header{ID: id, CreatedAt: 1700000000000, Cwd: &cwd}, eventtest.Log(t,
			`turn/start {"turn":1}`,
			`user/message {"id":"u1","role":"user","content":[{"type":"text","text":"q"}],"source":{"kind":"user"}} + "surfaceOp":"append"`,
			`turn/end {"turn":1,"reason":{"kind":"completed"}}`))
	}
	opts := sessionsOptions()
	opts.SourceSessions = 3
	dest := filepath.Join(t.TempDir(), "b")
	m, err := FromSessions(ctx, st, "sqlite", dest, opts)
	var partial *PartialError
	if !errors.As(err, &partial) || len(partial.Skipped) != 1 || partial.Skipped[0].ID != long || !strings.Contains(err.Error(), long) {
		t.Fatalf("a backup with one session it cannot hold: %v", err)
	}
	if m == nil || len(m.Sessions) != 2 || len(m.Skipped) != 1 || m.Skipped[0].ID != long || !strings.Contains(m.Skipped[0].Reason, "255") {
		t.Fatalf("manifest: %+v", m)
	}
	counts, problems, ioErr := Verify(ctx, dest, opts)
	if len(problems) > 0 || ioErr || counts.Sessions != 2 {
		t.Fatalf("verify: %d sessions, io %v, problems:\n%s", counts.Sessions, ioErr, problemKinds(problems))
	}
	back, err := ReadManifest(dest)
	if err != nil || len(back.Skipped) != 1 || back.Skipped[0] != m.Skipped[0] {
		t.Fatalf("the manifest as written: %v %+v", err, back)
	}
}
