package event

import (
	"testing"
)

func TestNewEventEnvelope(t *testing.T) {
	cases := []struct {
		raw     string
		typ     string
		seq     int64
		seqText string
	}{
		{`{"type":"turn/start","seq":0,"time":1,"data":{}}`, "turn/start", 0, "0"},
		{`{"seq":12,"type":"a\/b"}`, "a/b", 12, "12"},
		{`{"type":"x\n","seq":9007199254740991}`, "x\n", 9007199254740991, "9007199254740991"},
		{`{"type":1,"seq":9007199254740992}`, "", -1, "9007199254740992"},
		{`{"type":null,"seq":-1}`, "", -1, "-1"},
		{`{"seq":1.5}`, "", -1, "1.5"},
		{`{"seq":1e21}`, "", -1, "1e+21"},
		{`{"seq":"7"}`, "", -1, "7"},
		{`{"seq":null}`, "", -1, "null"},
		{`{"seq":true}`, "", -1, "true"},
		{`{"seq":{"a":1}}`, "", -1, "[object Object]"},
		{`{"seq":[1,null,[2,"x"],{}]}`, "", -1, "1,,2,x,[object Object]"},
		{`{"seq":[]}`, "", -1, ""},
		{`{"data":{"seq":1,"type":"inner"}}`, "", -1, "undefined"},
		{`42`, "", -1, "undefined"},
		{`null`, "", -1, "undefined"},
		{`"type"`, "", -1, "undefined"},
		{`[{"type":"a","seq":1}]`, "", -1, "undefined"},
	}
	for _, c := range cases {
		raw, err := Canonical([]byte(c.raw))
		if err != nil {
			t.Fatal(err)
		}
		e, err := NewEvent(raw)
		if err != nil {
			t.Fatalf("NewEvent(%s): %v", raw, err)
		}
		if e.Type != c.typ || e.Seq != c.seq || e.SeqText() != c.seqText {
			t.Errorf("NewEvent(%s) = type %q seq %d text %q; want %q %d %q", raw, e.Type, e.Seq, e.SeqText(), c.typ, c.seq, c.seqText)
		}
		p, err := ParseEvent([]byte(c.raw))
		if err != nil || string(p.Raw) != string(raw) || p.Type != e.Type || p.Seq != e.Seq {
			t.Errorf("ParseEvent(%s) = %+v, %v", c.raw, p, err)
		}
	}
	if _, err := NewEvent([]byte(`{"a": 1}`)); err != ErrNotCanonical {
		t.Errorf("non-canonical accepted: %v", err)
	}
}

func TestEventRecordAndMember(t *testing.T) {
	e := mustEvent(`{"type":"tool/call","seq":3,"time":5,"data":{"id":"c1","args":[1]}}`)
	v, err := e.Record()
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := v.Get("data"); !d.Has("id") {
		t.Error("Record lost data.id")
	}
	if m, ok := e.Member("data"); !ok || string(m) != `{"id":"c1","args":[1]}` {
		t.Errorf("Member(data) = %s, %v", m, ok)
	}
	if _, ok := e.Member("nope"); ok {
		t.Error("Member(nope) found")
	}
}

func TestNewEventFrom(t *testing.T) {
	cases := []struct {
		name  string
		e     Event
		want  string
		typ   string
		seqNo int64
	}{
		{"plain", NewEventFrom("session/end-seed", 7, 1700000000000, []byte(`{}`)),
			`{"type":"session/end-seed","seq":7,"time":1700000000000,"data":{}}`, "session/end-seed", 7},
		{"extras in order", NewEventFrom("user/message", 1, -5, []byte(`{"text":"hi"}`),
			Member{"sourceEventSeqs", Array(Int(0))}, Member{"surfaceOp", String("append")}),
			`{"type":"user/message","seq":1,"time":-5,"data":{"text":"hi"},"sourceEventSeqs":[0],"surfaceOp":"append"}`, "user/message", 1},
		{"escaped type", NewEventFrom("a\"b", 0, 0, []byte(`null`)),
			`{"type":"a\"b","seq":0,"time":0,"data":null}`, "a\"b", 0},
		{"JS object order for odd extras", NewEventFrom("t", 2, 3, []byte(`[1]`), Member{"5", Bool(true)}, Member{"data", Int(9)}),
			`{"5":true,"type":"t","seq":2,"time":3,"data":9}`, "t", 2},
	}
	for _, c := range cases {
		if string(c.e.Raw) != c.want || c.e.Type != c.typ || c.e.Seq != c.seqNo {
			t.Errorf("%s: %s (%q, %d), want %s", c.name, c.e.Raw, c.e.Type, c.e.Seq, c.want)
		}
		if !IsCanonical(c.e.Raw) {
			t.Errorf("%s: not canonical: %s", c.name, c.e.Raw)
		}
	}
}

