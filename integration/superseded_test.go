package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/internal/fixtures"
)

// TestMountSupersededLive: a session this mount writes, with events accepted and not yet written, when
// the harness — upgraded — publishes a newer generation beside its v0 log. The mount's watcher ends the
// session's live state at once, without waiting for a write to meet the change or a rescan: its pending
// events are kept in a sidecar (status.json says where), the v0 log is left as it was, and the session is
// served from its new artifact.
func TestMountSupersededLive(t *testing.T) {
	t.Parallel()
	store := fixtures.CopyTree(t, fixtures.Path(t, "generations", "beside", "zstd"))
	project := filepath.Join(store, "--home-dev-projects-acme-api--")
	const id = "main-session-cdf51971-aa21-4a3b-9b27-5084d6c99886"
	golden := readFile(t, fixtures.Path(t, "generations", "golden", "v3-zstd", id+".jsonl"))
	golden = golden[strings.IndexByte(string(golden), '\n')+1:]
	successor := filepath.Join(t.TempDir(), "session.v3.jsonl.zstd")
	if err := os.Rename(filepath.Join(project, id, "session.v3.jsonl.zstd"), successor); err != nil {
		t.Fatal(err)
	}
	// events stay pending: nothing flushes them before the successor appears
	cfg := writeConfig(t, "[writer]\nbatch_window = \"1h\"\n")
	m := startMount(t, "--config", cfg, store)
	dir := filepath.Join(m.dir, "sessions", id)
	v0 := filepath.Join(project, id, "session.jsonl.zstd")
	before := readFile(t, v0)

	turn := 0
	for _, l := range textLines(readFile(t, filepath.Join(dir, "events.jsonl"))) {
		var e struct {
			Type string
			Data struct{ Turn int }
		}
		if json.Unmarshal([]byte(l), &e) == nil && e.Type == "turn/start" && e.Data.Turn > turn {
			turn = e.Data.Turn
		}
	}
	st := statusOf(t, dir)
	lines := turnLines(turn+1, st.NextSeq, false)
	mustAppend(t, dir, lines)
	if st := statusOf(t, dir); st.State != "live" || st.Pending != int64(len(lines)) {
		t.Fatalf("after the append: state %s, %d pending, want live with %d pending", st.State, st.Pending, len(lines))
	}

	// the upgraded harness publishes the successor (a temp file linked into place)
	tmp := filepath.Join(project, id, "session.migration.0123456789abcdef.jsonl.zstd.tmp")
	if err := os.WriteFile(tmp, readFile(t, successor), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(tmp, filepath.Join(project, id, "session.v3.jsonl.zstd")); err != nil {
		t.Fatal(err)
	}
	os.Remove(tmp)
	waitFor(t, "the live session to end on its successor", func() (bool, string) {
		st := genStatusOf(t, dir)
		return st.State != "live" && strings.HasSuffix(st.Location, "/session.v3.jsonl.zstd"), string(readFile(t, filepath.Join(dir, "status.json")))
	})
	if got := readFile(t, filepath.Join(dir, "events.jsonl")); string(got) != string(golden) {
		t.Error("events.jsonl is not served from the successor")
	}
	if after := readFile(t, v0); string(after) != string(before) {
		t.Error("the superseded v0 log was written")
	}
	// the pending events are in a sidecar beside the artifact, and status.json says where
	side, _ := filepath.Glob(filepath.Join(project, id, "*.pending-*"))
	if len(side) != 1 {
		t.Fatalf("sidecars %v, want one", side)
	}
	kept := textLines(readFile(t, side[0]))
	if len(kept) != len(lines) || !strings.Contains(kept[0], `"turn/start"`) {
		t.Errorf("the sidecar holds %d lines (%.80q…), want the %d pending events", len(kept), kept, len(lines))
	}
	st = statusOf(t, dir)
	if st.LastError == nil || !strings.Contains(st.LastError.Message, filepath.Base(side[0])) || st.lastErrorCode() != "CONFLICT" {
		t.Errorf("status.json lastError %+v, want the conflict naming the sidecar", st.LastError)
	}
}
