package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/fixtures"
	"github.com/dshfs/dshfs/internal/harness"
)

// The compaction canaries of ../shared/CANARIES.md (7–9) and the pruner, on real mounts driven with the
// shell. Every store they write is read back by the harness's own packages and checked by its compaction
// invariant companion.

// gate is a summarizer program the test controls: it records that it started, waits until the test lets
// it go, then prints its summary. Its directory holds the files it watches.
type gate struct{ dir, prog string }

func newGate(t *testing.T, summary string) gate {
	t.Helper()
	dir := t.TempDir()
	prog := filepath.Join(dir, "summarize")
	script := fmt.Sprintf(`#!/bin/sh
cat > "$0.stdin"
touch "$0.started"
while [ ! -e "$0.go" ]; do sleep 0.02; done
printf '%%s\n' %q
`, summary)
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	g := gate{dir: dir, prog: prog}
	t.Cleanup(g.open) // never leave a summarizer waiting
	return g
}

func (g gate) config(t *testing.T, compression string) string {
	return writeConfig(t, "[writer]\ncompression = %q\nbatch_window = \"50ms\"\n[compaction]\nsummarizer = \"command\"\ncommand = [%q]\nmodel = \"gate\"\n", compression, g.prog)
}

func (g gate) waitStarted(t *testing.T) {
	t.Helper()
	waitFor(t, "the summarizer to start", func() (bool, string) {
		_, err := os.Stat(g.prog + ".started")
		return err == nil, "not started"
	})
}

func (g gate) open() { _ = os.WriteFile(g.prog+".go", nil, 0o644) }

// background runs `echo CMD > ctl` without waiting for it; wait returns its result.
func background(t *testing.T, ctlPath, cmd string) (wait func() result) {
	t.Helper()
	c := exec.Command("bash", "-c", `echo "$0" > "$1"`, cmd, ctlPath)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan result, 1)
	go func() {
		err := c.Wait()
		code := 0
		if err != nil {
			code = c.ProcessState.ExitCode()
		}
		done <- result{code: code, stderr: stderr.Bytes()}
	}()
	return func() result {
		select {
		case r := <-done:
			return r
		case <-time.After(2 * time.Minute):
			t.Fatalf("echo %s > %s did not return", cmd, ctlPath)
			return result{}
		}
	}
}

// compactionRecord is one compactions/<id>.json.
type compactionRecord struct {
	CompactionID string
	State        string
	StartSeq     *int64
	EndSeq       *int64
	ShadowedSeqs []int64
	Error        *string
}

func compactionRecords(t *testing.T, sess string) []compactionRecord {
	t.Helper()
	var out []compactionRecord
	entries, err := os.ReadDir(filepath.Join(sess, "compactions"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "prunes.jsonl" {
			continue
		}
		var r compactionRecord
		if err := json.Unmarshal(readFile(t, filepath.Join(sess, "compactions", e.Name())), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return *out[i].StartSeq < *out[j].StartSeq }) // listed by id, not by time
	return out
}

// twoTurns is a session of two complete turns (each a question, a tool call and its result, an answer).
func twoTurns(t *testing.T, sess string) {
	t.Helper()
	t1 := turnLines(1, 0, false)
	mustAppend(t, sess, t1)
	mustAppend(t, sess, turnLines(2, int64(len(t1)), false))
	mustCtl(t, filepath.Join(sess, "ctl"), "flush")
}

// invariantHolds runs the harness's compaction invariant companion over every session of store.
func invariantHolds(t *testing.T, store string) {
	t.Helper()
	var ids []string
	for _, e := range listStore(t, store) {
		ids = append(ids, e.ID)
	}
	answers, err := harness.Get(t).CompactionInvariant(store, ids...)
	if err != nil {
		t.Fatal(err)
	}
	if len(answers) != len(ids) {
		t.Fatalf("the invariant answered for %d of %d sessions", len(answers), len(ids))
	}
	for _, a := range answers {
		if a.Error != "" {
			t.Errorf("%q: the harness's compaction invariant rejects the log: %s", a.ID, a.Error)
		}
	}
}

func jsonLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range lines(b) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		out = append(out, m)
	}
	return out
}

