package generation

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/fixtures"
)

// project is the whole value v as a shape reads it: what v4Fast must give for the same record.
func project(v event.Value, shape *v4Shape) event.Value {
	switch {
	case shape == nil:
		return v
	case shape.keep != nil && v.Kind == event.KindObject:
		out := event.Value{Kind: event.KindObject, Obj: []event.Member{}}
		for _, m := range v.Obj {
			if sub, kept := shape.member(m.Key); kept {
				out.Obj = append(out.Obj, event.Member{Key: m.Key, Value: project(m.Value, sub)})
			}
		}
		return out
	case shape.keep == nil && v.Kind == event.KindArray:
		out := event.Value{Kind: event.KindArray, Arr: []event.Value{}}
		for _, e := range v.Arr {
			out.Arr = append(out.Arr, project(e, shape.elem))
		}
		return out
	}
	return v
}

// sameValue reports whether a and b are the same JSON value: kinds and contents, member order included.
func sameValue(a, b event.Value) bool {
	if a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case event.KindObject:
		if len(a.Obj) != len(b.Obj) {
			return false
		}
		for i := range a.Obj {
			if a.Obj[i].Key != b.Obj[i].Key || !sameValue(a.Obj[i].Value, b.Obj[i].Value) {
				return false
			}
		}
		return true
	case event.KindArray:
		if len(a.Arr) != len(b.Arr) {
			return false
		}
		for i := range a.Arr {
			if !sameValue(a.Arr[i], b.Arr[i]) {
				return false
			}
		}
		return true
	}
	return bytes.Equal(event.Stringify(a), event.Stringify(b))
}

// checkFast holds v4Fast to the whole parse of one stored line: when it reads the row, its tree is the
// record as the row type's shape reads it; when it declines, v4Value reads the row. It reports whether
// v4Fast read the row.
func checkFast(t *testing.T, line []byte, arena *v4Arena) bool {
	t.Helper()
	e, err := event.ParseEvent(line)
	checkFastLine(t, line, e, err, arena)
	if err != nil {
		return false
	}
	full, err := e.Record()
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	v, ok := v4Fast(e, arena)
	if !ok {
		if _, err := v4Value(e); err != nil {
			t.Fatalf("%s: declined, and v4Value: %v", line, err)
		}
		return false
	}
	if want := project(full, v4Shapes[e.Type]); !sameValue(v, want) {
		t.Fatalf("%s:\nfast  %s\nwhole %s", line, event.Stringify(v), event.Stringify(want))
	}
	return true
}

// checkFastLine holds v4FastLine to the canonical check and v4Fast on one stored line (e, err: what
// ParseEvent made of it): it reads exactly the canonical lines v4Fast reads, as the same event and the same
// tree, and declines every other line.
func checkFastLine(t *testing.T, line []byte, e event.Event, err error, arena *v4Arena) {
	t.Helper()
	le, lv, ok := v4FastLine(line, arena)
	if err != nil || !event.IsCanonical(line) {
		if ok {
			t.Fatalf("%q is not canonical (parse: %v), yet v4FastLine read it as %s", line, err, event.Stringify(lv))
		}
		return
	}
	want, wantOK := v4Fast(e, arena)
	if ok != wantOK {
		t.Fatalf("%s: v4FastLine read it %v, v4Fast %v", line, ok, wantOK)
	}
	if !ok {
		return
	}
	if !bytes.Equal(le.Raw, e.Raw) || le.Type != e.Type || le.Seq != e.Seq {
		t.Fatalf("%s: v4FastLine's event %q %q %d, ParseEvent's %q %q %d", line, le.Raw, le.Type, le.Seq, e.Raw, e.Type, e.Seq)
	}
	if !sameValue(lv, want) {
		t.Fatalf("%s:\nline %s\nfast %s", line, event.Stringify(lv), event.Stringify(want))
	}
}