func TestKnownTypes(t *testing.T) {
	if len(KnownTypes) != 48 {
		t.Fatalf("%d known types, want 48", len(KnownTypes))
	}
	for i := 1; i < len(KnownTypes); i++ {
		if KnownTypes[i-1] >= KnownTypes[i] {
			t.Errorf("KnownTypes not sorted at %q", KnownTypes[i])
		}
	}
	for _, k := range KnownTypes {
		if !IsKnownType(k) {
			t.Errorf("IsKnownType(%q) = false", k)
		}
	}
	for _, u := range []string{"", "session", "text-chunks", "assistant/Chunk", "zzz", "agent"} {
		if IsKnownType(u) {
			t.Errorf("IsKnownType(%q) = true", u)
		}
	}
	for _, s := range []string{"user/message", "assistant/message", "tool/result"} {
		if !IsSurfaceType(s) {
			t.Errorf("IsSurfaceType(%q) = false", s)
		}
	}
	if IsSurfaceType("tool/call") || IsSurfaceType("assistant/chunk") {
		t.Error("IsSurfaceType too broad")
	}
}

// TestFixtureTypesAreKnown: every event type in the upstream fixtures is in the vocabulary.
func TestFixtureTypesAreKnown(t *testing.T) {
	for _, line := range allFixtureLines(t) {
		evs, err := DecodeRecord(line)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if !IsKnownType(e.Type) {
				t.Errorf("unknown fixture type %q", e.Type)
			}
		}
	}
}

func TestEnvelopeMatchesRecordOutsideData(t *testing.T) {
	for _, line := range []string{
		`{"type":"assistant/chunk","seq":5,"time":7,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"a,}\"]"}}}`,
		`{"type":"x/y","seq":1,"time":2,"data":[1,{"a":"}"}],"ignorable":true}`,
		`{"type":"x/y","seq":1,"time":2,"data":null,"surfaceOp":{"op":"replace","start":1,"end":2},"sourceEventSeqs":[0]}`,
		`{"data":"s","type":"t\u0001","seq":1}`,
		`{}`,
		`42`,
	} {
		e, err := ParseEvent([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		env, err := e.Envelope()
		if err != nil {
			t.Fatal(err)
		}
		rec, _ := e.Record()
		if rec.Kind != env.Kind || len(rec.Obj) != len(env.Obj) {
			t.Fatalf("%s: envelope %+v vs record %+v", line, env, rec)
		}
		for i, m := range rec.Obj {
			em := env.Obj[i]
			if em.Key != m.Key || em.Value.Kind != m.Value.Kind {
				t.Fatalf("%s: member %d differs", line, i)
			}
			if m.Key == "data" && (m.Value.Kind == KindObject || m.Value.Kind == KindArray) {
				if len(em.Value.Obj) != 0 || len(em.Value.Arr) != 0 {
					t.Fatalf("%s: data parsed", line)
				}
				continue
			}
			if string(Stringify(em.Value)) != string(Stringify(m.Value)) {
				t.Fatalf("%s: member %s differs", line, m.Key)
			}
		}
	}
}

func TestShallow(t *testing.T) {
	e, err := ParseEvent([]byte(`{"type":"tool/result","seq":1,"time":2,"data":{"message":{"content":[{"type":"tool-result","content":[{"type":"text","text":"x"}]}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	v, err := e.Shallow(5)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := v.Get("data")
	msg, _ := data.Get("message")
	content, _ := msg.Get("content")
	if len(content.Arr) != 1 {
		t.Fatalf("level 4 array not parsed: %+v", content)
	}
	block := content.Arr[0]
	if typ, _ := block.Get("type"); typ.Str != "tool-result" {
		t.Fatalf("level 5 scalar not parsed: %+v", block)
	}
	inner, _ := block.Get("content")
	if inner.Kind != KindArray || len(inner.Arr) != 0 {
		t.Fatalf("level 6 array should keep only its kind: %+v", inner)
	}
	full, _ := e.Shallow(0)
	if string(Stringify(full)) != string(e.Raw) {
		t.Fatal("Shallow(0) must parse everything")
	}
}

func TestShallowSkipsNamedMembers(t *testing.T) {
	e, err := ParseEvent([]byte(`{"type":"assistant/message","seq":3,"time":1,"data":{"turn":1,"step":1},"sourceEventSeqs":[0,1,2],"surfaceOp":{"op":"replace","start":0,"end":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, depth := range []int{0, 5} {
		v, err := e.Shallow(depth, "sourceEventSeqs")
		if err != nil {
			t.Fatal(err)
		}
		src, _ := v.Get("sourceEventSeqs")
		op, _ := v.Get("surfaceOp")
		data, _ := v.Get("data")
		if src.Kind != KindArray || len(src.Arr) != 0 || len(op.Obj) != 3 || len(data.Obj) != 2 {
			t.Fatalf("depth %d: %s", depth, Stringify(v))
		}
	}
}

func TestShallowSkipsNamedMembersAtAnyDepth(t *testing.T) {
	e, err := ParseEvent([]byte(`{"type":"user/message","seq":1,"time":1,"data":{"id":"u","content":[{"type":"text","text":"a long text"},{"type":"tool-call","id":"c","arguments":{"x":1}}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	v, err := e.Shallow(0, "text", "arguments")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := v.Get("data")
	content, _ := data.Get("content")
	text, _ := content.Arr[0].Get("text")
	typ, _ := content.Arr[0].Get("type")
	args, _ := content.Arr[1].Get("arguments")
	id, _ := content.Arr[1].Get("id")
	if text.Kind != KindString || text.Str != "" || typ.Str != "text" || args.Kind != KindObject || len(args.Obj) != 0 || id.Str != "c" {
		t.Fatalf("%+v", content)
	}
}
