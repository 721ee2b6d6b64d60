package surface

import (
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
)

// TestValidationTexts pins every fold failure to the harness's exact text (surface.ts), and checks
// that a failed Push leaves the folder as it was.
func TestValidationTexts(t *testing.T) {
	u0 := func() event.Event { return userMsg(t, 0, "u0", "a", "surfaceOp", `"append"`) }
	u1 := func() event.Event { return userMsg(t, 1, "u1", "b", "surfaceOp", `"append"`) }
	tr0 := func() event.Event { return toolRes(t, 0, "t0", "c0", "out", false, "surfaceOp", `"append"`) }
	// rewrite0 is a tool/result rewriting seq 0 whose data is given verbatim.
	rewrite0 := func(data string) event.Event {
		return ev(t, "tool/result", 1, data, "sourceEventSeqs", "[0]", "surfaceOp", replaceOpJSON(0, 0))
	}
	const toolData = `{"turn":1,"step":1,"message":{"id":"t0","role":"user","content":[{"type":"tool-result","toolCallId":"c0","content":[{"type":"text","text":"NEW"}],"isError":false}],"source":{"kind":"tool","callId":"c0"}}%s}`
	withMeta := func(seq int64, meta string, extra ...string) event.Event {
		return ev(t, "tool/result", seq, `{"turn":1,"step":1,"message":{"id":"m","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[],"isError":false}],"source":{"kind":"tool","callId":"c"}},"meta":`+meta+`}`, extra...)
	}
	metaPair := func(a, b string) []event.Event {
		return []event.Event{withMeta(0, a, "surfaceOp", `"append"`), withMeta(1, b, "sourceEventSeqs", "[0]", "surfaceOp", replaceOpJSON(0, 0))}
	}

	cases := []struct {
		name   string
		events []event.Event
		want   string // "" = valid
	}{
		// contiguity
		{"gap", []event.Event{u0(), userMsg(t, 2, "u2", "c", "sourceEventSeqs", "[1]", "surfaceOp", `"append"`)}, "session event seq 2 is not contiguous; expected 1"},
		{"first seq not 0", []event.Event{u1()}, "session event seq 1 is not contiguous; expected 0"},
		{"string seq", []event.Event{line(t, `{"type":"turn/start","seq":"x","time":1,"data":{}}`)}, "session event seq x is not contiguous; expected 0"},
		{"fractional seq", []event.Event{line(t, `{"type":"turn/start","seq":0.5,"time":1,"data":{}}`)}, "session event seq 0.5 is not contiguous; expected 0"},
		{"missing seq", []event.Event{line(t, `{"type":"turn/start","time":1,"data":{}}`)}, "session event seq undefined is not contiguous; expected 0"},
		// eligibility
		{"surfaceOp on log-only", []event.Event{ev(t, "turn/start", 0, `{"turn":1}`, "surfaceOp", `"append"`)}, `session event "turn/start" is not surface-eligible and cannot carry surfaceOp`},
		{"null surfaceOp on log-only", []event.Event{ev(t, "turn/start", 0, `{"turn":1}`, "surfaceOp", `null`)}, `session event "turn/start" is not surface-eligible and cannot carry surfaceOp`},
		{"sources on log-only", []event.Event{ev(t, "turn/start", 0, `{"turn":1}`, "sourceEventSeqs", `[0]`)}, `session event "turn/start" is not surface-eligible and cannot carry sourceEventSeqs`},
		{"both on log-only", []event.Event{ev(t, "tool/call", 0, `{}`, "sourceEventSeqs", `[0]`, "surfaceOp", `"append"`)}, `session event "tool/call" is not surface-eligible and cannot carry surfaceOp`},
		{"numeric type", []event.Event{line(t, `{"type":5,"seq":0,"time":1,"data":{},"surfaceOp":"append"}`)}, `session event "5" is not surface-eligible and cannot carry surfaceOp`},
		{"missing type", []event.Event{line(t, `{"seq":0,"time":1,"data":{},"sourceEventSeqs":[]}`)}, `session event "undefined" is not surface-eligible and cannot carry sourceEventSeqs`},
		{"unknown type passes", []event.Event{line(t, `{"type":"plugin/event","seq":0,"time":1,"data":null}`)}, ""},
		{"missing marker", []event.Event{userMsg(t, 0, "u", "hidden")}, `session event "user/message" is surface-eligible and requires a surfaceOp marker`},
		{"missing marker with sources", []event.Event{u0(), asstMsg(t, 1, "a", "[]", "sourceEventSeqs", "[0]")}, `session event "assistant/message" is surface-eligible and requires a surfaceOp marker`},
		// surfaceOp shape
		{"string op", []event.Event{userMsg(t, 0, "u", "a", "surfaceOp", `"replace"`)}, `session event "user/message" carries an invalid surfaceOp`},
		{"null op", []event.Event{userMsg(t, 0, "u", "a", "surfaceOp", `null`)}, `session event "user/message" carries an invalid surfaceOp`},
		{"array op", []event.Event{userMsg(t, 0, "u", "a", "surfaceOp", `["replace",0,0]`)}, `session event "user/message" carries an invalid surfaceOp`},
		{"number op", []event.Event{toolRes(t, 0, "t", "c", "x", false, "surfaceOp", `1`)}, `session event "tool/result" carries an invalid surfaceOp`},
		{"extra key", []event.Event{u0(), userMsg(t, 1, "u", "a", "sourceEventSeqs", "[0]", "surfaceOp", `{"op":"replace","start":0,"end":0,"x":1}`)}, `session event "user/message" carries an invalid replace surfaceOp`},
		{"missing end", []event.Event{u0(), userMsg(t, 1, "u", "a", "surfaceOp", `{"op":"replace","start":0}`)}, `session event "user/message" carries an invalid replace surfaceOp`},
		{"wrong op", []event.Event{u0(), userMsg(t, 1, "u", "a", "surfaceOp", `{"op":"append","start":0,"end":0}`)}, `session event "user/message" carries an invalid replace surfaceOp`},
		{"negative start", []event.Event{u0(), userMsg(t, 1, "u", "a", "surfaceOp", `{"op":"replace","start":-1,"end":0}`)}, `session event "user/message" carries an invalid replace surfaceOp`},
		{"fractional end", []event.Event{u0(), userMsg(t, 1, "u", "a", "surfaceOp", `{"op":"replace","start":0,"end":0.5}`)}, `session event "user/message" carries an invalid replace surfaceOp`},
		{"string start", []event.Event{u0(), userMsg(t, 1, "u", "a", "surfaceOp", `{"op":"replace","start":"0","end":0}`)}, `session event "user/message" carries an invalid replace surfaceOp`},
		{"unsafe end", []event.Event{u0(), userMsg(t, 1, "u", "a", "surfaceOp", `{"op":"replace","start":0,"end":9007199254740992}`)}, `session event "user/message" carries an invalid replace surfaceOp`},
		{"key order irrelevant", []event.Event{u0(), userMsg(t, 1, "u", "a", "sourceEventSeqs", "[0]", "surfaceOp", `{"end":0,"start":0,"op":"replace"}`)}, ""},
		{"negative zero start", []event.Event{u0(), userMsg(t, 1, "u", "a", "sourceEventSeqs", "[0]", "surfaceOp", `{"op":"replace","start":-0,"end":0}`)}, ""},
		// provenance
		{"absent sources", []event.Event{u0(), u1()}, ""},
		{"string sources", []event.Event{userMsg(t, 0, "u", "a", "sourceEventSeqs", `"invalid"`, "surfaceOp", `"append"`)}, "sourceEventSeqs on event at seq 0 must be an array when present"},
		{"null sources", []event.Event{u0(), userMsg(t, 1, "u", "a", "sourceEventSeqs", `null`, "surfaceOp", `"append"`)}, "sourceEventSeqs on event at seq 1 must be an array when present"},
		{"object sources", []event.Event{u0(), userMsg(t, 1, "u", "a", "sourceEventSeqs", `{"0":0}`, "surfaceOp", `"append"`)}, "sourceEventSeqs on event at seq 1 must be an array when present"},
		{"empty sources", []event.Event{userMsg(t, 0, "u", "a", "sourceEventSeqs", `[]`, "surfaceOp", `"append"`)}, "sourceEventSeqs must not be empty except on assistant/message"},
		{"empty sources on tool/result", []event.Event{toolRes(t, 0, "t", "c", "x", false, "sourceEventSeqs", `[]`, "surfaceOp", `"append"`)}, "sourceEventSeqs must not be empty except on assistant/message"},
		{"empty sources on assistant", []event.Event{asstMsg(t, 0, "a", "[]", "sourceEventSeqs", `[]`, "surfaceOp", `"append"`)}, ""},
		{"sparse hole", []event.Event{userMsg(t, 0, "u", "a", "sourceEventSeqs", `[null]`, "surfaceOp", `"append"`)}, `session event "user/message" sourceEventSeqs must densely contain non-negative safe integers`},
		{"string element", []event.Event{userMsg(t, 0, "u", "a", "sourceEventSeqs", `["0"]`, "surfaceOp", `"append"`)}, `session event "user/message" sourceEventSeqs must densely contain non-negative safe integers`},
		{"fractional element", []event.Event{userMsg(t, 0, "u", "a", "sourceEventSeqs", `[0.5]`, "surfaceOp", `"append"`)}, `session event "user/message" sourceEventSeqs must densely contain non-negative safe integers`},
		{"negative element", []event.Event{u0(), asstMsg(t, 1, "a", "[]", "sourceEventSeqs", `[-1]`, "surfaceOp", `"append"`)}, `session event "assistant/message" sourceEventSeqs must densely contain non-negative safe integers`},
		{"huge element", []event.Event{u0(), userMsg(t, 1, "u", "a", "sourceEventSeqs", `[1e300]`, "surfaceOp", `"append"`)}, `session event "user/message" sourceEventSeqs must densely contain non-negative safe integers`},
		{"bad element after a future one", []event.Event{u0(), userMsg(t, 1, "u", "a", "sourceEventSeqs", `[5,"x"]`, "surfaceOp", `"append"`)}, `session event "user/message" sourceEventSeqs must densely contain non-negative safe integers`},
		{"duplicates", []event.Event{u0(), userMsg(t, 1, "u", "a", "sourceEventSeqs", `[0,0]`, "surfaceOp", `"append"`)}, "sourceEventSeqs must not contain duplicates"},
		{"duplicates before future", []event.Event{u0(), userMsg(t, 1, "u", "a", "sourceEventSeqs", `[0,5,0]`, "surfaceOp", `"append"`)}, "sourceEventSeqs must not contain duplicates"},
		{"self reference", []event.Event{userMsg(t, 0, "u", "a", "sourceEventSeqs", `[0]`, "surfaceOp", `"append"`)}, "sourceEventSeqs must reference earlier events: 0 >= current seq 0"},
		{"first future source reported", []event.Event{u0(), u1(), userMsg(t, 2, "u", "a", "sourceEventSeqs", `[0,7,3]`, "surfaceOp", `"append"`)}, "sourceEventSeqs must reference earlier events: 7 >= current seq 2"},
		{"unsorted valid sources", []event.Event{u0(), u1(), userMsg(t, 2, "u", "a", "sourceEventSeqs", `[1,0]`, "surfaceOp", `"append"`)}, ""},
		// replace ranges
		{"start not found", []event.Event{u0(), userMsg(t, 1, "u", "a", "sourceEventSeqs", "[0]", "surfaceOp", replaceOpJSON(42, 0))}, "surface replace: start seq 42 not found in surface"},
		{"end not found", []event.Event{u0(), userMsg(t, 1, "u", "a", "sourceEventSeqs", "[0]", "surfaceOp", replaceOpJSON(0, 42))}, "surface replace: end seq 42 not found in surface"},
		{"log-only start", []event.Event{logOnly(t, "turn/start", 0), u1(), userMsg(t, 2, "u", "a", "sourceEventSeqs", "[0,1]", "surfaceOp", replaceOpJSON(0, 1))}, "surface replace: start seq 0 not found in surface"},
		{"start after end", []event.Event{u0(), u1(), userMsg(t, 2, "u", "a", "sourceEventSeqs", "[0,1]", "surfaceOp", replaceOpJSON(1, 0))}, "surface replace: start seq 1 (index 1) is after end seq 0 (index 0)"},
		{"range checked before sources", []event.Event{u0(), userMsg(t, 1, "u", "a", "sourceEventSeqs", `"bad"`, "surfaceOp", replaceOpJSON(3, 0))}, "surface replace: start seq 3 not found in surface"},
		{"missing one", []event.Event{u0(), u1(), userMsg(t, 2, "u", "a", "sourceEventSeqs", "[0]", "surfaceOp", replaceOpJSON(0, 1))}, "surface replace: sourceEventSeqs must include every shadowed surface node; missing 1"},
		{"missing all", []event.Event{u0(), u1(), userMsg(t, 2, "u", "a", "surfaceOp", replaceOpJSON(0, 1))}, "surface replace: sourceEventSeqs must include every shadowed surface node; missing 0, 1"},
		{"missing after chunk-only sources", []event.Event{logOnly(t, "assistant/chunk", 0), u1(), userMsg(t, 2, "u", "a", "sourceEventSeqs", "[0]", "surfaceOp", replaceOpJSON(1, 1))}, "surface replace: sourceEventSeqs must include every shadowed surface node; missing 1"},
		{"source element checked before coverage", []event.Event{u0(), userMsg(t, 1, "u", "a", "sourceEventSeqs", "[0,1]", "surfaceOp", replaceOpJSON(0, 0))}, "sourceEventSeqs must reference earlier events: 1 >= current seq 1"},
		{"nested positional range", []event.Event{u0(), u1(),
			asstMsg(t, 2, "a", `[{"type":"text","text":"s"}]`, "sourceEventSeqs", "[0]", "surfaceOp", replaceOpJSON(0, 0)),
			asstMsg(t, 3, "b", `[{"type":"text","text":"s2"}]`, "sourceEventSeqs", "[2,1]", "surfaceOp", replaceOpJSON(2, 1))}, ""},
		// tool/result rewrites
		{"rewrite spans two nodes", []event.Event{u0(), u1(), toolRes(t, 2, "t", "c", "x", false, "sourceEventSeqs", "[0,1]", "surfaceOp", replaceOpJSON(0, 1))}, "tool/result surface replacement must rewrite exactly one current node"},
		{"rewrite of a user message", []event.Event{u0(), toolRes(t, 1, "t", "c", "x", false, "sourceEventSeqs", "[0]", "surfaceOp", replaceOpJSON(0, 0))}, "tool/result surface replacement must target a current tool/result"},
		{"rewrite content only", []event.Event{tr0(), rewrite0(sprintf(toolData, ""))}, ""},
		{"rewrite changes call id", []event.Event{tr0(), toolRes(t, 1, "t0", "changed", "x", false, "sourceEventSeqs", "[0]", "surfaceOp", replaceOpJSON(0, 0))}, "tool/result surface replacement may change only content"},
		{"rewrite changes message id", []event.Event{tr0(), toolRes(t, 1, "t9", "c0", "x", false, "sourceEventSeqs", "[0]", "surfaceOp", replaceOpJSON(0, 0))}, "tool/result surface replacement may change only content"},
		{"rewrite changes isError", []event.Event{tr0(), toolRes(t, 1, "t0", "c0", "x", true, "sourceEventSeqs", "[0]", "surfaceOp", replaceOpJSON(0, 0))}, "tool/result surface replacement may change only content"},
		{"rewrite adds error", []event.Event{tr0(), rewrite0(sprintf(toolData, `,"error":{"name":"E","code":"C"}`))}, "tool/result surface replacement may change only content"},
		{"rewrite changes turn", []event.Event{tr0(), rewrite0(`{"turn":2,"step":1,"message":{"id":"t0","role":"user","content":[{"type":"tool-result","toolCallId":"c0","content":[],"isError":false}],"source":{"kind":"tool","callId":"c0"}}}`)}, "tool/result surface replacement may change only content"},
		{"rewrite reorders keys", []event.Event{tr0(), rewrite0(`{"message":{"source":{"callId":"c0","kind":"tool"},"content":[{"isError":false,"content":"anything","toolCallId":"c0","type":"tool-result"}],"role":"user","id":"t0"},"step":1,"turn":1}`)}, ""},
		// Upstream blanks by rebuilding content as [first block]: later blocks never enter the comparison.
		{"rewrite adds a second block (ignored, as upstream)", []event.Event{tr0(), rewrite0(`{"turn":1,"step":1,"message":{"id":"t0","role":"user","content":[{"type":"tool-result","toolCallId":"c0","content":[],"isError":false},{"type":"text","text":"x"}],"source":{"kind":"tool","callId":"c0"}}}`)}, ""},
		{"rewrite of a rewrite", []event.Event{tr0(), rewrite0(sprintf(toolData, "")),
			toolRes(t, 2, "t0", "c0", "again", false, "sourceEventSeqs", "[1]", "surfaceOp", replaceOpJSON(1, 1))}, ""},
		{"rewrite without message", []event.Event{tr0(), rewrite0(`{"turn":1,"step":1}`)}, "Cannot read properties of undefined (reading 'content')"},
		{"rewrite with null content", []event.Event{tr0(), rewrite0(`{"turn":1,"step":1,"message":{"content":null}}`)}, "Cannot read properties of null (reading '0')"},
		{"meta arrays equal", metaPair(`{"tags":["a",{"n":1}]}`, `{"tags":["a",{"n":1}]}`), ""},
		{"meta array drift", metaPair(`{"tags":["a"]}`, `{"tags":["b"]}`), "tool/result surface replacement may change only content"},
		{"meta array vs string", metaPair(`{"tags":["a"]}`, `{"tags":"a"}`), "tool/result surface replacement may change only content"},
		{"meta key names", metaPair(`{"left":1}`, `{"right":1}`), "tool/result surface replacement may change only content"},
		{"meta key count", metaPair(`{"one":1}`, `{"one":1,"two":2}`), "tool/result surface replacement may change only content"},
		{"meta key order", metaPair(`{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1}`), ""},
		{"meta number vs string", metaPair(`{"a":1}`, `{"a":"1"}`), "tool/result surface replacement may change only content"},
		{"user message may shadow a tool result", []event.Event{tr0(), userMsg(t, 1, "s", "sum", "sourceEventSeqs", "[0]", "surfaceOp", replaceOpJSON(0, 0))}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Fold(c.events)
			if c.want == "" {
				if err != nil {
					t.Fatalf("Fold: %v", err)
				}
			} else if err == nil || err.Error() != c.want {
				t.Fatalf("Fold: %v\nwant: %s", err, c.want)
			}

			// Incremental: identical outcome, and the failing push changes nothing.
			f := NewFolder(0)
			last := len(c.events) - 1
			for _, e := range c.events[:last] {
				if err := f.Push(e); err != nil {
					t.Fatalf("prefix push: %v", err)
				}
			}
			before, next := string(f.Result().JSON()), f.NextSeq()
			err = f.Push(c.events[last])
			if c.want == "" {
				if err != nil {
					t.Fatalf("Push: %v", err)
				}
				return
			}
			if err == nil || err.Error() != c.want {
				t.Fatalf("Push: %v\nwant: %s", err, c.want)
			}
			if got := string(f.Result().JSON()); got != before || f.NextSeq() != next {
				t.Fatalf("failed push changed state: %s -> %s", before, got)
			}
		})
	}
}

func sprintf(format, arg string) string {
	for i := 0; i+1 < len(format); i++ {
		if format[i] == '%' && format[i+1] == 's' {
			return format[:i] + arg + format[i+2:]
		}
	}
	return format
}
