package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/fixtures"
	"github.com/klauspost/compress/zstd"
)

// fixtureSession is the first session of the generated zstd fixture store: its directory's name and
// the header line the harness wrote for it.
func fixtureSession(t *testing.T, root string) (project, id string, header []byte) {
	t.Helper()
	projects, err := os.ReadDir(root)
	if err != nil || len(projects) == 0 {
		t.Fatalf("fixture store %s: %v", root, err)
	}
	project = projects[0].Name()
	sessions, err := os.ReadDir(filepath.Join(root, project))
	if err != nil || len(sessions) == 0 {
		t.Fatalf("fixture project: %v", err)
	}
	id = sessions[0].Name()
	buf, err := os.ReadFile(filepath.Join(root, project, id, "session.jsonl.zstd"))
	if err != nil {
		t.Fatal(err)
	}
	text, err := jsonl.RawText(buf)
	if err != nil {
		t.Fatal(err)
	}
	return project, id, text[:bytes.IndexByte(text, '\n')+1]
}

// writeEmptyLineBomb writes the artifact at store/--srv-h--/nl-200: a header frame (the fixture's
// header line, its id and cwd made nl-200 and /srv/h) and one frame of 200 MiB of empty lines, made here
// a megabyte at a time — a few kilobytes on disk.
func writeEmptyLineBomb(t *testing.T, store string, header []byte) (text int) {
	t.Helper()
	var h map[string]json.RawMessage
	if err := json.Unmarshal(header, &h); err != nil {
		t.Fatal(err)
	}
	// the header line as the fixture has it, with only the values of id and cwd replaced
	line := strings.Replace(string(header), `"id":`+string(h["id"]), `"id":"nl-200"`, 1)
	line = strings.Replace(line, `"cwd":`+string(h["cwd"]), `"cwd":"/srv/h"`, 1)
	if line == string(header) || !strings.Contains(line, `"nl-200"`) || !strings.Contains(line, `"/srv/h"`) {
		t.Fatalf("could not rewrite the header %s", header)
	}
	var out bytes.Buffer
	out.Write(jsonl.EncodeFrame(nil, []byte(line)))
	w, err := zstd.NewWriter(&out, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithEncoderCRC(true),
		zstd.WithWindowSize(1<<20), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	block := bytes.Repeat([]byte{'\n'}, 1<<20)
	for range 200 {
		if _, err := w.Write(block); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if out.Len() > 64<<10 {
		t.Fatalf("the bomb is %d bytes", out.Len())
	}
	dir := filepath.Join(store, "--srv-h--", "nl-200")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "session.jsonl.zstd"), out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return len(line) + 200<<20
}

// TestEmptyLineBomb: a 6.5 KB-class zstd artifact of 200 MiB of empty lines is refused with its reason by
// `dshfs check` (exit 1) and by a writable mount's status.json, each process peaking at no more than
// 256 MiB (the kernel's own counts: the child's rusage, the mount's VmHWM); the mount stays up and serves
// the store's other sessions afterwards. raw.jsonl of it is not served through the mount (views.MaxRefusedRaw).
func TestEmptyLineBomb(t *testing.T) {
	t.Parallel()
	store := fixtures.CopyTree(t, fixtures.Path(t, "generated", "zstd"))
	_, other, header := fixtureSession(t, store)
	text := writeEmptyLineBomb(t, store, header)

	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	check := exec.CommandContext(ctx, dshfsBin(t), "check", store, "nl-200")
	out, err := check.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("dshfs check: %v, want exit 1; stdout %s", err, out)
	}
	if !strings.Contains(string(out), "nl-200\tcorrupt\tcorrupt Zstandard session log: complete frame contains a torn JSONL record") {
		t.Fatalf("dshfs check printed %q", out)
	}
	rss := check.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB on Linux
	t.Logf("dshfs check of the bomb: peak RSS %d KiB", rss)
	if rss > 256<<10 {
		t.Errorf("dshfs check peaked at %d KiB: more than 256 MiB", rss)
	}

	m := startMount(t, store)
	status := mustRun(t, "cat", filepath.Join(m.dir, "sessions", "nl-200", "status.json"))
	var st struct {
		State   string
		Refusal struct{ Kind, Message string }
	}
	if err := json.Unmarshal(status, &st); err != nil {
		t.Fatalf("status.json: %v: %s", err, status)
	}
	if st.State != "refused" || st.Refusal.Kind != "corrupt" || !strings.Contains(st.Refusal.Message, "torn JSONL record") {
		t.Fatalf("status.json of the bomb: %s", status)
	}
	t.Logf("after status.json: VmHWM %d KiB", vmHWM(t, m.cmd.Process.Pid))
	// a refused session's raw text is rendered in memory only up to views.MaxRefusedRaw: past it the
	// file is not listed (the store holds it), rather than costing the mount its size
	if _, err := os.Stat(filepath.Join(m.dir, "sessions", "nl-200", "raw.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("raw.jsonl of the bomb (%d bytes of text): %v, want it not served", text, err)
	}
	if m.exited() {
		t.Fatalf("the mount exited: %v; log:\n%s", m.err, m.log)
	}
	peak := vmHWM(t, m.cmd.Process.Pid)
	t.Logf("mount serving the bomb's status.json and raw.jsonl: VmHWM %d KiB", peak)
	if peak > 256<<10 {
		t.Errorf("the mount peaked at %d KiB (VmHWM): more than 256 MiB", peak)
	}
	events := mustRun(t, "cat", filepath.Join(m.dir, "sessions", other, "events.jsonl"))
	if len(lines(events)) == 0 {
		t.Fatalf("the other session %s shows no events after the bomb was read", other)
	}
}
