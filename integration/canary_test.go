package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The crash-resume-replay canaries of ../shared/CANARIES.md that the live writer serves (1–6, 11), each on
// a real mount driven with the shell, crashes being SIGKILLs of the dshfs process. Every store a canary
// writes is then read by the harness's own packages.

// newSessionOnMount creates a session with mkdir (its name is its id: only safe characters) and returns
// its directory.
func newSessionOnMount(t *testing.T, mnt, id string) string {
	t.Helper()
	dir := filepath.Join(mnt, "sessions", id)
	mustRun(t, "mkdir", dir)
	return dir
}

// emptyStore is a fresh store directory of the given encoding (a root holding no session takes the
// configured writer.compression).
func emptyStore(t *testing.T, compression string) (store, cfg string) {
	t.Helper()
	store = filepath.Join(t.TempDir(), "sessions")
	if err := os.Mkdir(store, 0o700); err != nil { // a STORE named on the command line must exist
		t.Fatal(err)
	}
	return store, writeConfig(t, "[writer]\ncompression = %q\nbatch_window = \"50ms\"\n", compression)
}

func eachCompression(t *testing.T, fn func(t *testing.T, store, cfg string)) {
	for _, c := range []string{"none", "zstd"} {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			store, cfg := emptyStore(t, c)
			fn(t, store, cfg)
		})
	}
}

// TestCanary1CleanCheckpoint: a complete turn appended and flushed survives an unmount and a remount
// unchanged: header, seqs, events and surface.
func TestCanary1CleanCheckpoint(t *testing.T) {
	t.Parallel()
	eachCompression(t, func(t *testing.T, store, cfg string) {
		m := startMount(t, "--config", cfg, store)
		s := newSessionOnMount(t, m.dir, "clean")
		turn1 := turnLines(1, 0, false)
		mustAppend(t, s, turn1[:5]) // two writes: the batch window may cut anywhere
		mustAppend(t, s, turn1[5:])
		mustAppend(t, s, turnLines(2, int64(len(turn1)), false))
		mustCtl(t, filepath.Join(s, "ctl"), "flush")
		st := statusOf(t, s)
		if st.Pending != 0 || st.DurableSeq != st.NextSeq-1 || st.Events != int64(2*len(turn1)) || !st.Balanced || st.State != "live" {
			t.Fatalf("after flush: %+v", st)
		}
		before := map[string][]byte{}
		for _, f := range []string{"header.json", "events.jsonl", "surface.jsonl", "messages.jsonl"} {
			before[f] = readFile(t, filepath.Join(s, f))
		}
		m.stop(t)
		m2 := startMount(t, "--config", cfg, store)
		s2 := filepath.Join(m2.dir, "sessions", "clean")
		for f, want := range before {
			if got := readFile(t, filepath.Join(s2, f)); string(got) != string(want) {
				t.Errorf("%s changed across the remount:\n got %s\nwant %s", f, got, want)
			}
		}
		if st := statusOf(t, s2); st.State != "cold" || st.Events != int64(2*len(turn1)) {
			t.Errorf("after remount: %+v", st)
		}
		stopAndVerify(t, m2, store)
	})
}

// crashMidTurn appends a complete turn and an open one whose tool call has no result, flushes, and kills
// the mount; it returns the store and the seq of the unanswered tool/call.
func crashMidTurn(t *testing.T, store, cfg string) (callSeq int64, events []byte) {
	t.Helper()
	m := startMount(t, "--config", cfg, store)
	s := newSessionOnMount(t, m.dir, "crashed")
	turn1 := turnLines(1, 0, false)
	mustAppend(t, s, turn1)
	open := turnLines(2, int64(len(turn1)), true)
	mustAppend(t, s, open)
	mustCtl(t, filepath.Join(s, "ctl"), "flush")
	events = readFile(t, filepath.Join(s, "events.jsonl"))
	killMount(t, m)
	return int64(len(turn1) + len(open) - 1), events
}

