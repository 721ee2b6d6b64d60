package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/fixtures"
)

// genStatus is what these tests read of a session's status.json.
type genStatus struct {
	State    string
	Location string
	Revision string
	Refusal  *struct{ Kind, Message string }
}

func genStatusOf(t *testing.T, sessDir string) genStatus {
	t.Helper()
	var st genStatus
	b := readFile(t, filepath.Join(sessDir, "status.json"))
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("%s/status.json: %v\n%q", sessDir, err, b)
	}
	return st
}

// TestMountGenerations mounts what a 0.1.5 harness leaves after opening v0 sessions for writing — each v0
// log with its v3 successor beside it — with the kernel's caches and the polling safety net set to an
// hour, so that only inotify can tell the mount of a change:
//
//   - every session is served from its v3 file, never from its v0 log: events.jsonl holds exactly what the
//     harness's published codec restores (fixtures/generations/golden); store/ serves both files byte for
//     byte;
//   - a v3 successor linked in beside a session the mount serves from its v0 log switches it to the v3
//     file at once, and tail -f of a v3 session's events.jsonl follows the harness's appends to it;
//   - the harness's session.lock appearing and being opened for writing changes nothing.
func TestMountGenerations(t *testing.T) {
	t.Parallel()
	store := fixtures.CopyTree(t, fixtures.Path(t, "generations", "beside", "zstd"))
	project := filepath.Join(store, "--home-dev-projects-acme-api--")
	const flipID = "main-session-cdf51971-aa21-4a3b-9b27-5084d6c99886"
	const servedID = "main-session-fa821f4b-98fd-46aa-86bc-0955a88ef4b8"
	golden := func(id string) []byte {
		b := readFile(t, fixtures.Path(t, "generations", "golden", "v3-zstd", id+".jsonl"))
		return b[bytes.IndexByte(b, '\n')+1:]
	}
	// one session back to v0 alone: its successor is kept aside and published during the mount
	successor := filepath.Join(t.TempDir(), "session.v3.jsonl.zstd")
	if err := os.Rename(filepath.Join(project, flipID, "session.v3.jsonl.zstd"), successor); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, "[fuse]\nrefresh_interval = \"1h\"\nattr_timeout = \"1h\"\nentry_timeout = \"1h\"\n")
	m := startMount(t, "--read-only", "--config", cfg, store)
	sessions := filepath.Join(m.dir, "sessions")

	ids, err := os.ReadDir(sessions)
	if err != nil || len(ids) != 5 {
		t.Fatalf("sessions/: %d entries, %v", len(ids), err)
	}
	for _, d := range ids {
		dir := filepath.Join(sessions, d.Name())
		st := genStatusOf(t, dir)
		if d.Name() == flipID {
			if st.State != "cold" || !strings.HasSuffix(st.Location, "/session.jsonl.zstd") {
				t.Fatalf("the v0-only session: %+v", st)
			}
			continue
		}
		if st.State == "refused" || !strings.HasSuffix(st.Location, "/session.v3.jsonl.zstd") || st.Refusal != nil {
			t.Fatalf("%s: %+v", d.Name(), st)
		}
		if got := readFile(t, filepath.Join(dir, "events.jsonl")); !bytes.Equal(got, golden(d.Name())) {
			t.Fatalf("%s: events.jsonl is not what the codec restores from the v3 file", d.Name())
		}
		if raw := readFile(t, filepath.Join(dir, "raw.jsonl")); !bytes.HasPrefix(raw, []byte(`{"type":"session","version":3,`)) {
			t.Fatalf("%s: raw.jsonl %.80q", d.Name(), raw)
		}
	}
	// store/ carries both generations of a session, byte for byte
	for _, name := range []string{"session.jsonl.zstd", "session.v3.jsonl.zstd"} {
		rel := filepath.Join("--home-dev-projects-acme-api--", servedID, name)
		mustRun(t, "cmp", filepath.Join(m.dir, "store", rel), filepath.Join(store, rel))
	}

	// the harness publishes the v3 successor beside the served v0 log (a temp file linked into place)
	flipDir := filepath.Join(sessions, flipID)
	if n := len(lines(readFile(t, filepath.Join(flipDir, "events.jsonl")))); n == 0 {
		t.Fatal("the v0-only session serves no events")
	}
	tmp := filepath.Join(project, flipID, "session.migration.0123456789abcdef.jsonl.zstd.tmp")
	if err := os.WriteFile(tmp, readFile(t, successor), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(tmp, filepath.Join(project, flipID, "session.v3.jsonl.zstd")); err != nil {
		t.Fatal(err)
	}
	os.Remove(tmp)
	waitFor(t, "the session to follow its v3 successor", func() (bool, string) {
		st := genStatusOf(t, flipDir)
		return st.State != "refused" && strings.HasSuffix(st.Location, "/session.v3.jsonl.zstd"), fmt.Sprintf("%+v", st)
	})
	if got := readFile(t, filepath.Join(flipDir, "events.jsonl")); !bytes.Equal(got, golden(flipID)) {
		t.Fatal("events.jsonl is not served from the v3 successor")
	}

	// the harness appends to a v3 file (one more frame): tail -f of its events.jsonl prints the event
	servedDir := filepath.Join(sessions, servedID)
	before := genStatusOf(t, servedDir)
	follow := startTail(t, filepath.Join(servedDir, "events.jsonl"))
	line := `{"type":"turn/start","seq":26,"time":1778573799999,"data":{"turn":3}}`
	f, err := os.OpenFile(filepath.Join(project, servedID, "session.v3.jsonl.zstd"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(jsonl.EncodeFrame(nil, []byte(line+"\n"))); err != nil {
		t.Fatal(err)
	}
	f.Close()
	follow.waitFor(t, line)
	follow.stop()
	if after := genStatusOf(t, servedDir); after.Revision == before.Revision || after.State == "refused" {
		t.Fatalf("status after the append: %+v (before %+v)", after, before)
	}
	// the harness's write lease: created, held and released beside the artifact
	lockBefore := readFile(t, filepath.Join(servedDir, "status.json"))
	lock, err := os.OpenFile(filepath.Join(project, servedID, "session.lock"), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	lock.Close()
	if got := readFile(t, filepath.Join(servedDir, "status.json")); !bytes.Equal(got, lockBefore) {
		t.Fatalf("session.lock changed the session's status:\n%s\n%s", lockBefore, got)
	}
	if ls := mustRun(t, "ls", filepath.Join(m.dir, "store", "--home-dev-projects-acme-api--", servedID)); strings.Contains(string(ls), "session.lock") {
		t.Fatalf("store/ lists the lease: %s", ls)
	}
	m.stop(t)
}
