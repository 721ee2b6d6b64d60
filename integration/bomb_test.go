package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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

// runPeak runs a program and returns its stdout, exit status and peak resident set in KiB. The peak is the
// program's own: its VmHWM, read while it runs and kept from its last reading. The rusage of the finished
// child would not do — a child the Go runtime starts shares the test's memory until it execs, and Linux
// carries that memory's high-water mark into the child's ru_maxrss (a busy race-detector test process
// showed a 15 MB check as 950 MB).
func runPeak(t *testing.T, name string, args ...string) (stdout []byte, code int, peakKiB int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(status); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
					if n, err := strconv.Atoi(f[1]); err == nil {
						peakKiB = max(peakKiB, n)
					}
				}
			}
		}
		select {
		case err := <-done:
			var ee *exec.ExitError
			switch {
			case err == nil:
			case errors.As(err, &ee):
				code = ee.ExitCode()
			default:
				t.Fatalf("%s: %v", name, err)
			}
			if peakKiB == 0 {
				t.Fatalf("%s: no VmHWM was read while it ran", name)
			}
			return out.Bytes(), code, peakKiB
		case <-tick.C:
		}
	}
}

// TestEmptyLineBomb: a 6.5 KB-class zstd artifact of 200 MiB of empty lines is refused with its reason by
// `dshfs check` (exit 1) and by a writable mount's status.json, each process peaking at no more than
// 256 MiB (the kernel's own count, VmHWM, of each); the mount stays up and serves
// the store's other sessions afterwards. raw.jsonl of it is not served through the mount (views.MaxRefusedRaw).
func TestEmptyLineBomb(t *testing.T) {
	t.Parallel()
	store := fixtures.CopyTree(t, fixtures.Path(t, "generated", "zstd"))
	_, other, header := fixtureSession(t, store)
	text := writeEmptyLineBomb(t, store, header)

	out, code, rss := runPeak(t, dshfsBin(t), "check", store, "nl-200")
	if code != 1 {
		t.Fatalf("dshfs check: exit %d, want 1; stdout %s", code, out)
	}
	if !strings.Contains(string(out), "nl-200\tcorrupt\tcorrupt Zstandard session log: complete frame contains a torn JSONL record") {
		t.Fatalf("dshfs check printed %q", out)
	}
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

// TestSessionBudgetRefusal: with writer.max_session_bytes below what a session's events cost, the session
// is refused as too-large — `dshfs check` prints the kind and exits 1, status.json carries it — while a
// store within the default budget checks clean.
func TestSessionBudgetRefusal(t *testing.T) {
	t.Parallel()
	store := fixtures.CopyTree(t, fixtures.Path(t, "generated", "zstd"))
	_, id, _ := fixtureSession(t, store)
	cli(t, 0, "check", store, id)
	cfg := writeConfig(t, "[writer]\nmax_session_bytes = \"4KiB\"\n")
	out := string(cli(t, 1, "check", "--config", cfg, store, id))
	if !strings.Contains(out, id+"\ttoo-large\tsession too large to load: ") || !strings.Contains(out, "over max_session_bytes (4096)") {
		t.Fatalf("dshfs check with a 4 KiB budget printed %q", out)
	}
	m := startMount(t, "--read-only", "--config", cfg, store)
	var st struct {
		State   string
		Refusal struct{ Kind, Message string }
	}
	status := readFile(t, filepath.Join(m.dir, "sessions", id, "status.json"))
	if err := json.Unmarshal(status, &st); err != nil || st.State != "refused" || st.Refusal.Kind != "too-large" {
		t.Fatalf("status.json with a 4 KiB budget: %s (%v)", status, err)
	}
}
