package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dshfs/dshfs/spill"
)

// Write-side tests beyond the canaries: bad input, a foreign writer, the writer lock between processes,
// awkward ids, and what a writable mount looks like to tools that only read.

// seqsOf returns the seq of every line of an events.jsonl.
func seqsOf(t *testing.T, events []byte) []int64 {
	t.Helper()
	var out []int64
	for _, l := range lines(events) {
		var e struct{ Seq int64 }
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e.Seq)
	}
	return out
}

// contiguous reports whether seqs are 0..n-1.
func contiguous(seqs []int64) bool {
	for i, s := range seqs {
		if s != int64(i) {
			return false
		}
	}
	return true
}

// TestWriteBadInput: every kind of bad input is refused with EINVAL (EEXIST for an existing id), its reason
// and line in status.json, and the log unchanged; nothing of a rejected request lands, and the handle that
// got it refuses further writes.
func TestWriteBadInput(t *testing.T) {
	t.Parallel()
	store, _ := emptyStore(t, "zstd")
	cfg := writeConfig(t, "[writer]\nmax_line_bytes = \"4KiB\"\n")
	m := startMount(t, "--config", cfg, store)
	s := newSessionOnMount(t, m.dir, "s")
	turn := turnLines(1, 0, false)
	mustAppend(t, s, turn)
	mustCtl(t, filepath.Join(s, "ctl"), "flush")
	events := readFile(t, filepath.Join(s, "events.jsonl"))
	next := len(turn)
	user := `{"id":"u-x","role":"user","content":[{"type":"text","text":"x"}],"source":{"kind":"user"}}`
	good := `{"type":"plugin/note","data":{},"ignorable":true}`
	for _, c := range []struct {
		what  string
		lines []string
		line  int    // the line status.json must name
		in    string // a fragment of the reason
	}{
		{"malformed JSON", []string{`{"type":"plugin/x","data":`}, 1, "not lossless JSON"},
		{"an extra envelope key", []string{`{"type":"plugin/x","data":{},"ignorable":true,"extra":1}`}, 1, `unknown key "extra"`},
		{"negative zero", []string{`{"type":"plugin/x","data":{"n":-0},"ignorable":true}`}, 1, "negative zero"},
		{"a duplicate key", []string{`{"type":"plugin/x","data":{},"data":{},"ignorable":true}`}, 1, "duplicate key"},
		{"invalid UTF-8", []string{"{\"type\":\"plugin/x\",\"data\":\"\xff\",\"ignorable\":true}"}, 1, "invalid UTF-8"},
		{"a stale seq", []string{`{"type":"plugin/x","seq":0,"data":{},"ignorable":true}`}, 1, "stale or wrong seq 0"},
		{"a seq ahead", []string{fmt.Sprintf(`{"type":"plugin/x","seq":%d,"data":{},"ignorable":true}`, next+5)}, 1, "stale or wrong seq"},
		{"surfaceOp on a non-surface type", []string{`{"type":"step/start","data":{"turn":1,"step":9},"surfaceOp":"append"}`}, 1, "surfaceOp"},
		{"a replace of a seq not on the surface", []string{`{"type":"user/message","data":` + user + `,"surfaceOp":{"op":"replace","start":0,"end":0}}`}, 1, "not found in surface"},
		{"an unknown type not marked ignorable", []string{`{"type":"plugin/x","data":{}}`}, 1, `unknown event type "plugin/x"; known types: agent-preset/selected, `},
		{"a turn/end of a turn not open", []string{`{"type":"turn/end","data":{"turn":9,"reason":{"kind":"completed"}}}`}, 1,
			`invariant violated by "@deepseek-ai/dsh-session": turn/end 9 does not match open turn null`},
		{"a missing data", []string{`{"type":"plugin/x","ignorable":true}`}, 1, `"data" is required`},
		{"a line over max_line_bytes", []string{`{"type":"plugin/x","data":"` + strings.Repeat("a", 5000) + `","ignorable":true}`}, 1, "max_line_bytes"},
		{"a bad second line (the first must not land either)", []string{good, `{"type":"plugin/x"`}, 2, "not lossless JSON"},
	} {
		r := writeAppend(t, s, c.lines)
		wantErrno(t, c.what, r, syscall.EINVAL)
		st := statusOf(t, s)
		if st.LastError == nil || st.LastError.Line == nil || *st.LastError.Line != c.line || !strings.Contains(st.LastError.Message, c.in) {
			t.Errorf("%s: lastError %+v, want line %d and %q", c.what, st.LastError, c.line, c.in)
		}
		if got := readFile(t, filepath.Join(s, "events.jsonl")); string(got) != string(events) {
			t.Fatalf("%s: the log changed", c.what)
		}
	}
	// after a rejected request the same descriptor refuses everything, so a split write's tail cannot land
	r := run(t, "", "bash", "-c", `exec 3>>"$0"; echo '{"bad' >&3; echo "$1" >&3`, filepath.Join(s, "append"), good)
	if r.code == 0 || strings.Count(strings.ToLower(string(r.stderr)), "invalid argument") != 2 {
		t.Errorf("writes after a rejected one on the same handle: exit %d %q", r.code, r.stderr)
	}
	// a line without its newline that outgrows max_line_bytes is refused as it arrives
	r = run(t, "", "bash", "-c", `head -c 10000 /dev/zero | tr '\0' 'a' > "$0"`, filepath.Join(s, "append"))
	if st := statusOf(t, s); !strings.Contains(strings.ToLower(string(r.stderr)), "invalid argument") || st.LastError == nil || !strings.Contains(st.LastError.Message, "max_line_bytes") {
		t.Errorf("an unterminated line over the limit: %q, lastError %+v", r.stderr, st.LastError)
	}
	// a partial line at close is discarded and reported
	run(t, "", "bash", "-c", `printf '%s' "$1" > "$0"`, filepath.Join(s, "append"), good)
	if st := statusOf(t, s); st.LastError == nil || !strings.Contains(st.LastError.Message, "partial line") {
		t.Errorf("a partial line at close: lastError %+v", st.LastError)
	}
	if got := readFile(t, filepath.Join(s, "events.jsonl")); string(got) != string(events) {
		t.Fatal("rejected writes changed the log")
	}
	// ids: empty, existing, unencodable, too long
	wantErrno(t, "mkdir of an existing session", run(t, "", "mkdir", s), syscall.EEXIST)
	wantErrno(t, "mkdir of the empty id", run(t, "", "mkdir", filepath.Join(m.dir, "sessions", "~")), syscall.EINVAL)
	wantErrno(t, "mkdir of a name that is not an encoded id", run(t, "", "mkdir", filepath.Join(m.dir, "sessions", "a b")), syscall.EINVAL)
	root := filepath.Join(m.dir, "ctl")
	wantErrno(t, "create of an existing id", ctl(t, root, "create s"), syscall.EEXIST)
	wantErrno(t, "create with a relative cwd", ctl(t, root, "create t cwd=rel/dir"), syscall.EINVAL)
	wantErrno(t, "create of an id over the name limit", ctl(t, root, "create "+strings.Repeat("~", 60)), syscall.EINVAL)
	wantErrno(t, "an unknown store command", ctl(t, root, "explode"), syscall.EINVAL)
	wantErrno(t, "fork to an existing child", ctl(t, filepath.Join(s, "ctl"), "fork 3 s"), syscall.EEXIST)
	wantErrno(t, "fork at a non-number", ctl(t, filepath.Join(s, "ctl"), "fork x1 c"), syscall.EINVAL)
	wantErrno(t, "fork past the end", ctl(t, filepath.Join(s, "ctl"), fmt.Sprintf("fork %d c", next)), syscall.EINVAL)
	st := statusOf(t, s)
	want := fmt.Sprintf(`fork boundary %d does not exist in session "s" (last seq: %d)`, next, next-1)
	if st.lastErrorCode() != "INVALID_BOUNDARY" || st.LastError.Message != want {
		t.Errorf("fork past the end: lastError %+v, want %q", st.LastError, want)
	}
	var storeStatus struct{ LastError *commandResult }
	if err := json.Unmarshal(readFile(t, filepath.Join(m.dir, "status.json")), &storeStatus); err != nil {
		t.Fatal(err)
	}
	if storeStatus.LastError == nil || !strings.Contains(storeStatus.LastError.Message, "unknown store command") {
		t.Errorf("store status lastError %+v", storeStatus.LastError)
	}
	if n := len(listStore(t, store)); n != 1 {
		t.Errorf("%d sessions after refused creates and forks, want 1", n)
	}
	// the mount's stderr reaches m.log through a pipe: wait for it rather than read it once
	waitFor(t, "the mount's log to show the refusals", func() (bool, string) {
		return strings.Contains(m.log.String(), "duplicate key"), m.log.String()
	})
}

