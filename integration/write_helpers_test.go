package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/harness"
)

// Helpers of the write-side tests: events in the append syntax, shell writes to append and ctl, status
// reads, and the harness's verdict on a store a test wrote.

// turnLines is one turn in the append syntax (no seq, no time), starting at seq base: a question, a tool
// call and its result, streamed chunks and an answer. open stops after the tool/call, leaving the turn open
// with the call's outcome unknown (the crash canaries).
func turnLines(turn int, base int64, open bool) []string {
	seq := base
	var out []string
	add := func(line string) {
		out = append(out, line)
		seq++
	}
	add(fmt.Sprintf(`{"type":"turn/start","data":{"turn":%d}}`, turn))
	add(fmt.Sprintf(`{"type":"step/start","data":{"turn":%d,"step":1}}`, turn))
	add(fmt.Sprintf(`{"type":"user/message","data":{"id":"u-%d","role":"user","content":[{"type":"text","text":"Run step %d of the build."}],"source":{"kind":"user"}},"surfaceOp":"append"}`, turn, turn))
	first := seq
	for k := 0; k < 4; k++ {
		add(fmt.Sprintf(`{"type":"assistant/chunk","data":{"turn":%d,"step":1,"chunk":{"type":"text-delta","index":0,"text":"word%d "}}}`, turn, k))
	}
	call := fmt.Sprintf("call-%d", turn)
	add(fmt.Sprintf(`{"type":"assistant/message","data":{"turn":%d,"step":1,"message":{"id":"a-%d-1","role":"assistant","content":[{"type":"text","text":"Running it."},{"type":"tool-call","id":"%s","name":"bash","arguments":"{\"command\":\"make test\"}"}],"source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-flash"}}},"sourceEventSeqs":[%d,%d,%d,%d],"surfaceOp":"append"}`,
		turn, turn, call, first, first+1, first+2, first+3))
	callSeq := seq
	add(fmt.Sprintf(`{"type":"tool/call","data":{"turn":%d,"step":1,"callId":"%s","name":"bash","arguments":"{\"command\":\"make test\"}"}}`, turn, call))
	if open {
		return out
	}
	add(fmt.Sprintf(`{"type":"tool/result","data":{"turn":%d,"step":1,"message":{"id":"t-%d","role":"user","content":[{"type":"tool-result","toolCallId":"%s","content":[{"type":"text","text":"FAIL pkg/b"}],"isError":false}],"source":{"kind":"tool","callId":"%s"}}},"sourceEventSeqs":[%d],"surfaceOp":"append"}`,
		turn, turn, call, call, callSeq))
	add(fmt.Sprintf(`{"type":"step/end","data":{"turn":%d,"step":1}}`, turn))
	add(fmt.Sprintf(`{"type":"step/start","data":{"turn":%d,"step":2}}`, turn))
	add(fmt.Sprintf(`{"type":"assistant/message","data":{"turn":%d,"step":2,"message":{"id":"a-%d-2","role":"assistant","content":[{"type":"text","text":"pkg/b fails."}],"source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-flash"}}},"surfaceOp":"append"}`, turn, turn))
	add(fmt.Sprintf(`{"type":"step/end","data":{"turn":%d,"step":2}}`, turn))
	add(fmt.Sprintf(`{"type":"turn/end","data":{"turn":%d,"reason":{"kind":"completed"}}}`, turn))
	return out
}

// writeConfig writes a dshfs.toml holding text into a fresh temp dir and returns its path.
func writeConfig(t *testing.T, format string, a ...any) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "dshfs.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(format, a...)), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// writeAppend writes lines to a session's append file the way a user does: `cat FILE >> append`.
func writeAppend(t *testing.T, sessDir string, lines []string) result {
	t.Helper()
	f := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return run(t, "", "sh", "-c", `cat "$0" >> "$1"`, f, filepath.Join(sessDir, "append"))
}

// mustAppend is writeAppend that must succeed.
func mustAppend(t *testing.T, sessDir string, lines []string) {
	t.Helper()
	if r := writeAppend(t, sessDir, lines); r.code != 0 {
		t.Fatalf("append to %s: exit %d %s\nstatus: %s", sessDir, r.code, r.stderr, readFile(t, filepath.Join(sessDir, "status.json")))
	}
}

// ctl writes one command to a ctl file with `echo CMD > ctl`.
func ctl(t *testing.T, ctlPath, cmd string) result {
	t.Helper()
	// bash, not sh: dash's echo reports every write error as "I/O error", bash prints the errno
	return run(t, "", "bash", "-c", `echo "$0" > "$1"`, cmd, ctlPath)
}