// TestCanary2CrashMidTurn: after a crash mid-turn, every event of the interrupted turn is kept and resume
// appends the harness's closers, ending in turn/end {interrupted}, then session/end-seed.
func TestCanary2CrashMidTurn(t *testing.T) {
	t.Parallel()
	eachCompression(t, func(t *testing.T, store, cfg string) {
		_, before := crashMidTurn(t, store, cfg)
		m := startMount(t, "--config", cfg, store)
		s := filepath.Join(m.dir, "sessions", "crashed")
		if got := readFile(t, filepath.Join(s, "events.jsonl")); string(got) != string(before) {
			t.Fatalf("the crash lost or changed events:\n got %s\nwant %s", got, before)
		}
		st := statusOf(t, s)
		if !st.RepairNeeded || st.OpenTurn == nil || *st.OpenTurn != 2 {
			t.Fatalf("before resume: %+v", st)
		}
		// an append must not close the crashed turn implicitly
		wantErrno(t, "append to a crashed session", writeAppend(t, s, []string{`{"type":"plugin/x","data":{},"ignorable":true}`}), syscall.EBUSY)
		if code := statusOf(t, s).lastErrorCode(); code != "OPEN_TURN" {
			t.Errorf("lastError code %q, want OPEN_TURN", code)
		}
		mustCtl(t, filepath.Join(s, "ctl"), "resume")
		after := readFile(t, filepath.Join(s, "events.jsonl"))
		if !strings.HasPrefix(string(after), string(before)) {
			t.Fatal("resume changed the events before the repair")
		}
		var types, reasons []string
		for _, l := range lines(after[len(before):]) {
			var e struct {
				Type string
				Data struct {
					Reason struct{ Kind string }
					Error  struct{ Code string }
				}
			}
			if err := json.Unmarshal(l, &e); err != nil {
				t.Fatal(err)
			}
			types = append(types, e.Type)
			reasons = append(reasons, e.Data.Reason.Kind+e.Data.Error.Code)
		}
		want := []string{"tool/result", "step/end", "turn/end", "session/end-seed"}
		if strings.Join(types, " ") != strings.Join(want, " ") || reasons[0] != "TOOL_OUTCOME_UNKNOWN" || reasons[2] != "interrupted" {
			t.Errorf("resume appended %v %v, want %v with TOOL_OUTCOME_UNKNOWN and interrupted", types, reasons, want)
		}
		if st := statusOf(t, s); st.RepairNeeded || !st.Balanced || st.State != "live" {
			t.Errorf("after resume: %+v", st)
		}
		stopAndVerify(t, m, store)
	})
}

// TestCanary3UnknownToolOutcome: a tool call flushed without a result is listed as an unknown outcome, and
// after resume it has a TOOL_OUTCOME_UNKNOWN result citing the call; nothing re-runs it.
func TestCanary3UnknownToolOutcome(t *testing.T) {
	t.Parallel()
	store, cfg := emptyStore(t, "zstd")
	callSeq, _ := crashMidTurn(t, store, cfg)
	m := startMount(t, "--config", cfg, store)
	s := filepath.Join(m.dir, "sessions", "crashed")
	st := statusOf(t, s)
	if len(st.UnknownOutcomes) != 1 || st.UnknownOutcomes[0].CallSeq != callSeq || st.UnknownOutcomes[0].ResolvedBySeq != nil {
		t.Fatalf("unknownOutcomes before resume: %+v", st.UnknownOutcomes)
	}
	mustCtl(t, filepath.Join(s, "ctl"), "resume")
	st = statusOf(t, s)
	if len(st.UnknownOutcomes) != 1 || st.UnknownOutcomes[0].ResolvedBySeq == nil {
		t.Fatalf("unknownOutcomes after resume: %+v", st.UnknownOutcomes)
	}
	res := *st.UnknownOutcomes[0].ResolvedBySeq
	var result struct {
		SourceEventSeqs []int64
		Data            struct{ Error struct{ Code string } }
	}
	if err := json.Unmarshal(readFile(t, filepath.Join(s, "events", fmt.Sprintf("%010d.tool~002Fresult.json", res))), &result); err != nil {
		t.Fatal(err)
	}
	if result.Data.Error.Code != "TOOL_OUTCOME_UNKNOWN" || len(result.SourceEventSeqs) != 1 || result.SourceEventSeqs[0] != callSeq {
		t.Errorf("repair result %+v does not cite call seq %d as TOOL_OUTCOME_UNKNOWN", result, callSeq)
	}
	// nothing re-ran the call: the log holds exactly one tool/call for it
	if n := strings.Count(string(readFile(t, filepath.Join(s, "events.jsonl"))), `"type":"tool/call"`); n != 2 {
		t.Errorf("%d tool/call events, want the 2 the test wrote", n)
	}
	m.stop(t)
	harnessAgrees(t, store)
}

