package surface

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/fixtures"
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

// tailMarkers, when it answers, answers what the walk of the members does: for every event with a marker
// the fixtures hold, edge cases, and those and a sample of the fixtures' each with one byte changed (the
// ones still canonical JSON).
func TestTailMarkersAgreeWithTheWalk(t *testing.T) {
	lines := []string{
		`{"type":"user/message","seq":1,"data":{},"surfaceOp":"append"}`,
		`{"type":"user/message","seq":1,"data":{},"sourceEventSeqs":[],"surfaceOp":"append"}`,
		`{"type":"user/message","seq":1,"data":{},"sourceEventSeqs":[0,1,22],"surfaceOp":"append"}`,
		`{"sourceEventSeqs":[1],"surfaceOp":"append"}`,
		`{"type":"x","sourceEventSeqs":[2],"seq":1,"surfaceOp":"append"}`,
		`{"type":"x","sourceEventSeqs":[2],"seq":1,"sourceEventSeqs":[3],"surfaceOp":"append"}`,
		`{"type":"x","sourceEventSeqs":[2],"y":[1],"surfaceOp":"append"}`,
		`{"type":"x","y":"\",\"sourceEventSeqs\":[1]","surfaceOp":"append"}`,
		`{"type":"x","sourceEventSeqs":[[1]],"surfaceOp":"append"}`,
		`{"type":"x","sourceEventSeqs":[1.5],"surfaceOp":"append"}`,
		`{"type":"x","sourceEventSeqs":{"a":[1]},"surfaceOp":"append"}`,
		`{"type":"x","y":{"sourceEventSeqs":[1]},"surfaceOp":"append"}`,
		`{"type":"x","surfaceOp":"replace","surfaceOp":"append"}`,
		`{"type":"x","surfaceOp":"append","surfaceOp":"append"}`,
		`{"type":"x","y":{"surfaceOp":"append"}}`,
		`{"type":"x","y":["surfaceOp","append"]}`,
		`{"type":"x","y":"\"surfaceOp\":\"append\"}"}`,
	}
	err := filepath.WalkDir(fixtures.Path(t, "upstream", "raw"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".jsonl") {
			return err
		}
		data, err := os.ReadFile(path)
		for _, l := range strings.Split(string(data), "\n") {
			if strings.Contains(l, `"surfaceOp"`) {
				lines = append(lines, l)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	base := len(lines)
	for k, l := range lines[:base] {
		if k >= 17 && k%50 != 0 {
			continue // mutate the edge cases and a sample of the fixtures' lines
		}
		for i := range len(l) {
			for _, c := range []byte{'"', ',', ':', ']', '[', '}', '1', 'x', '\\'} {
				lines = append(lines, l[:i]+string(c)+l[i+1:])
			}
			lines = append(lines, l[:i]+l[i+1:])
		}
	}
	answered, walked := 0, 0
	for _, l := range lines {
		raw, err := event.Canonical([]byte(l))
		if err != nil || len(raw) == 0 || raw[0] != '{' {
			continue
		}
		op, src, hasSrc, found := tailMarkers(raw)
		if !found {
			walked++
			continue
		}
		answered++
		var wantOp, wantSrc []byte
		var wantHasOp, wantHasSrc bool
		event.EachMember(raw, func(name, value []byte) bool {
			switch string(name) {
			case "surfaceOp":
				wantOp, wantHasOp = value, true
			case "sourceEventSeqs":
				wantSrc, wantHasSrc = value, true
			}
			return true
		})
		if !wantHasOp || string(op) != string(wantOp) || hasSrc != wantHasSrc || string(src) != string(wantSrc) {
			t.Errorf("%s: tail says op %s src %s (%v), the walk op %s (%v) src %s (%v)", raw, op, src, hasSrc, wantOp, wantHasOp, wantSrc, wantHasSrc)
		}
	}
	if answered < base/2 || walked < 100 {
		t.Fatalf("%d answered from the tail, %d walked, of %d base lines: the test proves little", answered, walked, base)
	}
	t.Logf("%d answered from the tail, %d walked", answered, walked)
}