// TestCanary7Compact: compact grows the raw log, shrinks the surface, keeps every original byte, lists
// every shadowed seq in shadowed/ and traces each to the replacement.
func TestCanary7Compact(t *testing.T) {
	t.Parallel()
	eachCompression(t, func(t *testing.T, store, cfg string) {
		m := startMount(t, "--config", cfg, store)
		s := newSessionOnMount(t, m.dir, "c7")
		twoTurns(t, s)
		events := readFile(t, filepath.Join(s, "events.jsonl"))
		surfaceBefore := lines(readFile(t, filepath.Join(s, "surface.jsonl")))
		mustCtl(t, filepath.Join(s, "ctl"), "compact")
		st := statusOf(t, s)
		if st.LastCommand == nil || !strings.HasPrefix(st.LastCommand.Message, "Compacted ") || st.Pending != 0 {
			t.Fatalf("status after compact: %+v %+v", st, st.LastCommand)
		}
		after := readFile(t, filepath.Join(s, "events.jsonl"))
		if !bytes.HasPrefix(after, events) {
			t.Fatal("events.jsonl no longer starts with the original events, byte for byte")
		}
		added := jsonLines(t, after[len(events):])
		var types []string
		for _, e := range added {
			types = append(types, e["type"].(string))
		}
		if strings.Join(types, " ") != "compaction/start compaction/summary user/message compaction/end" {
			t.Fatalf("compact appended %v", types)
		}
		surface := lines(readFile(t, filepath.Join(s, "surface.jsonl")))
		if len(surface) >= len(surfaceBefore) || !bytes.Contains(surface[0], []byte("<compacted-summary>")) {
			t.Fatalf("surface: %d nodes before, %d after; first %s", len(surfaceBefore), len(surface), surface[0])
		}
		recs := compactionRecords(t, s)
		if len(recs) != 1 || recs[0].State != "complete" {
			t.Fatalf("compactions/: %+v", recs)
		}
		replacement := int64(added[2]["seq"].(float64))
		shadowed := map[string]bool{}
		entries, _ := os.ReadDir(filepath.Join(s, "shadowed"))
		for _, e := range entries {
			shadowed[e.Name()[:10]] = true
		}
		for _, seq := range recs[0].ShadowedSeqs {
			if !shadowed[fmt.Sprintf("%010d", seq)] {
				t.Errorf("shadowed/ lacks seq %d (has %v)", seq, shadowed)
			}
			out := mustRun(t, "jq", "-c", ".replacementChain", filepath.Join(s, "trace", fmt.Sprintf("%010d.json", seq)))
			if string(bytes.TrimSpace(out)) != fmt.Sprintf("[%d]", replacement) {
				t.Errorf("trace/%d reaches %s, want [%d]", seq, out, replacement)
			}
		}
		// grep finds the shadowed question in the raw log still, and no longer on the surface
		if r := run(t, "", "grep", "-c", "Run step 1 of the build", filepath.Join(s, "events.jsonl")); r.code != 0 {
			t.Errorf("grep of the raw log: %d %s", r.code, r.stderr)
		}
		if r := run(t, "", "grep", "-q", `"id":"u-1"`, filepath.Join(s, "surface.jsonl")); r.code != 1 {
			t.Errorf("the shadowed question is still on the surface")
		}
		stopAndVerify(t, m, store)
		invariantHolds(t, store)
	})
}

