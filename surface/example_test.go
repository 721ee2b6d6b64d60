package surface

import (
	"errors"
	"slices"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
)

// workedExample is spec/events.md §5.4: turn 1 with a tool step and a text step, then a prune (seq 18)
// and a compaction (seq 21) in turn 2.
func workedExample(t testing.TB) []event.Event {
	chunk := func(seq int64) event.Event {
		return ev(t, "assistant/chunk", seq, `{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"x"}}`)
	}
	return []event.Event{
		ev(t, "turn/start", 0, `{"turn":1}`),
		ev(t, "step/start", 1, `{"turn":1,"step":1}`),
		userMsg(t, 2, "u1", "list files", "surfaceOp", `"append"`),
		ev(t, "request/header", 3, `{"header":{"config":{"provider":"p","model":"m"}},"reason":"initial"}`),
		chunk(4), chunk(5), chunk(6),
		asstMsg(t, 7, "a1", `[{"type":"tool-call","id":"c1","name":"ls","arguments":"{}"}]`,
			"sourceEventSeqs", "[4,5,6]", "surfaceOp", `"append"`),
		ev(t, "tool/call", 8, `{"turn":1,"step":1,"callId":"c1","name":"ls","arguments":"{}"}`),
		toolRes(t, 9, "t1", "c1", `a.txt\nb.txt`, false, "sourceEventSeqs", "[8]", "surfaceOp", `"append"`),
		ev(t, "step/end", 10, `{"turn":1,"step":1}`),
		ev(t, "step/start", 11, `{"turn":1,"step":2}`),
		chunk(12),
		asstMsg(t, 13, "a2", `[{"type":"text","text":"Two files."}]`, "sourceEventSeqs", "[12]", "surfaceOp", `"append"`),
		ev(t, "step/end", 14, `{"turn":1,"step":2}`),
		ev(t, "turn/end", 15, `{"turn":1,"reason":{"kind":"completed"}}`),
		ev(t, "turn/start", 16, `{"turn":2}`),
		ev(t, "compaction/prune", 17, `{"shadowedRange":{"start":9,"end":9},"shadowedSeqs":[9],"shadowedTokenCount":5}`),
		toolRes(t, 18, "t1", "c1", "[pruned]", false, "sourceEventSeqs", "[9]", "surfaceOp", replaceOpJSON(9, 9)),
		ev(t, "compaction/start", 19, `{"compactionId":"X","turn":2}`),
		ev(t, "compaction/summary", 20, `{"compactionId":"X","summary":[{"type":"text","text":"sum"}],"shadowedRange":{"start":2,"end":18},"shadowedSeqs":[2,7,18]}`),
		ev(t, "user/message", 21, `{"id":"s1","role":"user","content":[{"type":"text","text":"summary"}],"source":{"kind":"plugin","plugin":"compaction"}}`,
			"sourceEventSeqs", "[19,20,2,7,18]", "surfaceOp", replaceOpJSON(2, 18)),
		ev(t, "compaction/end", 22, `{"compactionId":"X","turn":2}`),
	}
}

