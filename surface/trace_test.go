package surface

import (
	"errors"
	"slices"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
)

// traceEvents is tracing.spec.ts's appendTraceEvents: a user message citing a chunk, replaced by an
// assistant summary, itself replaced in the next step.
func traceEvents(t testing.TB) []event.Event {
	return []event.Event{
		ev(t, "turn/start", 0, `{"turn":1}`),
		ev(t, "step/start", 1, `{"turn":1,"step":1}`),
		ev(t, "assistant/chunk", 2, `{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"draft"}}`),
		userMsg(t, 3, "m3", "original", "surfaceOp", `"append"`, "sourceEventSeqs", "[2]"),
		asstMsg(t, 4, "m4", `[{"type":"text","text":"summary one"}]`, "surfaceOp", replaceOpJSON(3, 3), "sourceEventSeqs", "[3,2]"),
		ev(t, "user/message", 5, `{"id":"m5","role":"user","content":[{"type":"text","text":"context"}],"source":{"kind":"plugin","plugin":"test"}}`, "surfaceOp", `"append"`),
		ev(t, "step/end", 6, `{"turn":1,"step":1}`),
		ev(t, "step/start", 7, `{"turn":1,"step":2}`),
		asstMsg(t, 8, "m8", `[{"type":"text","text":"summary two"}]`, "surfaceOp", replaceOpJSON(4, 4), "sourceEventSeqs", "[2,4]"),
	}
}

func TestTraceSpec(t *testing.T) {
	events := traceEvents(t)
	cases := []struct {
		seq  int64
		want string
	}{
		{3, `{"seq":3,"type":"user/message","state":"shadowed","replacedBy":4,"replacementChain":[4,8],"replacedEventSeqs":[],"sourceEventSeqs":[2],"derivedEventSeqs":[4]}`},
		{4, `{"seq":4,"type":"assistant/message","state":"shadowed","replacedBy":8,"replacementChain":[8],"replacedEventSeqs":[3],"sourceEventSeqs":[3,2],"derivedEventSeqs":[8]}`},
		{2, `{"seq":2,"type":"assistant/chunk","state":"log-only","replacedBy":null,"replacementChain":[],"replacedEventSeqs":[],"sourceEventSeqs":[],"derivedEventSeqs":[3,4,8]}`},
		{8, `{"seq":8,"type":"assistant/message","state":"current","replacedBy":null,"replacementChain":[],"replacedEventSeqs":[4],"sourceEventSeqs":[2,4],"derivedEventSeqs":[]}`},
		{5, `{"seq":5,"type":"user/message","state":"current","replacedBy":null,"replacementChain":[],"replacedEventSeqs":[],"sourceEventSeqs":[],"derivedEventSeqs":[]}`},
	}
	for _, c := range cases {
		tr, err := TraceOf(events, c.seq)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(tr.JSON()); got != c.want {
			t.Fatalf("seq %d:\n got %s\nwant %s", c.seq, got, c.want)
		}
	}
	// Fresh arrays per call.
	a, _ := TraceOf(events, 3)
	a.ReplacementChain[0] = 99
	a.SourceEventSeqs[0] = 99
	b, _ := TraceOf(events, 3)
	if b.ReplacementChain[0] != 4 || b.SourceEventSeqs[0] != 2 {
		t.Fatal("trace arrays are shared between calls")
	}
}

func TestTraceErrors(t *testing.T) {
	events := traceEvents(t)
	for _, seq := range []int64{-1, 9, 100} {
		_, err := TraceOf(events, seq)
		var e *Error
		if !errors.As(err, &e) || e.Code != "EVENT_NOT_FOUND" || e.Message != "no event at seq "+itoa(seq) {
			t.Fatalf("seq %d: %v", seq, err)
		}
	}
	// The target check comes before the fold: an unknown seq in an invalid log is still "not found".
	bad := []event.Event{
		userMsg(t, 0, "u", "a", "surfaceOp", `"append"`),
		userMsg(t, 1, "u", "b", "sourceEventSeqs", "[0,0]", "surfaceOp", `"append"`),
	}
	var e *Error
	if _, err := TraceOf(bad, 9); !errors.As(err, &e) || e.Code != "EVENT_NOT_FOUND" {
		t.Fatalf("unknown seq in invalid log: %v", err)
	}
	if _, err := TraceOf(bad, 0); !errors.As(err, &e) || e.Code != "INVALID_SURFACE" ||
		e.Error() != "invalid session surface: sourceEventSeqs must not contain duplicates" {
		t.Fatalf("invalid log: %v", err)
	}
	// A stored event whose seq does not match its position is not found.
	shifted := []event.Event{logOnly(t, "turn/start", 0), logOnly(t, "turn/start", 5)}
	if _, err := TraceOf(shifted, 1); !errors.As(err, &e) || e.Code != "EVENT_NOT_FOUND" {
		t.Fatalf("mismatched seq: %v", err)
	}
}