// TestCanary4LiveWriter: a turn held open by a live writer is never closed by anyone else: resume through
// the same mount, a second mount, and the CLI all get EBUSY while reads work; once the holder is killed the
// lock is free.
func TestCanary4LiveWriter(t *testing.T) {
	t.Parallel()
	store, cfg := emptyStore(t, "zstd")
	a := startMount(t, "--config", cfg, store)
	s := newSessionOnMount(t, a.dir, "live")
	mustAppend(t, s, turnLines(1, 0, true))
	mustCtl(t, filepath.Join(s, "ctl"), "flush")
	events := readFile(t, filepath.Join(s, "events.jsonl"))

	wantErrno(t, "resume of this mount's own open turn", ctl(t, filepath.Join(s, "ctl"), "resume"), syscall.EBUSY)
	if code := statusOf(t, s).lastErrorCode(); code != "LIVE_TURN" {
		t.Errorf("lastError code %q, want LIVE_TURN", code)
	}

	b := startMount(t, "--config", cfg, store)
	sb := filepath.Join(b.dir, "sessions", "live")
	if got := readFile(t, filepath.Join(sb, "events.jsonl")); string(got) != string(events) {
		t.Errorf("a second mount reads other events")
	}
	wantErrno(t, "resume from a second mount", ctl(t, filepath.Join(sb, "ctl"), "resume"), syscall.EBUSY)
	wantErrno(t, "append from a second mount", writeAppend(t, sb, []string{`{"type":"plugin/x","data":{},"ignorable":true}`}), syscall.EBUSY)
	st := statusOf(t, sb)
	if st.LastError == nil || !strings.Contains(st.LastError.Message, fmt.Sprintf("pid %d", a.cmd.Process.Pid)) {
		t.Errorf("the second mount's lastError does not name the holder (pid %d): %+v", a.cmd.Process.Pid, st.LastError)
	}
	for _, args := range [][]string{{"resume", store, "live"}, {"fork", store, "live"}} {
		r := run(t, "", dshfsBin(t), args...)
		if r.code != 1 || !strings.Contains(string(r.stderr), "pid") {
			t.Errorf("dshfs %s while live in a mount: exit %d %s", args[0], r.code, r.stderr)
		}
	}
	r := run(t, "", "sh", "-c", `echo '{"type":"plugin/x","data":{},"ignorable":true}' | "$0" append "$1" live`, dshfsBin(t), store)
	if r.code != 1 {
		t.Errorf("dshfs append while live in a mount: exit %d %s", r.code, r.stderr)
	}
	if got := readFile(t, filepath.Join(s, "events.jsonl")); string(got) != string(events) {
		t.Errorf("the log changed under its live writer")
	}

	killMount(t, a)
	mustCtl(t, filepath.Join(sb, "ctl"), "resume") // the kernel dropped the dead holder's lock
	if st := statusOf(t, sb); !st.Balanced || st.State != "live" {
		t.Errorf("after the holder died and resume: %+v", st)
	}
	b.stop(t)
	harnessAgrees(t, store)
}

// TestCanary5StableFork: a fork at a boundary after a turn/end gives a child that is the parent's prefix
// plus a session/end-seed, with parentSession and seedLength; later appends to either leave the other alone.
func TestCanary5StableFork(t *testing.T) {
	t.Parallel()
	eachCompression(t, func(t *testing.T, store, cfg string) {
		m := startMount(t, "--config", cfg, store)
		s := newSessionOnMount(t, m.dir, "parent")
		turn1 := turnLines(1, 0, false)
		mustAppend(t, s, turn1)
		mustAppend(t, s, turnLines(2, int64(len(turn1)), false)) // pending: the fork must flush it first
		boundary := len(turn1) - 1                               // the first turn/end
		mustCtl(t, filepath.Join(s, "ctl"), fmt.Sprintf("fork %d child", boundary))
		c := filepath.Join(m.dir, "sessions", "child")
		var h struct {
			ParentSession string
			SeedLength    int
			Cwd           *string
		}
		if err := json.Unmarshal(readFile(t, filepath.Join(c, "header.json")), &h); err != nil {
			t.Fatal(err)
		}
		if h.ParentSession != "parent" || h.SeedLength != boundary+1 {
			t.Errorf("child header %+v, want parentSession parent, seedLength %d", h, boundary+1)
		}
		parentEvents := lines(readFile(t, filepath.Join(s, "events.jsonl")))
		childEvents := lines(readFile(t, filepath.Join(c, "events.jsonl")))
		if len(childEvents) != boundary+2 {
			t.Fatalf("child has %d events, want %d", len(childEvents), boundary+2)
		}
		for i := 0; i <= boundary; i++ {
			if string(childEvents[i]) != string(parentEvents[i]) {
				t.Fatalf("child event %d differs from the parent's", i)
			}
		}
		if !strings.Contains(string(childEvents[boundary+1]), `"type":"session/end-seed"`) {
			t.Errorf("child's last event is not session/end-seed: %s", childEvents[boundary+1])
		}
		if st := statusOf(t, s); st.Pending != 0 {
			t.Errorf("the parent was not flushed before the fork: %+v", st)
		}
		if got := mustRun(t, "ls", filepath.Join(s, "forks")); strings.TrimSpace(string(got)) != "child" {
			t.Errorf("forks/ lists %q", got)
		}
		// appends to either side leave the other unchanged
		pBefore, cBefore := readFile(t, filepath.Join(s, "events.jsonl")), readFile(t, filepath.Join(c, "events.jsonl"))
		mustAppend(t, c, turnLines(2, int64(boundary+2), false))
		mustAppend(t, s, turnLines(3, int64(len(parentEvents)), false))
		mustCtl(t, filepath.Join(m.dir, "ctl"), "flush")
		if got := readFile(t, filepath.Join(s, "events.jsonl")); !strings.HasPrefix(string(got), string(pBefore)) || len(lines(got)) != len(parentEvents)+len(turn1) {
			t.Errorf("the parent changed beyond its own append")
		}
		if got := readFile(t, filepath.Join(c, "events.jsonl")); !strings.HasPrefix(string(got), string(cBefore)) || len(lines(got)) != boundary+2+len(turn1) {
			t.Errorf("the child changed beyond its own append")
		}
		stopAndVerify(t, m, store)
	})
}