func TestWorkedExample(t *testing.T) {
	events := workedExample(t)

	turn1 := mustFold(t, events[:16])
	if !slices.Equal(turn1.Nodes, []int64{2, 7, 9, 13}) || len(turn1.Replacements) != 0 {
		t.Fatalf("turn 1 surface %s", turn1.JSON())
	}
	msgs, err := DeriveMessages(events[:16], turn1)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs := []string{"u1", "a1", "t1", "a2"}
	if len(msgs) != len(wantIDs) {
		t.Fatalf("turn 1: %d messages", len(msgs))
	}
	for i, m := range msgs {
		if id, _ := event.Lookup(m, "id"); string(id) != `"`+wantIDs[i]+`"` {
			t.Fatalf("turn 1 message %d = %s", i, m)
		}
	}
	wantT1 := `{"id":"t1","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"a.txt\nb.txt"}],"isError":false}],"source":{"kind":"tool","callId":"c1"}}`
	if string(msgs[2]) != wantT1 {
		t.Fatalf("t1 = %s", msgs[2])
	}

	afterPrune := mustFold(t, events[:19])
	if !slices.Equal(afterPrune.Nodes, []int64{2, 7, 18, 13}) || afterPrune.Generation != 1 {
		t.Fatalf("after prune %s gen %d", afterPrune.JSON(), afterPrune.Generation)
	}

	r := mustFold(t, events)
	const want = `{"nodes":[21,13],"replacements":[{"seq":18,"start":9,"end":9,"shadowedSeqs":[9]},{"seq":21,"start":2,"end":18,"shadowedSeqs":[2,7,18]}]}`
	if string(r.JSON()) != want || r.Generation != 2 {
		t.Fatalf("fold %s gen %d", r.JSON(), r.Generation)
	}
	msgs, err = DeriveMessages(events, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || string(msgs[0]) != `{"id":"s1","role":"user","content":[{"type":"text","text":"summary"}],"source":{"kind":"plugin","plugin":"compaction"}}` {
		t.Fatalf("messages %q", msgs)
	}
	if id, _ := event.Lookup(msgs[1], "id"); string(id) != `"a2"` {
		t.Fatalf("second message %s", msgs[1])
	}

	// Classification: the two replacements' victims are shadowed, compaction records log-only.
	cls := Classify(events, r)
	wantClass := map[int64]Class{2: Shadowed, 7: Shadowed, 9: Shadowed, 18: Shadowed, 13: Current, 21: Current}
	for i, c := range cls {
		w, ok := wantClass[int64(i)]
		if !ok {
			w = LogOnly
		}
		if c != w {
			t.Fatalf("seq %d: %s, want %s", i, c, w)
		}
	}

	// Traces.
	tr, err := NewTracer(events)
	if err != nil {
		t.Fatal(err)
	}
	traces := map[int64]string{
		9:  `{"seq":9,"type":"tool/result","state":"shadowed","replacedBy":18,"replacementChain":[18,21],"replacedEventSeqs":[],"sourceEventSeqs":[8],"derivedEventSeqs":[18]}`,
		18: `{"seq":18,"type":"tool/result","state":"shadowed","replacedBy":21,"replacementChain":[21],"replacedEventSeqs":[9],"sourceEventSeqs":[9],"derivedEventSeqs":[21]}`,
		21: `{"seq":21,"type":"user/message","state":"current","replacedBy":null,"replacementChain":[],"replacedEventSeqs":[2,7,18],"sourceEventSeqs":[19,20,2,7,18],"derivedEventSeqs":[]}`,
		19: `{"seq":19,"type":"compaction/start","state":"log-only","replacedBy":null,"replacementChain":[],"replacedEventSeqs":[],"sourceEventSeqs":[],"derivedEventSeqs":[21]}`,
		2:  `{"seq":2,"type":"user/message","state":"shadowed","replacedBy":21,"replacementChain":[21],"replacedEventSeqs":[],"sourceEventSeqs":[],"derivedEventSeqs":[21]}`,
		8:  `{"seq":8,"type":"tool/call","state":"log-only","replacedBy":null,"replacementChain":[],"replacedEventSeqs":[],"sourceEventSeqs":[],"derivedEventSeqs":[9]}`,
		13: `{"seq":13,"type":"assistant/message","state":"current","replacedBy":null,"replacementChain":[],"replacedEventSeqs":[],"sourceEventSeqs":[12],"derivedEventSeqs":[]}`,
	}
	for seq, want := range traces {
		got, err := tr.Trace(seq)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.JSON()) != want {
			t.Fatalf("trace %d:\n got %s\nwant %s", seq, got.JSON(), want)
		}
		one, err := TraceOf(events, seq)
		if err != nil || string(one.JSON()) != want {
			t.Fatalf("TraceOf %d = %s, %v", seq, one.JSON(), err)
		}
	}
	if got := tr.Seqs(); !slices.Equal(got, []int64{2, 7, 9, 18, 21}) {
		t.Fatalf("trace seqs %v", got)
	}

	// Balance over the compacted surface [21, 13], and over turn 1's.
	if b, err := Balance(events, r); err != nil || len(b) != 3 || b[0] != 0 || b[1] != 0 || b[2] != 0 {
		t.Fatalf("balance %v %v", b, err)
	}
	if b, err := Balance(events[:16], turn1); err != nil || !slices.Equal(b, []int{0, 0, 1, 0, 0}) {
		t.Fatalf("turn 1 balance %v %v", b, err)
	}
}

// TestWorkedExampleFailures replays the spec's listed failures through Fold and, atomically, Folder.
func TestWorkedExampleFailures(t *testing.T) {
	events := workedExample(t)
	cases := []struct {
		name string
		at   int64 // the bad event replaces this seq (or is appended at len)
		bad  event.Event
		want string
	}{
		{"replace a shadowed start", 23,
			userMsg(t, 23, "x", "x", "sourceEventSeqs", "[9,13]", "surfaceOp", replaceOpJSON(9, 13)),
			"surface replace: start seq 9 not found in surface"},
		{"prune citing the call instead of the result", 18,
			toolRes(t, 18, "t1", "c1", "[pruned]", false, "sourceEventSeqs", "[8]", "surfaceOp", replaceOpJSON(9, 9)),
			"surface replace: sourceEventSeqs must include every shadowed surface node; missing 9"},
		{"prune changing isError", 18,
			toolRes(t, 18, "t1", "c1", "[pruned]", true, "sourceEventSeqs", "[9]", "surfaceOp", replaceOpJSON(9, 9)),
			"tool/result surface replacement may change only content"},
		{"range backwards by position", 23,
			userMsg(t, 23, "x", "x", "sourceEventSeqs", "[13,21]", "surfaceOp", replaceOpJSON(13, 21)),
			"surface replace: start seq 13 (index 1) is after end seq 21 (index 0)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			log := append(append([]event.Event{}, events[:c.at]...), c.bad)
			if _, err := Fold(log); err == nil || err.Error() != c.want {
				t.Fatalf("Fold: %v, want %q", err, c.want)
			}
			f := NewFolder(0)
			for _, e := range events[:c.at] {
				if err := f.Push(e); err != nil {
					t.Fatal(err)
				}
			}
			before := f.Result().JSON()
			err := f.Push(c.bad)
			if err == nil || err.Error() != c.want {
				t.Fatalf("Push: %v, want %q", err, c.want)
			}
			if got := f.Result().JSON(); string(got) != string(before) || f.NextSeq() != c.at {
				t.Fatalf("failed push changed the folder: %s -> %s", before, got)
			}
			// The folder still accepts the log's real continuation.
			for _, e := range events[c.at:] {
				if err := f.Push(e); err != nil {
					t.Fatal(err)
				}
			}
			var te *Error
			if _, err := TraceOf(log, 0); !errors.As(err, &te) || te.Code != "INVALID_SURFACE" || te.Message != "invalid session surface: "+c.want {
				t.Fatalf("TraceOf: %v", err)
			}
		})
	}
}
