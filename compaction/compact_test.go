package compaction

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/config"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/fixtures"
)

// The generated fixture sessions (../shared/fixtures/generated/NAMES.tsv).
const (
	cleanID     = "main-session-fa821f4b-98fd-46aa-86bc-0955a88ef4b8"
	compactedID = "main-session-39ade10b-6855-483e-897d-dd835505a4e6"
)

// liveFixture copies the generated raw store and returns a live writer of session id.
func liveFixture(t *testing.T, id string) (*eventstore.Store, *eventstore.Session, string) {
	t.Helper()
	root := fixtures.CopyTree(t, fixtures.Path(t, "generated", "raw"))
	return liveAt(t, root, id)
}

func liveAt(t *testing.T, root, id string) (*eventstore.Store, *eventstore.Session, string) {
	t.Helper()
	b, err := jsonl.Open(root, jsonl.None)
	if err != nil {
		t.Fatal(err)
	}
	st := eventstore.New(b)
	w, err := st.Writer(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	return st, w, w.Snapshot().Path
}

// fixed is a summarizer with a canned answer; during runs inside its call, standing in for whatever
// else writes the session while a summary is made.
type fixed struct {
	text   string
	err    error
	during func()
	got    Input
}

func (f *fixed) Summarize(ctx context.Context, in Input) (Summary, error) {
	f.got = in
	if f.during != nil {
		f.during()
	}
	if f.err != nil {
		return Summary{}, f.err
	}
	return Summary{Text: []string{f.text}, Provider: "dshfs", Model: "test", MaxTokens: 8192}, nil
}

func types(evs []event.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

func member(t *testing.T, e event.Event, keys ...string) string {
	t.Helper()
	v, ok := event.Lookup(e.Raw, keys...)
	if !ok {
		return "<absent>"
	}
	return string(v)
}

func accept(t *testing.T, w *eventstore.Session, lines ...string) {
	t.Helper()
	bs := make([][]byte, len(lines))
	for i, l := range lines {
		bs[i] = []byte(l)
	}
	if err := w.Accept(bs); err != nil {
		t.Fatal(err)
	}
}

func TestCompactKeepsEveryEvent(t *testing.T) {
	ctx := context.Background()
	_, w, path := liveFixture(t, cleanID)
	before := w.Snapshot()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := &fixed{text: "The user asked about npm test; one auth test failed."}
	out, err := Compact(ctx, w, Request{Summarizer: sum})
	if err != nil {
		t.Fatal(err)
	}
	after := w.Snapshot()
	added := after.Events[len(before.Events):]
	if got := types(added); !slices.Equal(got, []string{"compaction/start", "compaction/summary", "user/message", "compaction/end"}) {
		t.Fatalf("appended %v", got)
	}
	if after.Durable != len(after.Events) {
		t.Fatalf("not flushed: %d of %d durable", after.Durable, len(after.Events))
	}
	wantShadowed := before.Fold.Nodes[:len(before.Fold.Nodes)-1]
	if !slices.Equal(out.Shadowed, wantShadowed) {
		t.Fatalf("shadowed %v, want everything but the newest node %v", out.Shadowed, wantShadowed)
	}
	newest := before.Fold.Nodes[len(before.Fold.Nodes)-1]
	if got := after.Fold.Nodes; !slices.Equal(got, []int64{added[2].Seq, newest}) {
		t.Fatalf("surface after = %v", got)
	}
	// The envelope of the checkpoint: sourceEventSeqs = start, summary, shadowed…; replace of the span.
	wantSources := fmt.Sprint(append([]int64{added[0].Seq, added[1].Seq}, wantShadowed...))
	if got := member(t, added[2], "sourceEventSeqs"); strings.ReplaceAll(got, ",", " ") != wantSources {
		t.Errorf("sourceEventSeqs %s, want %s", got, wantSources)
	}
	if got, want := member(t, added[2], "surfaceOp"), fmt.Sprintf(`{"op":"replace","start":%d,"end":%d}`, wantShadowed[0], wantShadowed[len(wantShadowed)-1]); got != want {
		t.Errorf("surfaceOp %s, want %s", got, want)
	}
	if got := member(t, added[0], "data"); got != `{"compactionId":"`+out.CompactionID+`","turn":null}` {
		t.Errorf("start data %s", got)
	}
	if got := member(t, added[3], "data"); got != `{"compactionId":"`+out.CompactionID+`","turn":null}` {
		t.Errorf("end data %s", got)
	}
	// Every original byte is still there: the log only grew.
	now, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(now, raw) {
		t.Fatal("the artifact no longer starts with its original bytes")
	}
	// The summarizer saw the shadowed messages and the request prefix.
	if len(sum.got.Messages) != len(wantShadowed) || sum.got.System == nil {
		t.Errorf("summarizer input: %d messages (want %d), system %q", len(sum.got.Messages), len(wantShadowed), sum.got.System)
	}
	recs, err := Records(after.Events, after.Fold)
	if err != nil {
		t.Fatal(err)
	}
	if last := recs[len(recs)-1]; last.State != Complete || last.CompactionID != out.CompactionID {
		t.Fatalf("record %+v", last)
	}
	if got, want := out.Message(), fmt.Sprintf("Compacted %d history items (~%d tokens).", len(wantShadowed), out.ShadowedTokens); got != want {
		t.Errorf("message %q", got)
	}
}

func TestCompactRefusals(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		setup func(t *testing.T, w *eventstore.Session)
		rng   *[2]int64
		fail  eventstore.Failure
		code  string
		msg   string
	}{
		{"open turn", func(t *testing.T, w *eventstore.Session) {
			accept(t, w, `{"type":"turn/start","data":{"turn":3}}`)
		}, nil, eventstore.Busy, eventstore.CodeOpenTurn, "manual compaction: the session already has an open turn"},
		{"live lock", func(t *testing.T, w *eventstore.Session) {
			accept(t, w, `{"type":"compaction/start","data":{"compactionId":"x","turn":null}}`)
		}, nil, eventstore.Busy, eventstore.CodeCompactionLock, "compaction: compaction already in progress; the session compaction lock is already active"},
		{"start missing", nil, &[2]int64{3, 33}, eventstore.Invalid, CodeInvalid, "compactRegion: start seq 3 not found in surface"},
		{"end missing", nil, &[2]int64{2, 34}, eventstore.Invalid, CodeInvalid, "compactRegion: end seq 34 not found in surface"},
		{"reversed", nil, &[2]int64{33, 2}, eventstore.Invalid, CodeInvalid, "compactRegion: start seq 33 (position 3) is after end seq 2 (position 0) on the surface"},
		{"splits a pair at the start", nil, &[2]int64{23, 33}, eventstore.Invalid, CodeInvalid, "compactRegion: start seq 23 is not a balanced boundary (would split a step's tool-call/result pair)"},
		{"splits a pair at the end", nil, &[2]int64{2, 21}, eventstore.Invalid, CodeInvalid, "compactRegion: end seq 21 is not a balanced boundary (would split a step, or the step is still open)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, w, _ := liveFixture(t, cleanID)
			if tc.setup != nil {
				tc.setup(t, w)
			}
			n := len(w.Snapshot().Events)
			_, err := Compact(ctx, w, Request{Range: tc.rng, Summarizer: &fixed{text: "x"}})
			var ce *eventstore.CommandError
			if !errors.As(err, &ce) || ce.Failure != tc.fail || ce.Code != tc.code || ce.Message != tc.msg {
				t.Fatalf("got %#v, want %s/%s %q", err, tc.fail, tc.code, tc.msg)
			}
			if got := len(w.Snapshot().Events); got != n {
				t.Fatalf("a refused compaction wrote %d events", got-n)
			}
		})
	}
}