// TestV4FastAgrees reads rows of every shape — as stored lines, which the decoder canonicalizes first — and
// holds v4Fast to the whole parse: the same members, values and order where it reads a row, and a
// fallback where it must not (an escaped member name that could spell a kept one, a stream that could name
// a tool-change or tool-result block, a type without a shape).
func TestV4FastAgrees(t *testing.T) {
	const asst = `{"type":"assistant/message","seq":5,"time":7,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"text","text":"hi"},{"type":"tool-call","id":"c","name":"bash","arguments":"{\"x\":1}"}],"source":{"kind":"model","provider":"p","model":"m"}},"usage":{"inputTokens":1},"stream":[{"type":"chunk","chunk":{"type":"block-start","blockType":"text"}}]},"surfaceOp":"append"}`
	tests := []struct {
		name string
		line string
		fast bool // v4Fast reads it (else it falls back)
	}{
		{"turn start", `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`, true},
		{"step end", `{"type":"step/end","seq":8,"time":1,"data":{"turn":1,"step":1}}`, true},
		{"turn end reason", `{"type":"turn/end","seq":9,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}`, true},
		{"bracket data not an object", `{"type":"step/start","seq":1,"time":1,"data":[1,{"turn":2}]}`, true},
		{"bracket data a string", `{"type":"step/start","seq":1,"time":1,"data":"x"}`, true},
		{"assistant", asst, true},
		{"assistant stream naming a tool result", `{"type":"assistant/message","seq":5,"time":7,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[],"source":{"kind":"model"}},"stream":[{"type":"chunk","chunk":{"type":"block-start","blockType":"tool-result"}}]}}`, false},
		{"assistant stream with an escape", `{"type":"assistant/message","seq":5,"time":7,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[],"source":{"kind":"model"}},"stream":["\u0000"]}}`, false},
		{"assistant escape outside the stream", `{"type":"assistant/message","seq":5,"time":7,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"a\"b\\c\n"}],"source":{"kind":"model"}}}}`, true},
		{"assistant content not blocks", `{"type":"assistant/message","seq":5,"time":7,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":{"type":"tool-call"},"source":"model"}}}`, true},
		{"assistant message an array", `{"type":"assistant/message","seq":5,"time":7,"data":{"turn":1,"step":1,"message":[{"role":"developer"}]}}`, true},
		{"assistant tool change block", `{"type":"assistant/message","seq":5,"time":7,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool-addition","toolName":"x","tool":{}}],"source":{"kind":"model"}}}}`, true},
		{"assistant container name", `{"type":"assistant/message","seq":5,"time":7,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool-call","id":"c","name":{"a":[1,{"b":null}]},"arguments":[true,false]}],"source":{"kind":"model"}}}}`, true},
		{"user", `{"type":"user/message","seq":3,"time":1,"data":{"id":"u","role":"user","content":[{"type":"text","text":"x"},"y",[1]],"source":{"kind":"compact-checkpoint","compactionId":"k","sourceCommandId":"c"}},"surfaceOp":{"op":"replace","startSeq":1,"endSeq":2},"sourceEventSeqs":[1,[2,4]]}`, true},
		{"tool call", `{"type":"tool/call","seq":6,"time":1,"data":{"turn":1,"step":1,"callId":"c","name":"bash","arguments":"{}","extra":{"deep":[1,2,3]}}}`, true},
		{"tool result", `{"type":"tool/result","seq":7,"time":1,"data":{"turn":1,"step":1,"message":{"role":"tool","source":{"kind":"tool","callId":"c"},"toolCallId":"c","content":[{"type":"text","text":"` + NotStartedText + `"}],"isError":true,"id":"interrupted-tool-result-c-7"},"error":{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}}}`, true},
		{"escapes in kept strings", `{"type":"tool/result","seq":7,"time":1,"data":{"message":{"role":"tool","toolCallId":"a\"b\\c\b\f\n\r\t","content":[{"type":"text","text":"\u0001x\ud800y\u001f"}],"id":"\\"}}}`, true},
		{"tool result wrapper", `{"type":"tool/result","seq":7,"time":1,"data":{"message":{"role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[]}]}}}`, true},
		{"unusual numbers", `{"type":"step/start","seq":1e0,"time":1.5E3,"data":{"turn":-0,"step":1e21,"x":0.1}}`, true},
		{"big and negative numbers", `{"type":"turn/start","seq":9007199254740993,"time":-4,"data":{"turn":123456789012345678}}`, true},
		{"odd whitespace", " {\"type\" : \"turn/start\",\n\"seq\":0,\t\"time\":1,\"data\":{ \"turn\" :1 } } ", true},
		{"duplicate names", `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"turn":2},"data":{"turn":3}}`, true},
		{"escaped names", `{"type":"turn/start","seq":0,"time":1,"d\u0061ta":{"t\u0075rn":1}}`, true},
		{"a name that needs an escape", `{"type":"turn/start","seq":0,"time":1,"data":{"tu\"rn":1,"turn":2}}`, false},
		{"envelope extras", `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1},"ignorable":true,"other":[{"a":1}]}`, true},
		{"no shape", `{"type":"request/header","seq":0,"time":1,"data":{"header":{}}}`, false},
		{"not an object", `[1,2]`, false},
	}
	var arena v4Arena
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := checkFast(t, []byte(tt.line), &arena); got != tt.fast {
				t.Fatalf("v4Fast read it: %v, want %v", got, tt.fast)
			}
		})
	}
}