func TestTraceJSONEscapesType(t *testing.T) {
	tr := Trace{Seq: 1, Type: "a\"b\u2028", State: LogOnly}
	const want = `{"seq":1,"type":"a\"b` + "\u2028" + `","state":"log-only","replacedBy":null,"replacementChain":[],"replacedEventSeqs":[],"sourceEventSeqs":[],"derivedEventSeqs":[]}`
	if got := string(tr.JSON()); got != want {
		t.Fatalf("got %s", got)
	}
}

func TestBalance(t *testing.T) {
	call := func(ids ...string) string {
		s := "["
		for i, id := range ids {
			if i > 0 {
				s += ","
			}
			s += `{"type":"tool-call","id":"` + id + `","name":"bash","arguments":"{}"}`
		}
		return s + "]"
	}
	app := []string{"surfaceOp", `"append"`}
	cases := []struct {
		name   string
		events []event.Event
		want   []int
		err    string
	}{
		{"closed tool step", []event.Event{
			userMsg(t, 0, "u", "go", app...),
			asstMsg(t, 1, "a", call("c1"), app...),
			toolRes(t, 2, "t", "c1", "done", false, app...),
		}, []int{0, 0, 1, 0}, ""},
		{"open step", []event.Event{asstMsg(t, 0, "a", call("open"), app...)}, []int{0, 1}, ""},
		{"multiple calls", []event.Event{
			asstMsg(t, 0, "a", call("c1", "c2"), app...),
			toolRes(t, 1, "t1", "c1", "", false, app...),
			toolRes(t, 2, "t2", "c2", "", false, app...),
		}, []int{0, 2, 1, 0}, ""},
		{"neutral node inside a pair", []event.Event{
			asstMsg(t, 0, "a", call("c1"), app...),
			userMsg(t, 1, "u", "background", app...),
			toolRes(t, 2, "t", "c1", "", false, app...),
		}, []int{0, 1, 1, 0}, ""},
		{"text blocks are neutral", []event.Event{
			asstMsg(t, 0, "a", `[{"type":"reasoning","text":"r"},{"type":"text","text":"x"}]`, app...),
			userMsg(t, 1, "u", "x", app...),
		}, []int{0, 0, 0}, ""},
		{"empty surface", []event.Event{logOnly(t, "turn/start", 0)}, []int{0}, ""},
		{"result without a call", []event.Event{
			userMsg(t, 0, "u", "go", app...),
			toolRes(t, 1, "t", "c1", "", false, app...),
		}, nil, "tool-pairing balance: tool/result at surface seq 1 has no matching tool-call (corrupt surface)"},
		{"compaction removes the call but keeps the result", []event.Event{
			asstMsg(t, 0, "a", call("c1"), app...),
			toolRes(t, 1, "t", "c1", "", false, app...),
			userMsg(t, 2, "s", "summary", "sourceEventSeqs", "[0]", "surfaceOp", replaceOpJSON(0, 0)),
		}, nil, "tool-pairing balance: tool/result at surface seq 1 has no matching tool-call (corrupt surface)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Balance(c.events, mustFold(t, c.events))
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("err %v, want %s", err, c.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, c.want) {
				t.Fatalf("Balance = %v, %v; want %v", got, err, c.want)
			}
		})
	}
	// A node with no matching event.
	events := []event.Event{userMsg(t, 0, "u", "go", app...)}
	if _, err := Balance(events, &Result{Nodes: []int64{5}}); err == nil ||
		err.Error() != "tool-pairing balance: surface seq 5 has no matching session event (corrupt surface)" {
		t.Fatalf("missing event: %v", err)
	}
}

