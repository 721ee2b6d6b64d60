package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/pgtest"
	"github.com/dshfs/dshfs/internal/synth"
)

// TestFleetSyncStateCLI: two copies of one root synced under one host name — the second is refused,
// naming the first differing seq, and `ls` and status.json of the fleet store show the session diverged.
func TestFleetSyncStateCLI(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	s := pgtest.Shared(t)
	dsn := s.DSN(s.NewDatabase(t))
	dir := t.TempDir()
	a, c := filepath.Join(dir, "a"), filepath.Join(dir, "c")
	if err := synth.Write(a, jsonl.None, "s", 40); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", a, c).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	for root, text := range map[string]string{a: "copy A", c: "copy C"} {
		b, err := jsonl.Open(root, jsonl.None)
		if err != nil {
			t.Fatal(err)
		}
		st := eventstore.New(b)
		data, _ := event.Canonical([]byte(`{"by":"` + text + `"}`))
		e := event.NewEventFrom("session/note", 47, 1778573709000, data, event.Member{Key: "ignorable", Value: event.Bool(true)})
		if err := st.Append(context.Background(), "s", []event.Event{e}); err != nil {
			t.Fatal(err)
		}
		st.Close(context.Background())
	}
	if code, out, errOut := runCLI("sync", "--host", "h", c, dsn); code != 0 || !strings.Contains(out, "copied") {
		t.Fatalf("sync of copy C: %d %q %q", code, out, errOut)
	}
	code, out, errOut := runCLI("sync", "--host", "h", a, dsn)
	if code != 1 || !strings.Contains(out, "refused") || !strings.Contains(out, "at seq 47") {
		t.Fatalf("sync of copy A: %d %q %q, want refused at seq 47", code, out, errOut)
	}
	if code, out, errOut := runCLI("ls", dsn); code != 0 || !strings.HasPrefix(out, "s\tdiverged\t") {
		t.Fatalf("ls: %d %q %q", code, out, errOut)
	}
	code, out, _ = runCLI("ls", "--json", dsn)
	var line struct {
		SyncState struct{ State, Host, Reason string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &line) != nil || line.SyncState.State != "diverged" || line.SyncState.Host != "h" ||
		!strings.Contains(line.SyncState.Reason, "at seq 47") {
		t.Fatalf("ls --json: %d %q", code, out)
	}
	code, out, errOut = runCLI("cat", "--view", "status", dsn, "s")
	var st struct {
		State   string
		Custody struct{ SyncState, SyncStateReason string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.State != "cold" || st.Custody.SyncState != "diverged" ||
		!strings.Contains(st.Custody.SyncStateReason, "at seq 47") {
		t.Fatalf("status: %d %q %q", code, out, errOut)
	}
}