// TestV4FastRefusesNonCanonical shows v4Fast declining bytes no Event holds (its Raw is canonical) rather
// than reading them differently from the parser: whitespace, a repeated name, a name with an escape.
func TestV4FastRefusesNonCanonical(t *testing.T) {
	for _, raw := range []string{
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1} }`,
		`{"type":"turn/start","seq":0,"time":1,"data": {"turn":1}}`,
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"turn":2}}`,
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1},"data":{}}`,
		`{"type":"turn/start","seq":0,"time":1,"d\u0061ta":{"turn":1}}`,
		`{"type":"turn/start","seq":0,"time":01,"data":{"turn":1}}`,
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}`,
	} {
		if v, ok := v4Fast(event.Event{Raw: []byte(raw), Type: "turn/start"}, &v4Arena{}); ok {
			t.Errorf("%s: read as %s", raw, event.Stringify(v))
		}
		if _, v, ok := v4FastLine([]byte(raw), &v4Arena{}); ok {
			t.Errorf("%s: v4FastLine read it as %s", raw, event.Stringify(v))
		}
	}
}

// nonCanonicalLines are stored lines of shaped types that are not canonical in one place each: in a
// part the shape reads, in a part it skips, in a name.
var nonCanonicalLines = []string{
	`{"type":"assistant/message","seq":5,"time":7,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[],"source":{"kind":"model"}},"usage":{"a":1,"a":2}}}`,
	`{"type":"assistant/message","seq":5,"time":7,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[],"source":{"kind":"model"}},"usage":{"b":1,"1":2}}}`,
	`{"type":"assistant/message","seq":5,"time":7,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[],"source":{"kind":"model"}},"usage":{"2":1,"1":2}}}`,
	`{"type":"assistant/message","seq":5,"time":7,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[],"source":{"kind":"model"}},"stream":[1.0]}}`,
	`{"type":"assistant/message","seq":5,"time":7,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[],"source":{"kind":"model"}},"stream":["\/"]}}`,
	`{"type":"assistant/message","seq":5,"time":7,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[],"source":{"kind":"model"}},"stream":["\u0041"]}}`,
	"{\"type\":\"assistant/message\",\"seq\":5,\"time\":7,\"data\":{\"turn\":1,\"step\":1,\"stream\":[\"\xff\"]}}",
	"{\"type\":\"assistant/message\",\"seq\":5,\"time\":7,\"data\":{\"turn\":1,\"step\":1,\"stream\":[\"a\x01\"]}}",
	`{"type":"assistant/message","seq":5,"time":7,"data":{"turn":1,"step":1,"stream":[ 1]}}`,
	`{"type":"tool/call","seq":6,"time":1,"data":{"turn":1,"step":1,"callId":"c","name":"bash","arguments":"\u00e9"}}`,
	`{"type":"tool/call","seq":6,"time":1,"data":{"turn":1,"step":1,"callId":"c","name":"bash","arguments":{"b":1,"b":1}}}`,
	`{"type":"tool/call","seq":6,"time":1,"data":{"turn":1,"step":1,"callId":"c","name":"bash","arguments":"x","x":{"y":[true,nul]}}}`,
	`{"type":"tool/call","seq":6,"time":1,"data":{"turn":1,"step":1,"callId":"c","name":"bash","x":1,"x":2}}`,
	`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1E1}}`,
	`{"type":"turn/start","seq":0,"time":1,"data":{"turn":-0}}`,
	`{"type":"turn/start","seq":00,"time":1,"data":{"turn":1}}`,
	`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1},"seq":1}`,
	`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1},"1":2}`,
	"{\"type\":\"turn/start\",\"seq\":0,\"time\":1,\"data\":{\"t\x7furn\":1},\"\x01\":1}",
	`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}x`,
	`{"type":"turn/start","seq":0,"time":1,"data":` + strings.Repeat("[", event.MaxDepth) + strings.Repeat("]", event.MaxDepth) + `}`,
}