// mustCtl is ctl that must succeed.
func mustCtl(t *testing.T, ctlPath, cmd string) {
	t.Helper()
	if r := ctl(t, ctlPath, cmd); r.code != 0 {
		t.Fatalf("echo %s > %s: exit %d %s\nstatus: %s", cmd, ctlPath, r.code, r.stderr, readFile(t, filepath.Join(filepath.Dir(ctlPath), "status.json")))
	}
}

// wantErrno checks that a shell write failed with the message of errno (as sh prints it).
func wantErrno(t *testing.T, what string, r result, errno syscall.Errno) {
	t.Helper()
	if r.code == 0 || !strings.Contains(strings.ToLower(string(r.stderr)), strings.ToLower(errno.Error())) {
		t.Errorf("%s: exit %d, stderr %q; want %q", what, r.code, r.stderr, errno.Error())
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sessionStatus is the part of a session's status.json the write tests read.
type sessionStatus struct {
	State           string
	Events          int64
	NextSeq         int64
	DurableSeq      int64
	Pending         int64
	Balanced        bool
	OpenTurn        *int64
	RepairNeeded    bool
	UnknownOutcomes []struct {
		CallID        string
		CallSeq       int64
		ResolvedBySeq *int64
	}
	LastError   *commandResult
	LastCommand *commandResult
}

type commandResult struct {
	Command, Message string
	Errno, Code      *string
	Line             *int
}

func statusOf(t *testing.T, sessDir string) sessionStatus {
	t.Helper()
	var st sessionStatus
	b := readFile(t, filepath.Join(sessDir, "status.json"))
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("%s/status.json: %v\n%q", sessDir, err, b)
	}
	return st
}

// lastErrorCode is status.json's lastError code ("" when none).
func (s sessionStatus) lastErrorCode() string {
	if s.LastError == nil || s.LastError.Code == nil {
		return ""
	}
	return *s.LastError.Code
}

// harnessAgrees has the harness's own packages read every session of a JSONL store dshfs wrote: each opens,
// its stored log equals `dshfs cat --view events` and its inspect() equals `dshfs cat --inspect --view
// events`, line for line.
func harnessAgrees(t *testing.T, store string) {
	t.Helper()
	h := harness.Get(t)
	var ids []string
	for _, e := range listStore(t, store) {
		ids = append(ids, e.ID)
	}
	answers, err := h.Dump(store, ids...)
	if err != nil {
		t.Fatal(err)
	}
	if len(answers) != len(ids) {
		t.Fatalf("harness answered %d of %d sessions", len(answers), len(ids))
	}
	for i, a := range answers {
		id := ids[i]
		if a.Error != "" || a.StoredError != "" {
			t.Errorf("%q: the harness refuses the store dshfs wrote: %s %s", id, a.Error, a.StoredError)
			continue
		}
		stored := textLines(cli(t, 0, "cat", "--view", "events", store, id))
		inspected := textLines(cli(t, 0, "cat", "--inspect", "--view", "events", store, id))
		if d := diff(stored, a.Stored); d != "" {
			t.Errorf("%q: harness readFrom differs from dshfs cat --view events: %s", id, d)
		}
		if d := diff(inspected, a.Events); d != "" {
			t.Errorf("%q: harness inspect differs from dshfs cat --inspect --view events: %s", id, d)
		}
	}
}

// stopAndVerify unmounts (SIGTERM: live sessions are flushed), then has `dshfs check` and the harness's own
// packages read every session of the store the test wrote.
func stopAndVerify(t *testing.T, m *mountProc, store string) {
	t.Helper()
	m.stop(t)
	cli(t, 0, "check", store)
	harnessAgrees(t, store)
}

// killMount ends a mount with SIGKILL, as a crash would, and clears the dead mount it leaves behind. A
// process with a thread inside a request on its own mount cannot finish exiting until the mount is
// aborted, so the detach comes first when it does not end promptly.
func killMount(t *testing.T, m *mountProc) {
	t.Helper()
	_ = m.cmd.Process.Kill()
	select {
	case <-m.done:
	case <-time.After(2 * time.Second):
		_ = syscall.Unmount(m.dir, syscall.MNT_DETACH)
		<-m.done
	}
	if err := syscall.Unmount(m.dir, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
		t.Logf("clearing the killed mount %s: %v", m.dir, err)
	}
}

// textLines splits LF-terminated output into lines (nil for no output).
func textLines(b []byte) []string {
	var out []string
	for _, l := range lines(b) {
		out = append(out, strings.TrimSuffix(string(l), "\n"))
	}
	return out
}
