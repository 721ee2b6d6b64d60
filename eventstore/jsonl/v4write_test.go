package jsonl

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/compaction"
	"github.com/dshfs/dshfs/config"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/generation"
	"github.com/dshfs/dshfs/internal/fixtures"
	"github.com/dshfs/dshfs/internal/harness"
)

const v4WriteID = "main-session-fa821f4b-98fd-46aa-86bc-0955a88ef4b8"

// v4Turn is one turn in the append syntax (no seq, no time): a user message, a tool call and its result,
// an answer. Turn n follows a log whose last turn is n-1.
func v4Turn(n int, call string) [][]byte {
	msg := func(step int, content string) string {
		return fmt.Sprintf(`{"type":"assistant/message","data":{"turn":%d,"step":%d,"message":{"role":"assistant","content":%s,"source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-flash"},"id":"a-%d-%d"}},"surfaceOp":"append"}`, n, step, content, n, step)
	}
	lines := []string{
		fmt.Sprintf(`{"type":"turn/start","data":{"turn":%d}}`, n),
		fmt.Sprintf(`{"type":"step/start","data":{"turn":%d,"step":1}}`, n),
		fmt.Sprintf(`{"type":"user/message","data":{"content":[{"type":"text","text":"turn %d"}],"source":{"kind":"user"},"role":"user","id":"u-%d"},"surfaceOp":"append"}`, n, n),
		msg(1, `[{"type":"tool-call","id":"`+call+`","name":"bash","arguments":"{\"command\":\"ls\"}"}]`),
		fmt.Sprintf(`{"type":"tool/call","data":{"turn":%d,"step":1,"callId":"%s","name":"bash","arguments":"{\"command\":\"ls\"}"}}`, n, call),
		fmt.Sprintf(`{"type":"tool/result","data":{"turn":%d,"step":1,"message":{"role":"tool","source":{"kind":"tool","callId":"%s"},"toolCallId":"%s","content":[{"type":"text","text":"README.md"}],"id":"r-%d"}},"surfaceOp":"append"}`, n, call, call, n),
		fmt.Sprintf(`{"type":"step/end","data":{"turn":%d,"step":1}}`, n),
		fmt.Sprintf(`{"type":"step/start","data":{"turn":%d,"step":2}}`, n),
		msg(2, `[{"type":"text","text":"done"}]`),
		fmt.Sprintf(`{"type":"step/end","data":{"turn":%d,"step":2}}`, n),
		fmt.Sprintf(`{"type":"turn/end","data":{"turn":%d,"reason":{"kind":"completed"}}}`, n),
	}
	out := make([][]byte, len(lines))
	for i, l := range lines {
		out[i] = []byte(l)
	}
	return out
}

// v4Store is a copy of a v4 fixture root opened as a store.
func v4Store(t *testing.T, root string) (*eventstore.Store, *Backend, string) {
	t.Helper()
	mode := Zstd
	if root == "raw-root" {
		mode = None
	}
	dir := fixtures.CopyTree(t, fixtures.Path(t, "generations", "v4", root))
	b, err := Open(dir, mode)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "--home-dev-projects-acme-api--", v4WriteID, GenerationFile{Gen: 4, Compression: mode}.Name())
	return eventstore.New(b), b, file
}

func harnessV4(t *testing.T) *harness.FormatsV4 { return harness.GetFormatsV4(t) }

// agreeWithHarness checks that the harness's v4 code restores the file to exactly the events dshfs loads
// from it.
func agreeWithHarness(t *testing.T, b *Backend, file string) *eventstore.Prefix {
	t.Helper()
	p, err := b.LoadStored(context.Background(), v4WriteID)
	if err != nil {
		t.Fatalf("dshfs reading what it wrote: %v", err)
	}
	r, err := harness.GetFormatsV4(t).Decode(file)
	if err != nil {
		t.Fatal(err)
	}
	if r.Refusal != "" {
		t.Fatalf("the harness's v4 code refuses what dshfs wrote: %s", r.Refusal)
	}
	if got := eventLines(p); !bytes.Equal(got, r.Events) {
		t.Fatalf("dshfs and the harness's v4 code restore different events (%d lines vs %d)", bytes.Count(got, []byte("\n")), bytes.Count(r.Events, []byte("\n")))
	}
	if !bytes.Equal(p.Header.Meta(), r.Header) {
		t.Fatalf("header %s, the harness's %s", p.Header.Meta(), r.Header)
	}
	return p
}