// TestWriteAwkwardIDs: ids with "/", "..", spaces and non-ASCII are created encoded, as the harness names
// them, through mkdir, ctl create and the CLI; the harness opens every one.
func TestWriteAwkwardIDs(t *testing.T) {
	t.Parallel()
	store, cfg := emptyStore(t, "none")
	m := startMount(t, "--config", cfg, store)
	for _, name := range []string{"a~002Fb", "~002E~002E", "with~0020space"} {
		mustRun(t, "mkdir", filepath.Join(m.dir, "sessions", name))
	}
	mustCtl(t, filepath.Join(m.dir, "ctl"), "create ünï/x cwd=/home/dev/ab")
	cli(t, 0, "create", "--cwd", "/srv", store, "cli id/.")
	wantIDs := []string{"a/b", "..", "with space", "ünï/x", "cli id/."}
	for _, id := range wantIDs {
		s := filepath.Join(m.dir, "sessions", spill.NameSegment(id))
		// the CLI's session appears at the mount's next listing refresh
		waitFor(t, id+" to appear in the mount", func() (bool, string) {
			_, err := os.Stat(s)
			return err == nil, fmt.Sprint(err)
		})
		mustAppend(t, s, turnLines(1, 0, false))
		mustCtl(t, filepath.Join(s, "ctl"), "close")
	}
	stopAndVerify(t, m, store)
}