// TestV4FastLineDeclinesNonCanonical: v4FastLine proves a line canonical as it reads it, in the parts its
// shape skips as much as in those it reads, so it declines each of these (the decoder canonicalizes
// them first); the same lines canonicalized are read.
func TestV4FastLineDeclinesNonCanonical(t *testing.T) {
	var arena v4Arena
	for _, line := range nonCanonicalLines {
		e, err := event.ParseEvent([]byte(line))
		checkFastLine(t, []byte(line), e, err, &arena)
		if _, v, ok := v4FastLine([]byte(line), &arena); ok {
			t.Errorf("%q: read as %s", line, event.Stringify(v))
		}
		if err == nil {
			checkFastLine(t, e.Raw, e, nil, &arena)
		}
	}
}

// TestV4FastFixtureRows holds v4Fast to the whole parse on every row of the v4 fixtures, and checks that
// it reads the common rows (it would be no use if it declined them).
func TestV4FastFixtureRows(t *testing.T) {
	paths, err := filepath.Glob(fixtures.Path(t, "generations", "v4", "raw-root", "*", "*", "session.v4.jsonl"))
	if err != nil || len(paths) < 4 {
		t.Fatalf("v4 raw fixtures: %d, %v", len(paths), err)
	}
	read := 0
	var arena v4Arena
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.Split(b, []byte("\n"))
		for _, line := range lines[1:] {
			if len(line) > 0 && checkFast(t, line, &arena) {
				read++
			}
		}
		arena.reset()
	}
	if read < 100 {
		t.Fatalf("v4Fast read only %d fixture rows", read)
	}
}