// TestCanary6UnsafeFork: a fork at a boundary inside an open turn fails with EINVAL and the harness's
// OPEN_TURN text in status.json; no child is created, nothing is clipped.
func TestCanary6UnsafeFork(t *testing.T) {
	t.Parallel()
	store, cfg := emptyStore(t, "zstd")
	m := startMount(t, "--config", cfg, store)
	s := newSessionOnMount(t, m.dir, "parent")
	turn1 := turnLines(1, 0, false)
	mustAppend(t, s, turn1)
	mustAppend(t, s, turnLines(2, int64(len(turn1)), true))
	boundary := len(turn1) + 2 // inside turn 2
	wantErrno(t, "fork inside an open turn", ctl(t, filepath.Join(s, "ctl"), fmt.Sprintf("fork %d unsafe-child", boundary)), syscall.EINVAL)
	st := statusOf(t, s)
	want := fmt.Sprintf(`fork boundary %d in session "parent" ends inside open turn 2`, boundary)
	if st.lastErrorCode() != "OPEN_TURN" || st.LastError.Message != want {
		t.Errorf("lastError %+v, want OPEN_TURN %q", st.LastError, want)
	}
	wantErrno(t, "fork with the default boundary (the last seq, inside the open turn)", ctl(t, filepath.Join(s, "ctl"), "fork"), syscall.EINVAL)
	if _, err := os.Stat(filepath.Join(m.dir, "sessions", "unsafe-child")); !os.IsNotExist(err) {
		t.Errorf("a child exists after a refused fork: %v", err)
	}
	if n := len(listStore(t, store)); n != 1 {
		t.Errorf("the store holds %d sessions after refused forks, want 1", n)
	}
}

// TestCanary11SpillAfterFork: a fork inherits spill locators, not files: the child's spill/ lists the
// parent's locator present while the file exists and missing once it is gone; nothing is copied.
func TestCanary11SpillAfterFork(t *testing.T) {
	t.Parallel()
	_, root, spillRoot := spillDirs(t)
	file := filepath.Join(spillRoot, "out.txt")
	content := strings.Repeat("build output line\n", 200)
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	writeSpillSession(t, root, "spilled", []string{spillNotice("build output line", len(content), file)})
	m := startMount(t, "--config", writeConfig(t, "[spill]\nroots = [%q]\n", spillRoot), root)
	mustCtl(t, filepath.Join(m.dir, "sessions", "spilled", "ctl"), "fork 7 child")
	c := filepath.Join(m.dir, "sessions", "child")
	type row struct {
		Locator, Status string
		File            *string
	}
	index := func() []row {
		var rows []row
		if err := json.Unmarshal(readFile(t, filepath.Join(c, "spill", "index.json")), &rows); err != nil {
			t.Fatal(err)
		}
		return rows
	}
	rows := index()
	if len(rows) != 1 || rows[0].Locator != file || rows[0].Status != "present" || rows[0].File == nil {
		t.Fatalf("child spill index %+v, want the parent's locator present", rows)
	}
	if got := readFile(t, filepath.Join(c, *rows[0].File)); string(got) != content {
		t.Errorf("the child's spill file does not serve the original")
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if rows := index(); len(rows) != 1 || rows[0].Status != "missing" {
		t.Errorf("after deleting the spill file: %+v, want missing", rows)
	}
	// the artifact and the harness's lease file (session.lock), nothing else
	if matches, _ := filepath.Glob(filepath.Join(root, "*", "child", "*")); len(matches) != 2 || filepath.Base(matches[1]) != "session.lock" {
		t.Errorf("the child's directory holds %v: a fork copies no spill data", matches)
	}
}