func TestDeriveMessages(t *testing.T) {
	app := []string{"surfaceOp", `"append"`}
	events := []event.Event{
		logOnly(t, "turn/start", 0),
		userMsg(t, 1, "u", "hello", app...),
		asstMsg(t, 2, "empty", `[]`, app...),                                // a node, no message
		asstMsg(t, 3, "a", `[{"type":"text","text":"hi"}]`, app...),         // projects data.message
		ev(t, "assistant/message", 4, `{"message":{"content":""}}`, app...), // "".length === 0
		ev(t, "assistant/message", 5, `{"message":{"content":{"length":0}}}`, app...),
		ev(t, "assistant/message", 6, `{"message":{"content":"x"}}`, app...),
		ev(t, "tool/result", 7, `{"turn":1}`, app...), // message undefined: skipped
		ev(t, "user/message", 8, `null`, app...),      // falsy data: skipped
		toolRes(t, 9, "t", "c", "out", false, app...),
		ev(t, "assistant/message", 10, `{"turn":1,"step":1,"message":{"id":"i","role":"assistant","content":[{"type":"text","text":"y"}],"source":{"kind":"model","provider":"p","model":"m"}},"interrupted":true}`, app...),
	}
	r := mustFold(t, events)
	if len(r.Nodes) != 10 {
		t.Fatalf("nodes %v", r.Nodes)
	}
	msgs, err := DeriveMessages(events, r)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"id":"u","role":"user","content":[{"type":"text","text":"hello"}],"source":{"kind":"user"}}`,
		`{"id":"a","role":"assistant","content":[{"type":"text","text":"hi"}],"source":{"kind":"model","provider":"mock","model":"mock"}}`,
		`{"content":"x"}`,
		`{"id":"t","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[{"type":"text","text":"out"}],"isError":false}],"source":{"kind":"tool","callId":"c"}}`,
		`{"id":"i","role":"assistant","content":[{"type":"text","text":"y"}],"source":{"kind":"model","provider":"p","model":"m"}}`,
	}
	if len(msgs) != len(want) {
		t.Fatalf("%d messages: %q", len(msgs), msgs)
	}
	for i := range want {
		if string(msgs[i]) != want[i] {
			t.Fatalf("message %d = %s, want %s", i, msgs[i], want[i])
		}
	}

	// Property access on null/undefined fails as the harness's TypeError does.
	bad := []event.Event{ev(t, "assistant/message", 0, `{"turn":1}`, app...)}
	if _, err := DeriveMessages(bad, mustFold(t, bad)); err == nil || err.Error() != "Cannot read properties of undefined (reading 'content')" {
		t.Fatalf("missing message: %v", err)
	}
	bad = []event.Event{ev(t, "tool/result", 0, `null`, app...)}
	if _, err := DeriveMessages(bad, mustFold(t, bad)); err == nil || err.Error() != "Cannot read properties of null (reading 'message')" {
		t.Fatalf("null data: %v", err)
	}
	if _, err := DeriveMessages(events, &Result{Nodes: []int64{42}}); err == nil {
		t.Fatal("node without event accepted")
	}
}

// TestCodeUnits: string indexing and spreads work on UTF-16 code units, as in JS.
func TestCodeUnits(t *testing.T) {
	got := codeUnits("a\u00e9\U0001F600")
	if len(got) != 4 || got[0] != "a" || got[1] != "\u00e9" || got[2] != "\xed\xa0\xbd" || got[3] != "\xed\xb8\x80" {
		t.Fatalf("%q", got)
	}
	// JS "\u{1F600}x".length is 3 and its [0] is the high surrogate.
	v, _ := prop(jsVal{event.String("\U0001F600x"), true}, "length")
	if v.v.Num != 3 {
		t.Fatalf("length %v", v.v.Num)
	}
	if v, _ := prop(jsVal{event.String("\U0001F600x"), true}, "0"); v.v.Str != "\xed\xa0\xbd" {
		t.Fatalf("[0] = %q", v.v.Str)
	}
	// {...""} copies nothing, {..."ab"} copies one member per code unit.
	if ms := spread(jsVal{event.String("ab"), true}); len(ms) != 2 || ms[1].Key != "1" || ms[1].Value.Str != "b" {
		t.Fatalf("spread %v", ms)
	}
}