// FuzzV4Fast holds v4Fast to the whole parse on any line (canonicalized as the decoder does), typed as
// each shaped row type in turn.
func FuzzV4Fast(f *testing.F) {
	for _, s := range []string{
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
		`{"type":"assistant/message","seq":5,"time":7,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"tool-call","id":"c","name":"bash","arguments":"{}"}],"source":{"kind":"model"}},"stream":[]}}`,
		`{"type":"tool/result","seq":7,"time":1,"data":{"message":{"role":"tool","source":{"kind":"tool","callId":"c"},"toolCallId":"c","content":[{"type":"text","text":"x"}],"id":"t"},"error":{}}}`,
		`{"type":"user/message","seq":3,"time":1,"data":{"role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"tool/call","seq":6,"time":1,"data":{"callId":"c","name":"n","arguments":"a"}}`,
		`{"type":"step/end","seq":1e0,"time":-0,"data":{"turn":"1","step":[1,{"a":"\u00e9\ud800"}]}}`,
	} {
		f.Add([]byte(s))
	}
	for _, s := range nonCanonicalLines {
		f.Add([]byte(s))
	}
	types := []string{"turn/start", "step/end", "assistant/message", "user/message", "tool/call", "tool/result"}
	var arena v4Arena
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := event.ParseEvent(line)
		arena.reset()
		checkFastLine(t, line, e, err, &arena)
		if err != nil {
			return
		}
		full, err := e.Record()
		if err != nil {
			t.Fatal(err)
		}
		arena.reset()
		for _, typ := range types {
			te := event.Event{Raw: e.Raw, Type: typ, Seq: e.Seq}
			v, ok := v4Fast(te, &arena)
			if !ok {
				continue
			}
			if want := project(full, v4Shapes[typ]); !sameValue(v, want) {
				t.Fatalf("%s as %s:\nfast  %s\nwhole %s", e.Raw, typ, event.Stringify(v), event.Stringify(want))
			}
		}
	})
}

// streamMayMatterRef is the plain statement of streamMayMatter's decision, which the anchored search must
// match on every input.
func streamMayMatterRef(raw []byte) bool {
	return bytes.Contains(raw, []byte("tool-r")) || bytes.Contains(raw, []byte("tool-a")) ||
		bytes.Contains(raw, []byte(`\u`))
}

// TestStreamMayMatter: a stream may name a tool-change or tool-result block when it holds "tool-r",
// "tool-a" or a \u escape (which could spell either) — anywhere, escaped or not, at either edge.
func TestStreamMayMatter(t *testing.T) {
	for _, tt := range []struct {
		s    string
		want bool
	}{
		{``, false}, {`[]`, false}, {`"tool-call"`, false}, {`"tool-"`, false}, {`tool-`, false},
		{`tool-tool-c`, false}, {`-`, false}, {`--`, false}, {`ool-r`, false},
		{`tool`, false}, {`-r`, false}, {`\`, false}, {`\\`, false}, {`u\`, false}, {`"a\n"`, false},
		{`"tool\-r"`, false}, {`"tool\u002dr"`, true}, {`to-ol-r`, false}, {`Tool-r`, false},
		{`"tool-result"`, true}, {`"tool-addition"`, true}, {`tool-ctool-r`, true}, {`tool-tool-a`, true},
		{`tool-r`, true}, {`tool-a`, true}, {`xtool-r`, true}, {`tool-rx`, true}, {`-tool-a`, true},
		{`a-b-c-tool-a`, true}, {`tool-\n`, false}, {`tool--r`, false},
		{`"\u0074ool"`, true}, {`"a\\u"`, true}, {`\u`, true}, {`x\u`, true}, {`\ux`, true},
		{`\\u`, true}, {`\n\t\u`, true}, {`\n\t\`, false},
	} {
		if got := streamMayMatter([]byte(tt.s)); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.s, got, tt.want)
		}
		if ref := streamMayMatterRef([]byte(tt.s)); ref != tt.want {
			t.Errorf("%s: the reference says %v, want %v", tt.s, ref, tt.want)
		}
	}
}

// FuzzStreamMayMatter: the anchored search decides exactly as the plain one.
func FuzzStreamMayMatter(f *testing.F) {
	for _, s := range []string{`tool-r`, `"tool-call","tool-addition"`, `\u0074`, `\\u`, `-tool-a-`, `tool-`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := streamMayMatter(b), streamMayMatterRef(b); got != want {
			t.Fatalf("%q: %v, want %v", b, got, want)
		}
	})
}