// TestCanary8ChangedSpan: a node of the selected span replaced while the summarizer runs fails the
// compaction with the changed-span error (EAGAIN), recorded in the log, the surface keeping the
// replacement and no checkpoint; an append after the span does not fail it.
func TestCanary8ChangedSpan(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		line  string
		fails bool
	}{
		{"replaced inside the span", `{"type":"user/message","data":{"id":"u-edit","role":"user","content":[{"type":"text","text":"Run step 1, edited."}],"source":{"kind":"user"}},"sourceEventSeqs":[2],"surfaceOp":{"op":"replace","start":2,"end":2}}`, true},
		{"appended after the span", `{"type":"user/message","data":{"id":"u-late","role":"user","content":[{"type":"text","text":"One more thing."}],"source":{"kind":"user"}},"surfaceOp":"append"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store, _ := emptyStore(t, "zstd")
			g := newGate(t, "Steps 1 and 2 ran; pkg/b fails.")
			m := startMount(t, "--config", g.config(t, "zstd"), store)
			s := newSessionOnMount(t, m.dir, "c8")
			twoTurns(t, s)
			wait := background(t, filepath.Join(s, "ctl"), "compact")
			g.waitStarted(t)
			mustAppend(t, s, []string{tc.line})
			g.open()
			r := wait()
			surface := readFile(t, filepath.Join(s, "surface.jsonl"))
			recs := compactionRecords(t, s)
			if len(recs) != 1 {
				t.Fatalf("compactions/: %+v", recs)
			}
			if !tc.fails {
				if r.code != 0 || recs[0].State != "complete" {
					t.Fatalf("compact: exit %d %s; %+v", r.code, r.stderr, recs[0])
				}
				sl := lines(surface)
				if !bytes.Contains(sl[0], []byte("<compacted-summary>")) || !bytes.Contains(sl[len(sl)-1], []byte("One more thing.")) {
					t.Fatalf("surface after the compaction:\n%s", surface)
				}
			} else {
				wantErrno(t, "compact with a changed span", r, syscall.EAGAIN)
				want := "compaction: the selected span is no longer a valid replacement target: compactRegion: start seq 2 not found in surface"
				if recs[0].State != "failed" || recs[0].Error == nil || *recs[0].Error != want {
					t.Fatalf("record %+v, want failed with %q", recs[0], want)
				}
				st := statusOf(t, s)
				if st.lastErrorCode() != "CHANGED" || *st.LastError.Errno != "EAGAIN" || !strings.Contains(st.LastError.Message, want) {
					t.Errorf("lastError %+v", st.LastError)
				}
				if bytes.Contains(surface, []byte("<compacted-summary>")) || !bytes.Contains(surface, []byte("Run step 1, edited.")) {
					t.Fatalf("surface after the failed compaction:\n%s", surface)
				}
				if r := run(t, "", "grep", "-c", `"error":"compaction: the selected span`, filepath.Join(s, "events.jsonl")); string(bytes.TrimSpace(r.stdout)) != "1" {
					t.Errorf("the failed attempt is not in the log once: %s", r.stdout)
				}
			}
			// the summarizer saw the span's messages as JSON on stdin
			var in struct{ Messages []json.RawMessage }
			if err := json.Unmarshal(readFile(t, g.prog+".stdin"), &in); err != nil || len(in.Messages) == 0 {
				t.Errorf("summarizer stdin: %v, %d messages", err, len(in.Messages))
			}
			stopAndVerify(t, m, store)
			invariantHolds(t, store)
		})
	}
}

