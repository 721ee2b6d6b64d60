package eventstore_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/synth"
)

// TestSupersede: a live v0 session whose listing names a newer generation published beside its log is
// ended at once — its pending events kept in a sidecar, the v0 log untouched, the engine released — and a
// session whose listing still names its own log is left live.
func TestSupersede(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root := filepath.Join(dir, "sessions")
	if err := synth.Write(root, jsonl.None, "s", 40); err != nil {
		t.Fatal(err)
	}
	b, err := jsonl.Open(root, jsonl.None)
	if err != nil {
		t.Fatal(err)
	}
	st := eventstore.New(b)
	st.Window = time.Hour // nothing is written before the test says so
	defer st.Close(ctx)
	w, err := st.Writer(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	note := `{"type":"plugin/note","data":{"n":1},"ignorable":true}`
	if err := w.Accept([][]byte{[]byte(note), []byte(note)}); err != nil {
		t.Fatal(err)
	}
	if w.Pending() != 2 {
		t.Fatalf("%d pending, want 2", w.Pending())
	}
	l, err := st.List(ctx)
	if err != nil || len(l.Entries) != 1 {
		t.Fatal(l, err)
	}
	v0 := l.Entries[0].Path
	before, _ := os.ReadFile(v0)
	if ended, err := st.Supersede(ctx, "s", v0); ended || err != nil {
		t.Fatalf("superseded by its own log: %v %v", ended, err)
	}

	// the upgraded harness publishes the session's v4 file beside its v0 log
	v4root := filepath.Join(dir, "v4")
	if err := synth.WriteV4(v4root, jsonl.None, "s", 40); err != nil {
		t.Fatal(err)
	}
	matches, _ := filepath.Glob(filepath.Join(v4root, "*", "s", "session.v4.jsonl"))
	if len(matches) != 1 {
		t.Fatalf("the v4 session: %v", matches)
	}
	v4 := filepath.Join(filepath.Dir(v0), "session.v4.jsonl")
	if err := os.Rename(matches[0], v4); err != nil {
		t.Fatal(err)
	}
	if l, _ = st.List(ctx); len(l.Entries) != 1 || l.Entries[0].Path != v4 {
		t.Fatalf("the listing after the upgrade: %+v", l.Entries)
	}
	ended, err := st.Supersede(ctx, "s", v4)
	if !ended || err == nil || !strings.Contains(err.Error(), "2 accepted events") || eventstore.AsCommandError(err).Code != eventstore.CodeConflict {
		t.Fatalf("superseded: %v %v, want ended with the pending events kept", ended, err)
	}
	if st.Live("s") != nil {
		t.Error("the superseded session is still live")
	}
	side, _ := filepath.Glob(v0 + ".pending-*")
	if len(side) != 1 || !strings.Contains(err.Error(), side[0]) {
		t.Fatalf("sidecars %v; the error names %q", side, err)
	}
	if kept, _ := os.ReadFile(side[0]); strings.Count(string(kept), "\n") != 2 {
		t.Errorf("the sidecar holds %q, want the 2 pending events", kept)
	}
	if after, _ := os.ReadFile(v0); string(after) != string(before) {
		t.Error("the superseded v0 log was written")
	}
	if ended, _ := st.Supersede(ctx, "s", v4); ended {
		t.Error("a released session was ended again")
	}
}