// TestWriteForeignWriter: another process appends to the artifact between two dshfs flushes. The next
// flush refuses (EBUSY) and writes nothing — no duplicate or out-of-order seq — the events it could not
// write are kept in a sidecar named in status.json, and after `rescan` writing works again.
func TestWriteForeignWriter(t *testing.T) {
	t.Parallel()
	store, _ := emptyStore(t, "none")
	// no write-behind batch during the test: only the explicit flushes write
	cfg := writeConfig(t, "[writer]\ncompression = \"none\"\nbatch_window = \"1h\"\n")
	m := startMount(t, "--config", cfg, store)
	s := newSessionOnMount(t, m.dir, "s")
	turn := turnLines(1, 0, false)
	mustAppend(t, s, turn)
	mustCtl(t, filepath.Join(s, "ctl"), "flush")
	art := artifactOf(t, store, "s")
	foreign := fmt.Sprintf(`{"type":"plugin/foreign","seq":%d,"time":1,"data":{},"ignorable":true}`, len(turn))

	mustAppend(t, s, turnLines(2, int64(len(turn)), false)) // accepted in memory: seqs collide with the foreign one
	run(t, "", "sh", "-c", `echo "$0" >> "$1"`, foreign, art)
	after := readFile(t, art)
	wantErrno(t, "flush after a foreign append", ctl(t, filepath.Join(s, "ctl"), "flush"), syscall.EBUSY)
	if got := readFile(t, art); string(got) != string(after) {
		t.Fatalf("dshfs wrote to the artifact after another process changed it")
	}
	if seqs := seqsOf(t, cli(t, 0, "cat", store, "s")); !contiguous(seqs) || len(seqs) != len(turn)+1 {
		t.Fatalf("seqs on disk %v", seqs)
	}
	st := statusOf(t, s)
	if st.lastErrorCode() != "CONFLICT" || st.LastError.Errno == nil || *st.LastError.Errno != "EBUSY" {
		t.Fatalf("lastError %+v", st.LastError)
	}
	sidecars, _ := filepath.Glob(art + ".pending-*")
	if len(sidecars) != 1 || !strings.Contains(st.LastError.Message, sidecars[0]) {
		t.Fatalf("sidecar %v not named in lastError %q", sidecars, st.LastError.Message)
	}
	kept := readFile(t, sidecars[0])
	if want := turnLines(2, int64(len(turn)), false); len(lines(kept)) != len(want) {
		t.Errorf("the sidecar holds %d events, want the %d pending ones", len(lines(kept)), len(want))
	}
	wantErrno(t, "append before rescan", writeAppend(t, s, []string{`{"type":"plugin/x","data":{},"ignorable":true}`}), syscall.EBUSY)
	cli(t, 0, "check", store) // the sidecar does not disturb the store

	mustCtl(t, filepath.Join(m.dir, "ctl"), "rescan")
	if got := readFile(t, filepath.Join(s, "events.jsonl")); len(lines(got)) != len(turn)+1 || !strings.Contains(string(got), "plugin/foreign") {
		t.Fatalf("after rescan the session does not show the foreign event:\n%s", got)
	}
	mustAppend(t, s, turnLines(2, int64(len(turn)+1), false))
	mustCtl(t, filepath.Join(s, "ctl"), "flush")
	if seqs := seqsOf(t, readFile(t, filepath.Join(s, "events.jsonl"))); !contiguous(seqs) || len(seqs) != 2*len(turn)+1 {
		t.Errorf("after rescan and append: seqs %v", seqs)
	}

	// with nothing pending, the next request after a foreign append is refused outright: not accepted, not
	// kept in a sidecar to retry
	next := int64(2*len(turn) + 1)
	foreign = fmt.Sprintf(`{"type":"plugin/foreign","seq":%d,"time":1,"data":{},"ignorable":true}`, next)
	run(t, "", "sh", "-c", `echo "$0" >> "$1"`, foreign, art)
	before := storeSum(t, store)
	wantErrno(t, "append after a foreign append", writeAppend(t, s, turnLines(3, next, false)), syscall.EBUSY)
	st = statusOf(t, s)
	if st.lastErrorCode() != "LIVE_ELSEWHERE" || !strings.Contains(st.LastError.Message, "changed under this writer") || st.Pending != 0 {
		t.Errorf("status after the refused append: pending %d, lastError %+v", st.Pending, st.LastError)
	}
	// the mount logs a refusal as it answers it: the line may land just after the errno does
	waitFor(t, "the refusal in the mount's log", func() (bool, string) {
		return strings.Contains(m.log.String(), "LIVE_ELSEWHERE"), m.log.String()
	})
	sameSums(t, before, storeSum(t, store))
	mustCtl(t, filepath.Join(m.dir, "ctl"), "rescan")
	mustAppend(t, s, turnLines(3, next+1, false))
	mustCtl(t, filepath.Join(s, "ctl"), "flush")
	stopAndVerify(t, m, store)
}

