package integration

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A flush, close or quiesce written while a compaction's summarizer works must not wait for it: a
// backup script or a crash-safety checkpoint would hang for as long as an LLM takes. The running
// compact's write holds the kernel's lock of the ctl inode it opened; the mount gives the next walk of
// ctl a fresh inode, so these tests write every command by path with the shell, as users do.

// quickCtl is `echo CMD > ctl`, which must succeed within a second.
func quickCtl(t *testing.T, ctlPath, cmd string) {
	t.Helper()
	start := time.Now()
	r := ctl(t, ctlPath, cmd)
	if took := time.Since(start); took > time.Second {
		t.Fatalf("echo %s > %s took %v while the summarizer ran", cmd, ctlPath, took)
	}
	if r.code != 0 {
		t.Fatalf("echo %s > %s: exit %d %s", cmd, ctlPath, r.code, r.stderr)
	}
}

// summarizing is a mounted session of two turns whose compact is blocked in its summarizer; the late
// append after the span is accepted and pending.
func summarizing(t *testing.T, g gate, store, cfg string) (m *mountProc, sess string, wait func() result) {
	t.Helper()
	m = startMount(t, "--config", cfg, store)
	sess = newSessionOnMount(t, m.dir, "fc")
	twoTurns(t, sess)
	wait = background(t, filepath.Join(sess, "ctl"), "compact")
	g.waitStarted(t)
	mustAppend(t, sess, []string{`{"type":"user/message","data":{"id":"u-late","role":"user","content":[{"type":"text","text":"One more thing."}],"source":{"kind":"user"}},"surfaceOp":"append"}`})
	return m, sess, wait
}

// allDurable checks status.json: nothing pending, the compaction's start and the late append durable.
func allDurable(t *testing.T, sess string) {
	t.Helper()
	st := statusOf(t, sess)
	if st.Pending != 0 || st.DurableSeq != st.NextSeq-1 {
		t.Fatalf("after flush: pending %d, durableSeq %d, nextSeq %d", st.Pending, st.DurableSeq, st.NextSeq)
	}
}

// TestFlushDuringSummarization: with a command summarizer blocked, flush through the session's ctl
// and the store's, quiesce and resume-writes each return within a second with every accepted event
// durable; released, the compaction commits.
func TestFlushDuringSummarization(t *testing.T) {
	t.Parallel()
	store, _ := emptyStore(t, "zstd")
	g := newGate(t, "Steps 1 and 2 ran; pkg/b fails.")
	m, s, wait := summarizing(t, g, store, g.config(t, "zstd"))
	quickCtl(t, filepath.Join(s, "ctl"), "flush")
	allDurable(t, s)
	quickCtl(t, filepath.Join(m.dir, "ctl"), "flush")
	quickCtl(t, filepath.Join(m.dir, "ctl"), "quiesce 60")
	quickCtl(t, filepath.Join(m.dir, "ctl"), "resume-writes")
	if recs := compactionRecords(t, s); len(recs) != 1 || recs[0].State != "open" {
		t.Fatalf("while summarizing: %+v", recs)
	}
	g.open()
	if r := wait(); r.code != 0 {
		t.Fatalf("compact: exit %d %s\nstatus: %s", r.code, r.stderr, readFile(t, filepath.Join(s, "status.json")))
	}
	if recs := compactionRecords(t, s); len(recs) != 1 || recs[0].State != "complete" {
		t.Fatalf("after the summary: %+v", recs)
	}
	allDurable(t, s)
	surface := lines(readFile(t, filepath.Join(s, "surface.jsonl")))
	if !bytes.Contains(surface[0], []byte("<compacted-summary>")) || !bytes.Contains(surface[len(surface)-1], []byte("One more thing.")) {
		t.Fatalf("surface after the compaction:\n%s", bytes.Join(surface, []byte("\n")))
	}
	stopAndVerify(t, m, store)
	invariantHolds(t, store)
}

// TestCloseDuringSummarization: close returns within a second, once the accepted events are durable; it
// does not leave the compaction to commit after the writer is released, nor its start unmatched: the
// compaction is recorded failed (compaction/end{error}, written before the release), compact returns
// EIO with code cancelled, and the session is written again without a resume.
func TestCloseDuringSummarization(t *testing.T) {
	t.Parallel()
	store, _ := emptyStore(t, "none")
	g := newGate(t, "never used")
	m, s, wait := summarizing(t, g, store, g.config(t, "none"))
	quickCtl(t, filepath.Join(s, "ctl"), "close")
	r := wait()
	wantErrno(t, "compact of a closed session", r, syscall.EIO)
	recs := compactionRecords(t, s)
	if len(recs) != 1 || recs[0].State != "failed" || recs[0].Error == nil || !strings.Contains(*recs[0].Error, "closed while the transaction") {
		t.Fatalf("after close: %+v", recs)
	}
	if st := statusOf(t, s); st.State == "live" || st.lastErrorCode() != "CANCELLED" {
		t.Fatalf("status after close: state %s, lastError %+v", st.State, st.LastError)
	}
	mustAppend(t, s, []string{`{"type":"user/message","data":{"id":"u-after","role":"user","content":[{"type":"text","text":"After the close."}],"source":{"kind":"user"}},"surfaceOp":"append"}`})
	stopAndVerify(t, m, store)
	invariantHolds(t, store)
}

// TestCrashAfterFlushDuringSummarization is canary 9 reached through a checkpoint: the flush written
// while the summarizer runs returns, then the mount is killed. After a remount the unmatched start is
// open (and holds the lock); after resume it is stale.
func TestCrashAfterFlushDuringSummarization(t *testing.T) {
	t.Parallel()
	store, cfg := emptyStore(t, "zstd")
	g := newGate(t, "never printed")
	m, s, wait := summarizing(t, g, store, g.config(t, "zstd"))
	quickCtl(t, filepath.Join(s, "ctl"), "flush")
	allDurable(t, s)
	killMount(t, m)
	wait() // the interrupted compact fails; what matters is the store

	m2 := startMount(t, "--config", cfg, store)
	s2 := filepath.Join(m2.dir, "sessions", "fc")
	recs := compactionRecords(t, s2)
	if len(recs) != 1 || recs[0].State != "open" || recs[0].EndSeq != nil {
		t.Fatalf("after the crash: %+v", recs)
	}
	var st struct {
		ActiveCompaction *compactionRecord
		Events           int64
	}
	if err := json.Unmarshal(readFile(t, filepath.Join(s2, "status.json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.ActiveCompaction == nil || st.ActiveCompaction.CompactionID != recs[0].CompactionID {
		t.Fatalf("status.json activeCompaction %+v, want %s", st.ActiveCompaction, recs[0].CompactionID)
	}
	if r := run(t, "", "grep", "-c", "One more thing.", filepath.Join(s2, "events.jsonl")); string(bytes.TrimSpace(r.stdout)) != "1" {
		t.Fatalf("the append flushed during the summarization was lost: %s", r.stdout)
	}
	wantErrno(t, "compact under the crashed compaction's lock", ctl(t, filepath.Join(s2, "ctl"), "compact"), syscall.EBUSY)
	mustCtl(t, filepath.Join(s2, "ctl"), "resume")
	if recs := compactionRecords(t, s2); len(recs) != 1 || recs[0].State != "stale" {
		t.Fatalf("after resume: %+v", recs)
	}
	stopAndVerify(t, m2, store)
	invariantHolds(t, store)
}
