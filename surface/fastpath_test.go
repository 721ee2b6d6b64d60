package surface

import (
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
)

// The byte-level fast paths must never disagree with the general parse-based rules.

func TestParseSeqListAgreesWithParse(t *testing.T) {
	for _, raw := range []string{
		`[]`, `[0]`, `[4,5,6]`, `[9007199254740991]`, `[9007199254740992]`, `[12345678901234567]`,
		`[1e+21]`, `[-1]`, `[0.5]`, `["0"]`, `[null]`, `[1,2,]`, `[01]`, `[1 ]`, `{}`, `"x"`, `[[1]]`, `[3,1,3]`,
	} {
		got, ok := parseSeqList([]byte(raw), nil)
		if !ok {
			continue // the general path decides
		}
		v, err := event.Parse([]byte(raw))
		if err != nil || v.Kind != event.KindArray || len(v.Arr) != len(got) {
			t.Fatalf("%s: fast %v, parse %v %v", raw, got, v, err)
		}
		for i, el := range v.Arr {
			if !isEventSeq(el) || int64(el.Num) != got[i] {
				t.Fatalf("%s: element %d fast %d, parse %v", raw, i, got[i], el)
			}
		}
	}
	if _, ok := parseSeqList([]byte(`[9007199254740992]`), nil); ok {
		t.Fatal("unsafe integer taken by the fast path")
	}
}

func TestPlainReplaceOpAgreesWithParse(t *testing.T) {
	for _, raw := range []string{
		`{"op":"replace","start":2,"end":18}`, `{"op":"replace","start":0,"end":0}`,
		`{"op":"replace","start":9007199254740992,"end":0}`, `{"op":"replace","start":1,"end":2,"x":3}`,
		`{"op":"replace","start":-1,"end":2}`, `{"op":"replace","start":1.5,"end":2}`, `{"op":"replace","start":"1","end":2}`,
		`{"op":"replace","start":1,"end":2,"end":3}`, `{"op":"replace","start":01,"end":2}`,
	} {
		s, e, ok := plainReplaceOp([]byte(raw))
		if !ok {
			continue
		}
		v, err := event.Parse([]byte(raw))
		if err != nil {
			t.Fatalf("%s: fast path accepted unparsable input", raw)
		}
		gs, _ := v.Get("start")
		ge, _ := v.Get("end")
		if !v.HasExactKeys("op", "start", "end") || !isEventSeq(gs) || !isEventSeq(ge) || int64(gs.Num) != s || int64(ge.Num) != e {
			t.Fatalf("%s: fast %d,%d disagrees with %v", raw, s, e, v)
		}
	}
}

func TestSameOutsideContentImpliesEqual(t *testing.T) {
	base := `{"turn":1,"step":1,"message":{"id":"t","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":%s,"isError":false}],"source":{"kind":"tool","callId":"c"}}%s}`
	mk := func(seq int64, content, tail string) event.Event {
		return ev(t, "tool/result", seq, sprintf(sprintf(base, content), tail))
	}
	cases := []struct {
		a, b       event.Event
		fast, full bool
	}{
		{mk(0, `[{"type":"text","text":"x"}]`, ""), mk(1, `[{"type":"text","text":"[pruned]"}]`, ""), true, true},
		{mk(0, `[]`, ""), mk(1, `"s\"}]"`, ""), true, true},
		{mk(0, `[]`, `,"meta":{"a":1}`), mk(1, `[]`, `,"meta":{"a":2}`), false, false},
		{mk(0, `[]`, ""), ev(t, "tool/result", 1, `{"step":1,"turn":1,"message":{"role":"user","id":"t","content":[{"type":"tool-result","toolCallId":"c","content":[],"isError":false}],"source":{"kind":"tool","callId":"c"}}}`), false, true},
		{mk(0, `[]`, ""), ev(t, "tool/result", 1, `{"turn":1,"step":1,"message":{"id":"t","role":"user","content":[{"type":"tool-result","toolCallId":"c","isError":false}],"source":{"kind":"tool","callId":"c"}}}`), false, true},
	}
	for i, c := range cases {
		fast := sameOutsideContent(c.a, c.b)
		full, err := sameBlanked(c.a, c.b)
		if err != nil {
			t.Fatal(err)
		}
		if fast != c.fast || full != c.full {
			t.Fatalf("case %d: fast %v full %v, want %v %v", i, fast, full, c.fast, c.full)
		}
	}
}

func TestSkipCanonical(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{`{"a":"}\"]"},x`, 12}, {`[1,[2]],`, 7}, {`"x"`, 3}, {`12,`, 2}, {`{"a":`, -1}, {`"abc`, -1},
	} {
		if got := skipCanonical([]byte(c.in), 0); got != c.want {
			t.Fatalf("%s: %d, want %d", c.in, got, c.want)
		}
	}
}