// TestCanary9CrashMidCompaction: SIGKILL while the summarizer runs after a durable compaction/start; after
// a remount the start is open and holds the lock, after resume it is stale, and compact then succeeds.
func TestCanary9CrashMidCompaction(t *testing.T) {
	t.Parallel()
	for _, c := range []string{"none", "zstd"} {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			store, cfg := emptyStore(t, c)
			g := newGate(t, "never printed")
			m := startMount(t, "--config", g.config(t, c), store)
			s := newSessionOnMount(t, m.dir, "c9")
			twoTurns(t, s)
			wait := background(t, filepath.Join(s, "ctl"), "compact")
			g.waitStarted(t) // the summarizer runs after compaction/start was flushed
			killMount(t, m)
			wait() // the interrupted write fails; what matters is the store

			m2 := startMount(t, "--config", cfg, store)
			s2 := filepath.Join(m2.dir, "sessions", "c9")
			recs := compactionRecords(t, s2)
			if len(recs) != 1 || recs[0].State != "open" || recs[0].EndSeq != nil {
				t.Fatalf("after the crash: %+v", recs)
			}
			var st struct{ ActiveCompaction *compactionRecord }
			if err := json.Unmarshal(readFile(t, filepath.Join(s2, "status.json")), &st); err != nil {
				t.Fatal(err)
			}
			if st.ActiveCompaction == nil || st.ActiveCompaction.CompactionID != recs[0].CompactionID {
				t.Fatalf("status.json activeCompaction %+v, want %s", st.ActiveCompaction, recs[0].CompactionID)
			}
			// the lock holds: no new compaction, no appended turn, until resume
			wantErrno(t, "compact under a live lock", ctl(t, filepath.Join(s2, "ctl"), "compact"), syscall.EBUSY)
			if code := statusOf(t, s2).lastErrorCode(); code != "COMPACTION_LOCK" {
				t.Errorf("lastError code %q, want COMPACTION_LOCK", code)
			}
			mustCtl(t, filepath.Join(s2, "ctl"), "resume")
			recs = compactionRecords(t, s2)
			if len(recs) != 1 || recs[0].State != "stale" {
				t.Fatalf("after resume: %+v", recs)
			}
			mustCtl(t, filepath.Join(s2, "ctl"), "compact")
			recs = compactionRecords(t, s2)
			if len(recs) != 2 || recs[0].State != "stale" || recs[1].State != "complete" {
				t.Fatalf("after the second compact: %+v", recs)
			}
			stopAndVerify(t, m2, store)
			invariantHolds(t, store)
		})
	}
}

// TestPruneOnMount: prune inside a turn held open by this mount cuts a 1.5 MB tool result to its head
// and tail around the marker, keeps call/result pairs balanced, and a second prune does nothing; an idle
// session refuses it with a pointer to compact.
func TestPruneOnMount(t *testing.T) {
	t.Parallel()
	store, cfg := emptyStore(t, "zstd")
	m := startMount(t, "--config", cfg, store)
	s := newSessionOnMount(t, m.dir, "p1")
	t1 := turnLines(1, 0, false)
	mustAppend(t, s, t1)
	r := ctl(t, filepath.Join(s, "ctl"), "prune")
	wantErrno(t, "prune of an idle session", r, syscall.EBUSY)
	if st := statusOf(t, s); !strings.Contains(st.LastError.Message, "use compact") {
		t.Errorf("lastError %+v", st.LastError)
	}
	head, tail := "HEAD-"+strings.Repeat("h", 5000), strings.Repeat("t", 3000)+"-TAIL"
	big := head + strings.Repeat("m", 1_500_000) + tail
	open := turnLines(2, int64(len(t1)), true)
	callSeq := int64(len(t1) + len(open) - 1)
	result := fmt.Sprintf(`{"type":"tool/result","data":{"turn":2,"step":1,"message":{"id":"t-2","role":"user","content":[{"type":"tool-result","toolCallId":"call-2","content":[{"type":"text","text":%q}],"isError":false}],"source":{"kind":"tool","callId":"call-2"}}},"sourceEventSeqs":[%d],"surfaceOp":"append"}`, big, callSeq)
	mustAppend(t, s, append(open, result))
	mustCtl(t, filepath.Join(s, "ctl"), "prune")
	removed := len(big) - (4096 + len("\n\n[... tool result middle pruned ...]\n\n") + 1024)
	if msg := statusOf(t, s).LastCommand.Message; msg != fmt.Sprintf("pruned 1 tool results (%d characters removed)", removed) {
		t.Errorf("prune said %q", msg)
	}
	msgs := readFile(t, filepath.Join(s, "messages.jsonl"))
	text := mustRun(t, "jq", "-r", `select(.source.callId == "call-2") | .content[0].content[0].text`, filepath.Join(s, "messages.jsonl"))
	want := head[:4096] + "\n\n[... tool result middle pruned ...]\n\n" + tail[len(tail)-1024:] + "\n"
	if string(text) != want {
		t.Errorf("pruned result: %d bytes, want %d", len(text), len(want))
	}
	calls := bytes.Count(msgs, []byte(`"type":"tool-call"`))
	results := bytes.Count(msgs, []byte(`"type":"tool-result"`))
	if calls != 2 || results != 2 {
		t.Errorf("messages.jsonl: %d tool calls, %d results", calls, results)
	}
	if n := len(lines(readFile(t, filepath.Join(s, "compactions", "prunes.jsonl")))); n != 1 {
		t.Errorf("prunes.jsonl has %d lines", n)
	}
	// the original result is still in the raw log, whole
	if r := run(t, "", "grep", "-c", "-e", "-TAIL", filepath.Join(s, "events.jsonl")); string(bytes.TrimSpace(r.stdout)) != "2" {
		t.Errorf("events.jsonl: the tail appears in %s lines, want the original and the replacement", r.stdout)
	}
	before := statusOf(t, s).Events
	mustCtl(t, filepath.Join(s, "ctl"), "prune")
	if st := statusOf(t, s); st.Events != before || !strings.HasPrefix(st.LastCommand.Message, "nothing to prune") {
		t.Errorf("second prune: %d events (was %d), %q", st.Events, before, st.LastCommand.Message)
	}
	mustAppend(t, s, []string{
		`{"type":"step/end","data":{"turn":2,"step":1}}`,
		`{"type":"turn/end","data":{"turn":2,"reason":{"kind":"completed"}}}`,
	})
	stopAndVerify(t, m, store)
	invariantHolds(t, store)
}