func TestCompactNothingWritesNothing(t *testing.T) {
	ctx := context.Background()
	_, w, _ := liveFixture(t, cleanID)
	// One compaction leaves checkpoint + newest node; a second selects the checkpoint alone, which does
	// not shrink; an explicit range of the newest node alone is fine. A one-node surface selects nothing.
	st := eventstore.New(mustJSONL(t, t.TempDir()))
	h := event.Header{ID: "one", CreatedAt: 1}
	if err := st.Create(ctx, h); err != nil {
		t.Fatal(err)
	}
	one, err := st.Writer(ctx, "one")
	if err != nil {
		t.Fatal(err)
	}
	accept(t, one, `{"type":"user/message","data":{"content":[{"type":"text","text":"hello"}],"source":{"kind":"user"},"role":"user","id":"u1"},"surfaceOp":"append"}`)
	out, err := Compact(ctx, one, Request{Summarizer: &fixed{text: "x"}})
	if err != nil || !out.Nothing || out.Message() != "No compactable history yet." {
		t.Fatalf("got %+v, %v", out, err)
	}
	if n := len(one.Snapshot().Events); n != 1 {
		t.Fatalf("nothing to compact wrote events: %d", n)
	}
	_ = w
}

func mustJSONL(t *testing.T, root string) eventstore.Backend {
	t.Helper()
	b, err := jsonl.Open(root, jsonl.None)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// failedEnd checks the last event closes the compaction with the given error text and the surface is
// what it was.
func failedEnd(t *testing.T, w *eventstore.Session, before eventstore.Snapshot, id, errText string) {
	t.Helper()
	after := w.Snapshot()
	added := after.Events[len(before.Events):]
	last := added[len(added)-1]
	want := `{"compactionId":"` + id + `","turn":null,"error":` + string(event.Stringify(event.String(errText))) + `}`
	if last.Type != "compaction/end" || member(t, last, "data") != want {
		t.Fatalf("last event %s, want compaction/end %s", last.Raw, want)
	}
	for _, e := range added {
		if e.Type == "compaction/summary" || e.Type == "user/message" && strings.Contains(string(e.Raw), `"plugin":"compact"`) {
			t.Fatalf("a failed compaction wrote %s", e.Raw)
		}
	}
	if after.Durable != len(after.Events) {
		t.Fatal("the failure record was not flushed")
	}
}

func TestCompactFailuresAreRecorded(t *testing.T) {
	ctx := context.Background()
	t.Run("summarizer", func(t *testing.T) {
		_, w, _ := liveFixture(t, cleanID)
		before := w.Snapshot()
		out, err := Compact(ctx, w, Request{Summarizer: &fixed{err: errors.New("summary unavailable")}})
		var ce *eventstore.CommandError
		if !errors.As(err, &ce) || ce.Failure != eventstore.Failed || ce.Code != CodeSummaryFailed ||
			ce.Message != "manual compaction could not produce a smaller summary: summary unavailable" {
			t.Fatalf("got %#v", err)
		}
		failedEnd(t, w, before, out.CompactionID, "summary unavailable")
		if !slices.Equal(w.Snapshot().Fold.Nodes, before.Fold.Nodes) {
			t.Fatal("the surface changed")
		}
	})
	t.Run("not smaller", func(t *testing.T) {
		_, w, _ := liveFixture(t, cleanID)
		before := w.Snapshot()
		out, err := Compact(ctx, w, Request{Summarizer: &fixed{text: strings.Repeat("long ", 4000)}})
		var ce *eventstore.CommandError
		if !errors.As(err, &ce) || ce.Failure != eventstore.Failed || ce.Code != CodeNotSmaller ||
			!strings.Contains(ce.Message, "summary is not smaller than the shadowed content (") {
			t.Fatalf("got %#v", err)
		}
		failedEnd(t, w, before, out.CompactionID, strings.TrimPrefix(ce.Message, "manual compaction could not produce a smaller summary: "))
	})
	t.Run("span changed", func(t *testing.T) {
		_, w, _ := liveFixture(t, cleanID)
		before := w.Snapshot()
		// While the summary is made, the first user message of the span is replaced.
		sum := &fixed{text: "short", during: func() {
			accept(t, w, `{"type":"user/message","data":{"content":[{"type":"text","text":"edited"}],"source":{"kind":"user"},"role":"user","id":"u2"},"sourceEventSeqs":[2],"surfaceOp":{"op":"replace","start":2,"end":2}}`)
		}}
		out, err := Compact(ctx, w, Request{Summarizer: sum})
		var ce *eventstore.CommandError
		wantCause := "compaction: the selected span is no longer a valid replacement target: compactRegion: start seq 2 not found in surface"
		if !errors.As(err, &ce) || ce.Failure != eventstore.Again || ce.Code != CodeChanged ||
			ce.Message != "the compacted history changed during manual compaction: "+wantCause {
			t.Fatalf("got %#v", err)
		}
		failedEnd(t, w, before, out.CompactionID, wantCause)
		// The test's replacement stays, and no checkpoint is on the surface.
		nodes := w.Snapshot().Fold.Nodes
		if replacement := int64(len(before.Events) + 1); nodes[0] != replacement {
			t.Fatalf("surface %v lost the concurrent replacement", nodes)
		}
	})
	t.Run("append after the span", func(t *testing.T) {
		_, w, _ := liveFixture(t, cleanID)
		before := w.Snapshot()
		var appended int64
		sum := &fixed{text: "short", during: func() {
			appended = int64(len(w.Snapshot().Events))
			accept(t, w, `{"type":"user/message","data":{"content":[{"type":"text","text":"and one more thing"}],"source":{"kind":"user"},"role":"user","id":"u3"},"surfaceOp":"append"}`)
		}}
		out, err := Compact(ctx, w, Request{Summarizer: sum})
		if err != nil {
			t.Fatalf("an append after the span failed the compaction: %v", err)
		}
		nodes := w.Snapshot().Fold.Nodes
		newest := before.Fold.Nodes[len(before.Fold.Nodes)-1]
		if want := []int64{out.SummarySeq + 1, newest, appended}; !slices.Equal(nodes, want) {
			t.Fatalf("surface %v, want %v", nodes, want)
		}
	})
}

func TestTurnsWaitForARunningCompaction(t *testing.T) {
	_, w, _ := liveFixture(t, cleanID)
	var err error
	sum := &fixed{text: "short", during: func() {
		err = w.Accept([][]byte{[]byte(`{"type":"turn/start","data":{"turn":3}}`)})
	}}
	if _, cerr := Compact(context.Background(), w, Request{Summarizer: sum}); cerr != nil {
		t.Fatal(cerr)
	}
	var ce *eventstore.CommandError
	if !errors.As(err, &ce) || ce.Failure != eventstore.Busy || !strings.Contains(ce.Message, "turn/start cannot cross an open standalone compaction") {
		t.Fatalf("turn/start during a compaction: %v", err)
	}
	accept(t, w, `{"type":"turn/start","data":{"turn":3}}`) // and after it, a turn may start
}

// TestCompactMatchesTheHarnessShape compacts the generated compaction fixture where the harness's own
// manual /compact ran (the prefix before seq 109), over the fixture's shadowed span (given explicitly:
// the fixture's run retained a tail of four nodes, where compactNow's retainTokens 0 would keep only the
// newest) with the fixture's summary text, and compares the four events with the fixture's: same keys in
// the same order (minus the fields only a model call, or the /compact command record, produces), same
// span, same checkpoint framing.
func TestCompactMatchesTheHarnessShape(t *testing.T) {
	ctx := context.Background()
	root := fixtures.CopyTree(t, fixtures.Path(t, "generated", "raw"))
	var path string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if strings.HasSuffix(filepath.Dir(p), compactedID) {
			path = p
		}
		return nil
	})
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cut := bytes.Index(full, []byte(`{"type":"compaction/start","seq":109,`))
	if cut < 0 {
		t.Fatal("fixture changed: no compaction/start at seq 109")
	}
	if err := os.WriteFile(path, full[:cut], 0o644); err != nil {
		t.Fatal(err)
	}
	var want []event.Value
	for _, l := range bytes.Split(full[cut:], []byte("\n"))[:4] {
		v, err := event.Parse(l)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, v)
	}
	summary, _ := want[1].Get("data")
	blocks, _ := summary.Get("summary")
	text := blocks.Arr[0].Obj[1].Value.Str

	_, w, _ := liveAt(t, root, compactedID)
	n := len(w.Snapshot().Events)
	if _, err := Compact(ctx, w, Request{Range: &[2]int64{73, 67}, Summarizer: &fixed{text: text}}); err != nil {
		t.Fatal(err)
	}
	got := w.Snapshot().Events[n:]
	// Only a model call writes these; only the /compact command record gives a sourceCommandId.
	dropped := map[string]bool{"rawOutput": true, "llmStreamCall": true, "usage": true, "sourceCommandId": true}
	for i, e := range got {
		g, err := e.Record()
		if err != nil {
			t.Fatal(err)
		}
		if gk, wk := keys(g, dropped), keys(want[i], dropped); gk != wk {
			t.Errorf("%s: keys %s, the harness's %s", e.Type, gk, wk)
		}
	}
	for _, k := range []string{"shadowedRange", "shadowedSeqs", "summary"} {
		if g, w := member(t, got[1], "data", k), string(mustLookup(t, full[cut:], 1, "data", k)); g != w {
			t.Errorf("summary %s: %s, the harness's %s", k, g, w)
		}
	}
	if g, w := member(t, got[2], "surfaceOp"), string(mustLookup(t, full[cut:], 2, "surfaceOp")); g != w {
		t.Errorf("surfaceOp %s, the harness's %s", g, w)
	}
	gc, _ := event.Lookup(got[2].Raw, "data", "content")
	wc := mustLookup(t, full[cut:], 2, "data", "content")
	if !bytes.Equal(gc, wc) {
		t.Errorf("checkpoint content\n got %s\nwant %s", gc, wc)
	}
}