// TestV4Append: appends to a v4 session, raw and zstd, are checked by v4's rules, flushed as one batch
// each (one checksummed frame in zstd) after the bytes already there, and restored by the harness's own v4
// code to exactly the events dshfs reports. A refused request names the rule and the line and keeps nothing.
func TestV4Append(t *testing.T) {
	ctx := context.Background()
	for _, root := range []string{"raw-root", "zstd-root"} {
		t.Run(root, func(t *testing.T) {
			st, b, file := v4Store(t, root)
			before := readFileT(t, file)
			w, err := st.Writer(ctx, v4WriteID)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Accept(v4Turn(3, "call-3")); err != nil {
				t.Fatalf("append a turn: %v", err)
			}
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			// a released v3 wrapper result, the v0 shape of a tool result, is not v4
			bad := v4Turn(4, "call-4")
			bad[5] = []byte(`{"type":"tool/result","data":{"turn":4,"step":1,"message":{"id":"r","role":"user","source":{"kind":"tool","callId":"call-4"},"content":[{"type":"tool-result","toolCallId":"call-4","content":[]}]}},"surfaceOp":"append"}`)
			err = w.Accept(bad)
			ce := eventstore.AsCommandError(err)
			if ce == nil || ce.Line != 6 || !strings.Contains(err.Error(), "requires a tool-role message") {
				t.Fatalf("refusal %v (line %d)", err, ce.Line)
			}
			if w.Pending() != 0 {
				t.Fatalf("%d events of a refused request kept", w.Pending())
			}
			if err := w.Accept(v4Turn(4, "call-4")); err != nil {
				t.Fatalf("append after a refusal: %v", err)
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			after := readFileT(t, file)
			if !bytes.HasPrefix(after, before) {
				t.Fatal("bytes already in the file changed")
			}
			if root == "zstd-root" {
				frames, torn, err := ScanFrames(after[len(before):], 0)
				if err != nil || torn >= 0 || len(frames) != 2 {
					t.Fatalf("appended %d frames (torn %d, %v), want one per flush", len(frames), torn, err)
				}
			}
			p := agreeWithHarness(t, b, file)
			if len(p.Events) != 26+22 {
				t.Fatalf("%d events after two turns", len(p.Events))
			}
		})
	}
}

// TestV4Resume: a v4 session a crash left inside a turn — one tool call started, one only advertised — is
// refused to writers until resume closes it with the harness's meaning: the started call's outcome stays
// unknown (an error result citing its tool/call), the other gets the exact TOOL_NOT_STARTED repair, the
// step and the turn end as interrupted. The harness's v4 code accepts the result.
func TestV4Resume(t *testing.T) {
	ctx := context.Background()
	for _, root := range []string{"raw-root", "zstd-root"} {
		t.Run(root, func(t *testing.T) {
			st, b, file := v4Store(t, root)
			w, err := st.Writer(ctx, v4WriteID)
			if err != nil {
				t.Fatal(err)
			}
			crash := v4Turn(3, "call-a")[:5] // through the tool/call of call-a
			crash[3] = []byte(`{"type":"assistant/message","data":{"turn":3,"step":1,"message":{"role":"assistant","content":[{"type":"tool-call","id":"call-a","name":"bash","arguments":"{\"command\":\"ls\"}"},{"type":"tool-call","id":"call-b","name":"bash","arguments":"{}"}],"source":{"kind":"model"},"id":"a-3"}},"surfaceOp":"append"}`)
			if err := w.Accept(crash); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}

			st2 := eventstore.New(b)
			if _, err := st2.Writer(ctx, v4WriteID); eventstore.AsCommandError(err).Code != eventstore.CodeOpenTurn {
				t.Fatalf("writer on an open turn: %v", err)
			}
			ins, err := st2.Inspect(ctx, v4WriteID)
			if err != nil || len(ins.Closers) != 4 {
				t.Fatalf("repair preview: %d closers, %v", len(ins.Closers), err)
			}
			if _, err := st2.Resume(ctx, v4WriteID); err != nil {
				t.Fatalf("resume: %v", err)
			}
			p := agreeWithHarness(t, b, file)
			tail := p.Events[len(p.Events)-5:]
			want := []string{"tool/result", "tool/result", "step/end", "turn/end", "session/end-seed"}
			for i, e := range tail {
				if e.Type != want[i] {
					t.Fatalf("closer %d is %s, want %s", i, e.Type, want[i])
				}
			}
			for i, code := range []string{`"code":"TOOL_OUTCOME_UNKNOWN"`, `"code":"TOOL_NOT_STARTED"`} {
				if !bytes.Contains(tail[i].Raw, []byte(code)) {
					t.Fatalf("result %d: %s", i, tail[i].Raw)
				}
			}
			if !bytes.Contains(tail[3].Raw, []byte(`"reason":{"kind":"interrupted"}`)) {
				t.Fatalf("turn end %s", tail[3].Raw)
			}
			if _, err := st2.Writer(ctx, v4WriteID); err != nil {
				t.Fatalf("writer after resume: %v", err)
			}
		})
	}
}