// TestCompactCLI: dshfs compact on a store nobody mounts, with an explicit range, and its refusals.
func TestCompactCLI(t *testing.T) {
	t.Parallel()
	root := fixtures.CopyTree(t, fixtures.Path(t, "generated", "raw"))
	const id = "main-session-39ade10b-6855-483e-897d-dd835505a4e6"
	out := cli(t, 0, "compact", root, id, "111", "130")
	if !bytes.Contains(out, []byte(`"message":"Compacted 8 history items`)) {
		t.Fatalf("compact START END: %s", out)
	}
	recs := cli(t, 0, "cat", "--view", "compactions", root, id)
	if n := bytes.Count(recs, []byte(`"state":"complete"`)); n != 3 {
		t.Fatalf("compactions after the CLI compact:\n%s", recs)
	}
	r := run(t, "", dshfsBin(t), "compact", root, id, "2", "33")
	if r.code != 1 || !strings.Contains(string(r.stderr), "compactRegion: start seq 2 not found in surface") {
		t.Errorf("compact of a shadowed range: exit %d %s", r.code, r.stderr)
	}
	r = run(t, "", dshfsBin(t), "compact", root, "main-session-30628611-e45f-4f98-9688-010e1428e585")
	if r.code != 1 || !strings.Contains(string(r.stderr), "ends inside open turn 2, which a harness may still be writing") {
		t.Errorf("compact of a crashed session: exit %d %s", r.code, r.stderr)
	}
	harnessAgrees(t, root)
	invariantHolds(t, root)
}

// TestInvariantCheckRejects shows the invariant check can fail: a success compaction/end without its
// summary is rejected, the harness's own compaction fixture is accepted.
func TestInvariantCheckRejects(t *testing.T) {
	t.Parallel()
	store, _ := emptyStore(t, "none")
	dir := filepath.Join(store, "--p--", "bad")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	log := `{"type":"session","version":0,"id":"bad","createdAt":1,"cwd":"/p","delegationDepth":0}
{"type":"compaction/start","seq":0,"time":1,"data":{"compactionId":"x","turn":null}}
{"type":"compaction/end","seq":1,"time":2,"data":{"compactionId":"x","turn":null}}
`
	if err := os.WriteFile(filepath.Join(dir, "session.jsonl"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	answers, err := harness.Get(t).CompactionInvariant(store, "bad")
	if err != nil {
		t.Fatal(err)
	}
	if len(answers) != 1 || !strings.Contains(answers[0].Error, "successful compaction/end requires one compaction/summary") {
		t.Fatalf("the invariant accepted a summary-less success: %+v", answers)
	}
	invariantHolds(t, fixtures.CopyTree(t, fixtures.Path(t, "generated", "raw")))
}