func mustLookup(t *testing.T, lines []byte, i int, keys ...string) []byte {
	t.Helper()
	v, ok := event.Lookup(bytes.Split(lines, []byte("\n"))[i], keys...)
	if !ok {
		t.Fatalf("fixture line %d has no %v", i, keys)
	}
	return v
}

// keys lists an object's keys and its nested objects' keys, in order, skipping dropped ones.
func keys(v event.Value, dropped map[string]bool) string {
	var b strings.Builder
	for _, m := range v.Obj {
		if dropped[m.Key] {
			continue
		}
		b.WriteString(m.Key)
		if m.Value.Kind == event.KindObject {
			b.WriteString("{" + keys(m.Value, dropped) + "}")
		}
		b.WriteString(" ")
	}
	return b.String()
}

func TestPruneSession(t *testing.T) {
	ctx := context.Background()
	_, w, _ := liveFixture(t, cleanID)
	cfg := config.Default().Pruner
	if _, err := PruneSession(ctx, w, cfg); err == nil || eventstore.AsCommandError(err).Failure != eventstore.Busy ||
		!strings.Contains(err.Error(), "use compact") {
		t.Fatalf("prune without an open turn: %v", err)
	}
	head, tail := strings.Repeat("h", 5000)+"é", strings.Repeat("t", 2000)+"😀"
	big := head + strings.Repeat("m", 1_500_000) + tail
	n := int64(len(w.Snapshot().Events))
	accept(t, w,
		`{"type":"turn/start","data":{"turn":3}}`,
		`{"type":"step/start","data":{"turn":3,"step":1}}`,
		`{"type":"user/message","data":{"content":[{"type":"text","text":"cat the log"}],"source":{"kind":"user"},"role":"user","id":"u9"},"surfaceOp":"append"}`,
		`{"type":"assistant/message","data":{"turn":3,"step":1,"message":{"role":"assistant","content":[{"type":"tool-call","id":"c9","name":"bash","arguments":"{\"command\":\"cat log\"}"}],"source":{"kind":"model","provider":"p","model":"m"},"id":"a9"}},"sourceEventSeqs":[],"surfaceOp":"append"}`,
		`{"type":"tool/call","data":{"turn":3,"step":1,"callId":"c9","name":"bash","arguments":"{\"command\":\"cat log\"}"}}`,
		fmt.Sprintf(`{"type":"tool/result","data":{"turn":3,"step":1,"message":{"source":{"kind":"tool","callId":"c9"},"content":[{"type":"tool-result","toolCallId":"c9","content":[{"type":"image","data":"x"},{"type":"text","text":%q}],"isError":false}],"role":"user","id":"r9"},"meta":{"k":1}},"sourceEventSeqs":[%d],"surfaceOp":"append"}`, big, n+4),
	)
	resultSeq := n + 5
	out, err := PruneSession(ctx, w, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Pruned) != 1 || out.Pruned[0].OriginalSeq != resultSeq || out.Pruned[0].CallID != "c9" {
		t.Fatalf("pruned %+v", out.Pruned)
	}
	s := w.Snapshot()
	added := s.Events[resultSeq+1:]
	if got := types(added); !slices.Equal(got, []string{"compaction/prune", "tool/result"}) {
		t.Fatalf("appended %v", got)
	}
	if got, want := member(t, added[0], "data"), fmt.Sprintf(`{"shadowedRange":{"start":%d,"end":%d},"shadowedSeqs":[%d],"shadowedTokenCount":`, resultSeq, resultSeq, resultSeq); !strings.HasPrefix(got, want) {
		t.Errorf("prune record %s", got)
	}
	var text string
	inner, _ := event.Lookup(added[1].Raw, "data", "message", "content")
	cv, _ := event.Parse(inner)
	blocks, _ := cv.Arr[0].Get("content")
	if len(blocks.Arr) != 2 || str(blocks.Arr[0], "type") != "image" {
		t.Fatalf("blocks %s", event.Stringify(blocks))
	}
	text = str(blocks.Arr[1], "text")
	want := head[:4096] + config.PruneMarker + tail[len(tail)-1024-3:] // 1024 code points: the emoji is one
	if text != want || strings.Count(text, config.PruneMarker) != 1 {
		t.Fatalf("pruned text: %d bytes, head %q… tail …%q", len(text), text[:20], text[len(text)-20:])
	}
	if got := member(t, added[1], "data", "meta"); got != `{"k":1}` {
		t.Errorf("meta not kept: %s", got)
	}
	if got := member(t, added[1], "surfaceOp"); got != fmt.Sprintf(`{"op":"replace","start":%d,"end":%d}`, resultSeq, resultSeq) {
		t.Errorf("surfaceOp %s", got)
	}
	again, err := PruneSession(ctx, w, cfg)
	if err != nil || len(again.Pruned) != 0 || len(w.Snapshot().Events) != len(s.Events) {
		t.Fatalf("a second prune: %+v %v", again, err)
	}
}

