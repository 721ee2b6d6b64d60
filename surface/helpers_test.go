package surface

import (
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
)

// ev builds an event in live-append key order from JSON text: data, then the envelope extras given
// as "key", json pairs (e.g. "surfaceOp", `"append"`).
func ev(t testing.TB, typ string, seq int64, data string, extra ...string) event.Event {
	t.Helper()
	d, err := event.Parse([]byte(data))
	if err != nil {
		t.Fatalf("data %s: %v", data, err)
	}
	var ms []event.Member
	for i := 0; i+1 < len(extra); i += 2 {
		v, err := event.Parse([]byte(extra[i+1]))
		if err != nil {
			t.Fatalf("%s %s: %v", extra[i], extra[i+1], err)
		}
		ms = append(ms, event.Member{Key: extra[i], Value: v})
	}
	return event.NewEventFrom(typ, seq, 1000+seq, event.Stringify(d), ms...)
}

// line parses one record exactly as a stored line would be.
func line(t testing.TB, s string) event.Event {
	t.Helper()
	e, err := event.ParseEvent([]byte(s))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return e
}

func userMsg(t testing.TB, seq int64, id, text string, extra ...string) event.Event {
	return ev(t, "user/message", seq, `{"id":"`+id+`","role":"user","content":[{"type":"text","text":"`+text+`"}],"source":{"kind":"user"}}`, extra...)
}

func asstMsg(t testing.TB, seq int64, id, content string, extra ...string) event.Event {
	return ev(t, "assistant/message", seq, `{"turn":1,"step":1,"message":{"id":"`+id+`","role":"assistant","content":`+content+`,"source":{"kind":"model","provider":"mock","model":"mock"}}}`, extra...)
}

// toolRes builds a tool/result whose inner content is one text block.
func toolRes(t testing.TB, seq int64, id, callID, text string, isError bool, extra ...string) event.Event {
	ie := "false"
	if isError {
		ie = "true"
	}
	return ev(t, "tool/result", seq, `{"turn":1,"step":1,"message":{"id":"`+id+`","role":"user","content":[{"type":"tool-result","toolCallId":"`+callID+`","content":[{"type":"text","text":"`+text+`"}],"isError":`+ie+`}],"source":{"kind":"tool","callId":"`+callID+`"}}}`, extra...)
}

func logOnly(t testing.TB, typ string, seq int64) event.Event {
	return ev(t, typ, seq, `{}`)
}

func replaceOpJSON(start, end int64) string {
	return `{"op":"replace","start":` + itoa(start) + `,"end":` + itoa(end) + `}`
}

func seqsJSON(s ...int64) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = itoa(v)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func mustFold(t testing.TB, events []event.Event) *Result {
	t.Helper()
	r, err := Fold(events)
	if err != nil {
		t.Fatalf("Fold: %v", err)
	}
	return r
}