// TestWriteLockBetweenCLIs: the writer lock is a flock(2) on the artifact, so any holder — here util-linux
// flock(1), standing in for a CLI writer mid-run — makes dshfs's CLI writers refuse with EBUSY (exit 1,
// naming the holder's pid) while reads work; once the holder is killed the lock is free.
func TestWriteLockBetweenCLIs(t *testing.T) {
	t.Parallel()
	store, _ := emptyStore(t, "zstd")
	cli(t, 0, "create", "--cwd", "/srv", store, "s")
	in := filepath.Join(t.TempDir(), "turn.jsonl")
	if err := os.WriteFile(in, []byte(strings.Join(turnLines(1, 0, false), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, 0, "append", store, "s", in)
	artifact := artifactOf(t, store, "s")
	// -o: flock itself holds the lock (its sleep child does not), so killing flock frees it
	holder := exec.Command("flock", "-x", "-o", artifact, "sleep", "600")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Process.Kill()
	waitFor(t, "flock to hold the artifact", func() (bool, string) {
		r := run(t, "", dshfsBin(t), "resume", store, "s")
		return r.code == 1, string(r.stderr)
	})
	for _, args := range [][]string{{"append", store, "s", in}, {"resume", store, "s"}, {"fork", store, "s"}} {
		r := run(t, "", dshfsBin(t), args...)
		if r.code != 1 || !strings.Contains(string(r.stderr), "pid") {
			t.Errorf("dshfs %s while locked: exit %d %s", args[0], r.code, r.stderr)
		}
	}
	cli(t, 0, "cat", store, "s") // reads need no lock
	holder.Process.Kill()
	holder.Wait()
	in2 := filepath.Join(t.TempDir(), "turn2.jsonl")
	if err := os.WriteFile(in2, []byte(strings.Join(turnLines(2, int64(len(turnLines(1, 0, false))), false), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, 0, "append", store, "s", in2) // the dead holder's lock is gone
	cli(t, 0, "check", store)
}

// TestWriteShellTools: the write side works with the tools a script uses — `>`, `>>`, `cp` and `dd ...
// conv=fsync` into append (fsync is a flush), a result read back from the ctl descriptor that wrote the
// command, SIGTERM flushing what is pending — and a writable mount stays harmless for tools that only read:
// `grep -r` and `rsync -a` read empty ctl and append files.
func TestWriteShellTools(t *testing.T) {
	t.Parallel()
	store, _ := emptyStore(t, "zstd")
	cfg := writeConfig(t, "[writer]\nbatch_window = \"1h\"\n") // only flushes (and unmount) write
	m := startMount(t, "--config", cfg, store)
	s := newSessionOnMount(t, m.dir, "s")
	in := filepath.Join(t.TempDir(), "turn.jsonl")
	turn := turnLines(1, 0, false)
	if err := os.WriteFile(in, []byte(strings.Join(turn, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "cp", in, filepath.Join(s, "append"))
	if st := statusOf(t, s); st.Events != int64(len(turn)) || st.Pending != int64(len(turn)) {
		t.Fatalf("after cp: %+v", st)
	}
	// dd with conv=fsync: the fsync on append returns once the events are durable
	in2 := filepath.Join(t.TempDir(), "turn2.jsonl")
	if err := os.WriteFile(in2, []byte(strings.Join(turnLines(2, int64(len(turn)), false), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "dd", "if="+in2, "of="+filepath.Join(s, "append"), "oflag=append", "conv=notrunc,fsync", "status=none")
	if st := statusOf(t, s); st.Pending != 0 || st.DurableSeq != int64(2*len(turn)-1) {
		t.Fatalf("after dd conv=fsync: %+v", st)
	}
	// the result of a command, read back on the descriptor that wrote it
	r := run(t, "", "bash", "-c", `exec 3<>"$0"; echo flush >&3; cat <&3`, filepath.Join(s, "ctl"))
	var res commandResult
	if err := json.Unmarshal(r.stdout, &res); r.code != 0 || err != nil || res.Command != "flush" || res.Errno != nil {
		t.Errorf("reading ctl after a command: exit %d %q %v", r.code, r.stdout, err)
	}
	if got := readFile(t, filepath.Join(s, "ctl")); len(got) != 0 {
		t.Errorf("a fresh read of ctl returned %q", got)
	}
	// `>` (O_TRUNC) appends too, and SIGTERM flushes it
	run(t, "", "bash", "-c", `echo "$0" > "$1"`, `{"type":"plugin/note","data":{},"ignorable":true}`, filepath.Join(s, "append"))
	if st := statusOf(t, s); st.Pending != 1 {
		t.Fatalf("after >: %+v", st)
	}
	// tools that only read: grep -r finds nothing in ctl/append and exits 0 or 1; rsync -a copies them empty
	if r := run(t, "", "grep", "-r", "-q", "no-such-text-anywhere", m.dir); r.code != 1 {
		t.Errorf("grep -r over a writable mount: exit %d %s", r.code, r.stderr)
	}
	dest := filepath.Join(t.TempDir(), "copy")
	if r := run(t, "", "rsync", "-a", m.dir+"/sessions/", dest+"/"); r.code != 0 {
		t.Errorf("rsync -a of a writable mount: exit %d %s", r.code, r.stderr)
	}
	for _, f := range []string{"ctl", "append"} {
		if fi, err := os.Stat(filepath.Join(dest, "s", f)); err != nil || fi.Size() != 0 {
			t.Errorf("rsync copy of %s: %v", f, err)
		}
	}
	m.stop(t)
	if n := len(lines(cli(t, 0, "cat", store, "s"))); n != 2*len(turn)+1 {
		t.Errorf("after SIGTERM: %d events stored, want %d (the pending one flushed)", n, 2*len(turn)+1)
	}
	harnessAgrees(t, store)
}