func TestPruneContent(t *testing.T) {
	cfg := config.Pruner{ThresholdChars: 60, HeadChars: 10, TailChars: 5}
	text := func(s string) event.Value { return textBlock(s) }
	img := event.Object(event.Member{Key: "type", Value: event.String("image")})
	render := func(bs []event.Value) string { return string(event.Stringify(event.Array(bs...))) }
	m := config.PruneMarker
	cases := []struct {
		name string
		in   []event.Value
		want []event.Value // nil: not pruned
	}{
		{"within budget", []event.Value{text(strings.Repeat("a", 60))}, nil},
		{"one block", []event.Value{text(strings.Repeat("a", 10) + strings.Repeat("b", 50) + "ccccc")},
			[]event.Value{text(strings.Repeat("a", 10) + m + "ccccc")}},
		{"window spans blocks; middle block dropped; image kept", []event.Value{
			text("0123456789xx"), img, text(strings.Repeat("y", 50)), text("yyzzzzz")},
			[]event.Value{text("0123456789" + m), img, text("zzzzz")}},
		{"code points, not bytes", []event.Value{text(strings.Repeat("é", 70))},
			[]event.Value{text(strings.Repeat("é", 10) + m + strings.Repeat("é", 5))}},
	}
	for _, tc := range cases {
		got, _, _, ok := pruneContent(tc.in, cfg)
		if tc.want == nil {
			if ok {
				t.Errorf("%s: pruned %s", tc.name, render(got))
			}
			continue
		}
		if !ok || render(got) != render(tc.want) {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, render(got), render(tc.want))
		}
	}
}

func TestCompactCancelled(t *testing.T) {
	_, w, _ := liveFixture(t, cleanID)
	before := w.Snapshot()
	ctx, cancel := context.WithCancel(context.Background())
	sum := &fixed{text: "short", during: cancel}
	sum.err = context.Canceled
	out, err := Compact(ctx, w, Request{Summarizer: sum})
	var ce *eventstore.CommandError
	if !errors.As(err, &ce) || ce.Code != CodeCancelled || ce.Message != "manual compaction was cancelled: context canceled" {
		t.Fatalf("got %#v", err)
	}
	// the transaction is still closed and durable, though the caller's context is gone
	failedEnd(t, w, before, out.CompactionID, "context canceled")
}