// TestV4Superseded: a v0 writer never appends to a session whose v4 successor appeared.
func TestV4Superseded(t *testing.T) {
	_, b, file := v4Store(t, "raw-root")
	if err := os.WriteFile(filepath.Join(filepath.Dir(file), "session.v5.jsonl"), []byte(`{"type":"session","version":5}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.requireWritable(file); err == nil || !strings.Contains(err.Error(), "newer format v5") {
		t.Fatalf("a v4 write under a v5 file: %v", err)
	}
}

// TestV4Fork: the child of a v4 session is a v4 session — seeded, naming its parent, the inherited cut on
// its last `session/end-seed {"inherited":true}` — that the harness's v4 code restores to the parent's
// events, the marker and what is appended to the child after; the parent is untouched.
func TestV4Fork(t *testing.T) {
	ctx := context.Background()
	for _, root := range []string{"raw-root", "zstd-root"} {
		t.Run(root, func(t *testing.T) {
			st, b, file := v4Store(t, root)
			parentBytes := readFileT(t, file)
			parent, err := b.LoadStored(ctx, v4WriteID)
			if err != nil {
				t.Fatal(err)
			}
			child, err := st.Fork(ctx, v4WriteID, nil, "child-"+root)
			if err != nil {
				t.Fatalf("fork: %v", err)
			}
			w, err := st.Writer(ctx, child)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Accept(v4Turn(3, "call-3")); err != nil {
				t.Fatalf("append to the child: %v", err)
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(readFileT(t, file), parentBytes) {
				t.Fatal("the parent changed")
			}
			cfile := filepath.Join(filepath.Dir(filepath.Dir(file)), child, filepath.Base(file))
			r, err := harness.GetFormatsV4(t).Decode(cfile)
			if err != nil || r.Refusal != "" {
				t.Fatalf("the harness's v4 code on the child: %v %s", err, r.Refusal)
			}
			if !strings.Contains(r.Warnings, "inheritedEventCount=26") {
				t.Fatalf("the harness's cut: %s", r.Warnings)
			}
			want := fmt.Sprintf(`{"version":4,"id":%q,"createdAt":`, child)
			if !bytes.HasPrefix(r.Header, []byte(want)) || !bytes.Contains(r.Header, []byte(`"parentSession":"`+v4WriteID+`","isSeeded":true,"delegationDepth":0}`)) {
				t.Fatalf("child header %s", r.Header)
			}
			c, err := b.LoadStored(ctx, child)
			if err != nil {
				t.Fatal(err)
			}
			if got := eventLines(c); !bytes.Equal(got, r.Events) || !bytes.HasPrefix(got, eventLines(parent)) {
				t.Fatal("the child's events differ from the harness's restore or do not start with the parent's")
			}
			if c.Later == nil || c.Later.Cut != 26 || c.Events[26].Type != "session/end-seed" {
				t.Fatalf("child cut %+v", c.Later)
			}
		})
	}
}

// TestV4Compact: a manual compaction of a v4 session writes v4's compaction bracket — the summary naming
// an exact current surface span that leaves the protected system head alone, the checkpoint a
// `compact-checkpoint` user message replacing the span with {op:"replace",startSeq,endSeq} — which the
// harness's v4 code accepts; the surface then holds the head, the checkpoint and the newest node.
func TestV4Compact(t *testing.T) {
	ctx := context.Background()
	for _, root := range []string{"raw-root", "zstd-root"} {
		t.Run(root, func(t *testing.T) {
			st, b, file := v4Store(t, root)
			w, err := st.Writer(ctx, v4WriteID)
			if err != nil {
				t.Fatal(err)
			}
			out, err := compaction.Compact(ctx, w, compaction.Request{Summarizer: compaction.NewSummarizer(config.Default().Compaction)})
			if err != nil || out.Nothing {
				t.Fatalf("compact: %+v %v", out, err)
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			p := agreeWithHarness(t, b, file)
			fold, err := generation.FoldSurface(4, p.Events)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(fold.Nodes); n != 3 || p.Events[fold.Nodes[0]].Type != "system/message" ||
				!bytes.Contains(p.Events[fold.Nodes[1]].Raw, []byte(`"kind":"compact-checkpoint"`)) {
				t.Fatalf("surface after the compaction: %v", fold.Nodes)
			}
			if !bytes.Contains(p.Events[fold.Nodes[1]].Raw, []byte(`"surfaceOp":{"op":"replace","startSeq":`)) {
				t.Fatalf("checkpoint %s", p.Events[fold.Nodes[1]].Raw)
			}
		})
	}
}

// TestV4Prune: the tool-result pruner on a v4 session, inside an open turn, writes v4's shapes — a
// compaction/prune naming the one result as an exact current-surface span, then the result's copy whose
// tool-role content is cut around the marker, replacing it with {op:"replace",startSeq,endSeq} — which the
// harness's v4 code accepts, before and after the turn ends. On an idle session it is refused and writes
// nothing.
func TestV4Prune(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default().Pruner
	for _, root := range []string{"raw-root", "zstd-root"} {
		t.Run(root, func(t *testing.T) {
			st, b, file := v4Store(t, root)
			w, err := st.Writer(ctx, v4WriteID)
			if err != nil {
				t.Fatal(err)
			}
			before := readFileT(t, file)
			if _, err := compaction.PruneSession(ctx, w, cfg); eventstore.AsCommandError(err) == nil {
				t.Fatalf("prune of an idle session: %v", err)
			}
			if !bytes.Equal(readFileT(t, file), before) || w.Pending() != 0 {
				t.Fatal("a refused prune wrote")
			}
			// an open turn whose tool result is over the threshold, in two text blocks
			turn := v4Turn(3, "call-3")
			big := strings.Repeat("a", cfg.ThresholdChars) + "ü"
			turn[5] = []byte(`{"type":"tool/result","data":{"turn":3,"step":1,"message":{"role":"tool","source":{"kind":"tool","callId":"call-3"},"toolCallId":"call-3","content":[{"type":"text","text":"` + big + `"},{"type":"text","text":"tail"}],"isError":false,"id":"r-3"}},"surfaceOp":"append"}`)
			if err := w.Accept(turn[:7]); err != nil {
				t.Fatal(err)
			}
			out, err := compaction.PruneSession(ctx, w, cfg)
			if err != nil || len(out.Pruned) != 1 || out.Pruned[0].CallID != "call-3" {
				t.Fatalf("prune: %+v %v", out, err)
			}
			pr := out.Pruned[0]
			if pr.CharsBefore != cfg.ThresholdChars+5 || pr.CharsAfter > cfg.ThresholdChars {
				t.Fatalf("pruned %+v", pr)
			}
			p := agreeWithHarness(t, b, file)
			orig, repl := p.Events[pr.OriginalSeq], p.Events[pr.ReplacementSeq]
			rec := p.Events[pr.ReplacementSeq-1]
			want := fmt.Sprintf(`"data":{"shadowedRange":{"start":%d,"end":%d},"shadowedSeqs":[%d],`, orig.Seq, orig.Seq, orig.Seq)
			if rec.Type != "compaction/prune" || !bytes.Contains(rec.Raw, []byte(want)) {
				t.Fatalf("prune record %s", rec.Raw)
			}
			wantOp := fmt.Sprintf(`"sourceEventSeqs":[%d],"surfaceOp":{"op":"replace","startSeq":%d,"endSeq":%d}`, orig.Seq, orig.Seq, orig.Seq)
			if !bytes.Contains(repl.Raw, []byte(wantOp)) || !bytes.Contains(repl.Raw, []byte(config.PruneMarker[2:10])) ||
				!bytes.Contains(repl.Raw, []byte(`"isError":false,"id":"r-3"}`)) || !bytes.Contains(repl.Raw, []byte(`"text":"tail"`)) {
				t.Fatalf("replacement %s", repl.Raw)
			}
			fold, err := generation.FoldSurface(4, p.Events)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(fold.Nodes, orig.Seq) || !slices.Contains(fold.Nodes, repl.Seq) {
				t.Fatalf("surface %v after pruning %d into %d", fold.Nodes, orig.Seq, repl.Seq)
			}
			// a second pass has nothing left over the threshold; the turn then ends as v4 requires
			if again, err := compaction.PruneSession(ctx, w, cfg); err != nil || len(again.Pruned) != 0 {
				t.Fatalf("second prune: %+v %v", again, err)
			}
			if err := w.Accept(turn[7:]); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			agreeWithHarness(t, b, file)
		})
	}
}

// TestV4KeepPending: events a v4 writer could not append are kept beside the v4 file, named after it.
func TestV4KeepPending(t *testing.T) {
	st, b, file := v4Store(t, "raw-root")
	ins, err := st.Inspect(context.Background(), v4WriteID)
	if err != nil {
		t.Fatal(err)
	}
	side, err := b.KeepPending(context.Background(), ins.Header, ins.Events[:1])
	if err != nil || !strings.HasPrefix(side, file+".pending-") {
		t.Fatalf("sidecar %q, %v; want beside %s", side, err, file)
	}
}
