package load

import (
	"errors"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/eventtest"
)

// vEvents turns JSON lines into events the way a backend scan does (canonicalized).
func vEvents(t *testing.T, lines ...string) []event.Event {
	t.Helper()
	out := make([]event.Event, len(lines))
	for i, l := range lines {
		e, err := event.ParseEvent([]byte(l))
		if err != nil {
			t.Fatalf("event %d %s: %v", i, l, err)
		}
		out[i] = e
	}
	return out
}

// vLines renders events back to their stored lines.
func vLines(events []event.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = string(e.Raw)
	}
	return out
}

// vHeader is a valid stored header for session id.
func vHeader(id string) event.Header {
	cwd := event.String("/w")
	return event.Header{ID: id, CreatedAt: 1, Cwd: &cwd}
}

func TestLegacyRefusals(t *testing.T) {
	cases := []struct {
		name   string
		events []string
		want   string
	}{
		{"header delta", []string{
			`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
			`{"type":"request/header-delta","seq":1,"time":1,"data":{"config":{"model":"legacy"}}}`,
		}, `session "s" contains unsupported legacy request/header-delta event at seq 1`},
		{"mode set", []string{
			`{"type":"mode/set","seq":0,"time":1,"data":{"mode":"plan"}}`,
		}, `session "s" contains unsupported legacy mode/set event at seq 0`},
		{"delta scan precedes mode scan", []string{
			`{"type":"mode/set","seq":0,"time":1,"data":{"mode":"plan"}}`,
			`{"type":"request/header-delta","seq":1,"time":1,"data":{}}`,
		}, `session "s" contains unsupported legacy request/header-delta event at seq 1`},
		{"fallback", []string{
			`{"type":"request/header","seq":0,"time":1,"data":{"header":{"config":{"model":"legacy"}},"reason":"fallback"}}`,
		}, `session "s" contains unsupported legacy request/header reason "fallback" at seq 0`},
		{"fallback even when ignorable", []string{
			`{"type":"request/header","seq":0,"time":1,"data":{"header":{"config":{"model":"legacy"}},"reason":"fallback"},"ignorable":true}`,
		}, `session "s" contains unsupported legacy request/header reason "fallback" at seq 0`},
		{"refusal precedes malformed legacy shapes", []string{
			`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":null}}`,
			`{"type":"mode/set","seq":1,"time":1,"data":{}}`,
		}, `session "s" contains unsupported legacy mode/set event at seq 1`},
		{"request/header without data", []string{
			`{"type":"request/header","seq":0,"time":1}`,
		}, `Cannot read properties of undefined (reading 'reason')`},
		{"request/header with null data", []string{
			`{"type":"request/header","seq":0,"time":1,"data":null}`,
		}, `Cannot read properties of null (reading 'reason')`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := readStored("s", vHeader("s"), vEvents(t, c.events...), "")
			if err == nil || err.Error() != c.want {
				t.Fatalf("ReadStored: got %v, want %q", err, c.want)
			}
			var ce *CorruptionError
			if _, _, err := inspectWith("s", vHeader("s"), vEvents(t, c.events...), "", nil); !errors.As(err, &ce) || ce.Cause.Error() != c.want {
				t.Fatalf("Inspect: got %v, want corruption %q", err, c.want)
			}
		})
	}
}

func TestLegacyTypeErrorIsMarked(t *testing.T) {
	_, err := readStored("s", vHeader("s"), vEvents(t, `{"type":"request/header","seq":0,"time":1,"data":null}`), "")
	var te *TypeError
	if !errors.As(err, &te) || te.JSErrorName() != "TypeError" {
		t.Fatalf("want *TypeError, got %T %v", err, err)
	}
}

func TestLegacyNormalization(t *testing.T) {
	cases := []struct {
		name string
		in   []string
		want []string
	}{
		{"turn/start trigger stripped",
			[]string{`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}}`},
			[]string{`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`}},
		{"turn/start trigger first, data first in the envelope",
			[]string{`{"data":{"trigger":{"kind":"retry"},"turn":2},"type":"turn/start","seq":0,"time":1}`},
			[]string{`{"data":{"turn":2},"type":"turn/start","seq":0,"time":1}`}},
		{"turn/end aborted without cause",
			[]string{`{"type":"turn/end","seq":0,"time":1,"data":{"turn":3,"reason":{"kind":"aborted"}}}`},
			[]string{`{"type":"turn/end","seq":0,"time":1,"data":{"turn":3,"reason":{"kind":"aborted","reason":{"kind":"legacy"}}}}`}},
		{"turn/end disposed, reason first",
			[]string{`{"type":"turn/end","seq":0,"time":1,"data":{"reason":{"kind":"disposed"},"turn":4}}`},
			[]string{`{"type":"turn/end","seq":0,"time":1,"data":{"reason":{"kind":"aborted","reason":{"kind":"disposed"}},"turn":4}}`}},
		{"turn/end error with failure",
			[]string{`{"type":"turn/end","seq":0,"time":1,"data":{"turn":2,"reason":{"kind":"error","step":1,"failure":{"message":"old provider failure","code":"SERVER"}}}}`},
			[]string{`{"type":"turn/end","seq":0,"time":1,"data":{"turn":2,"reason":{"kind":"error","error":{"message":"old provider failure","code":"SERVER"}}}}`}},
		{"turn/end error with detailed failure keeps its member order",
			[]string{`{"type":"turn/end","seq":0,"time":1,"data":{"turn":6,"reason":{"failure":{"code":"RATE_LIMIT","message":"m","status":429,"providerRetryAfterMs":1000,"requestId":"request-1"},"step":0,"kind":"error"}}}`},
			[]string{`{"type":"turn/end","seq":0,"time":1,"data":{"turn":6,"reason":{"kind":"error","error":{"code":"RATE_LIMIT","message":"m","status":429,"providerRetryAfterMs":1000,"requestId":"request-1"}}}}`}},
		{"turn/end error message without code",
			[]string{`{"type":"turn/end","seq":0,"time":1,"data":{"turn":5,"reason":{"kind":"error","step":1,"message":"old thrown value"}}}`},
			[]string{`{"type":"turn/end","seq":0,"time":1,"data":{"turn":5,"reason":{"kind":"error","error":{"message":"old thrown value","code":"UNKNOWN"}}}}`}},
		{"turn/end error message with code",
			[]string{`{"type":"turn/end","seq":0,"time":1,"data":{"turn":7,"reason":{"code":"CODED","kind":"error","step":0,"message":"old coded error"}}}`},
			[]string{`{"type":"turn/end","seq":0,"time":1,"data":{"turn":7,"reason":{"kind":"error","error":{"message":"old coded error","code":"CODED"}}}}`}},
		{"current turn/end reasons untouched",
			[]string{
				`{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
				`{"type":"turn/end","seq":1,"time":1,"data":{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"user"}}}}`,
				`{"type":"turn/end","seq":2,"time":1,"data":{"turn":1,"reason":{"kind":"error","error":{"message":"x","code":"Y"},"extra":1}}}`,
				`{"type":"turn/end","seq":3,"time":1,"data":{"turn":1,"reason":{"kind":"extension-reason","detail":1}}}`,
			},
			[]string{
				`{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
				`{"type":"turn/end","seq":1,"time":1,"data":{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"user"}}}}`,
				`{"type":"turn/end","seq":2,"time":1,"data":{"turn":1,"reason":{"kind":"error","error":{"message":"x","code":"Y"},"extra":1}}}`,
				`{"type":"turn/end","seq":3,"time":1,"data":{"turn":1,"reason":{"kind":"extension-reason","detail":1}}}`,
			}},
		{"steering wrapped",
			[]string{`{"type":"steering/message","seq":3,"time":4,"data":{"turn":1,"message":{"id":"m1","role":"user","content":[{"type":"text","text":"old steering"}],"source":{"kind":"user"}}},"surfaceOp":"append"}`},
			[]string{`{"type":"user/message","seq":3,"time":4,"data":{"id":"m1","role":"user","content":[{"type":"text","text":"old steering"}],"source":{"kind":"user"}},"surfaceOp":"append"}`}},
		{"steering wrapped pre-identity message",
			[]string{`{"type":"steering/message","seq":3,"time":4,"data":{"message":{"content":[],"source":{"kind":"user"}},"turn":1},"surfaceOp":"append"}`},
			[]string{`{"type":"user/message","seq":3,"time":4,"data":{"content":[],"source":{"kind":"user"},"id":"legacy-message:s:3","role":"user"},"surfaceOp":"append"}`}},
		{"steering flat",
			[]string{`{"type":"steering/message","seq":0,"time":1,"data":{"turn":1,"content":[{"type":"text","text":"flat steering"}],"source":{"kind":"user"}},"surfaceOp":"append"}`},
			[]string{`{"type":"user/message","seq":0,"time":1,"data":{"content":[{"type":"text","text":"flat steering"}],"source":{"kind":"user"},"id":"legacy-message:s:0","role":"user"},"surfaceOp":"append"}`}},
		{"steering flat, source first",
			[]string{`{"surfaceOp":"append","type":"steering/message","seq":0,"time":1,"data":{"source":{"kind":"user"},"turn":1,"content":[]}}`},
			[]string{`{"surfaceOp":"append","type":"user/message","seq":0,"time":1,"data":{"source":{"kind":"user"},"content":[],"id":"legacy-message:s:0","role":"user"}}`}},
		{"pre-identity user message",
			[]string{`{"type":"user/message","seq":1,"time":2,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}`},
			[]string{`{"type":"user/message","seq":1,"time":2,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"id":"legacy-message:s:1","role":"user"},"surfaceOp":"append"}`}},
		{"pre-identity assistant message",
			[]string{`{"type":"assistant/message","seq":3,"time":4,"data":{"turn":1,"step":1,"content":[{"type":"tool-call","id":"call-1","name":"read","arguments":"{}"}],"provenance":{"provider":"mock","model":"mock"}},"surfaceOp":"append"}`},
			[]string{`{"type":"assistant/message","seq":3,"time":4,"data":{"turn":1,"step":1,"message":{"id":"legacy-message:s:3","role":"assistant","content":[{"type":"tool-call","id":"call-1","name":"read","arguments":"{}"}],"source":{"provider":"mock","model":"mock","kind":"model"}}},"surfaceOp":"append"}`}},
		{"pre-identity assistant message with usage and a provenance kind",
			[]string{`{"type":"assistant/message","seq":0,"time":1,"data":{"turn":1,"content":[],"provenance":{"kind":"x","provider":"p","model":"m","replayState":"r"},"usage":{"inputTokens":1,"outputTokens":2},"step":1},"surfaceOp":"append"}`},
			[]string{`{"type":"assistant/message","seq":0,"time":1,"data":{"turn":1,"usage":{"inputTokens":1,"outputTokens":2},"step":1,"message":{"id":"legacy-message:s:0","role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m","replayState":"r"}}},"surfaceOp":"append"}`}},
		{"pre-identity tool result with error and meta",
			[]string{`{"type":"tool/result","seq":5,"time":6,"data":{"turn":1,"step":1,"callId":"call-1","error":{"name":"E","code":"C"},"content":[{"type":"text","text":"full result"}],"isError":true,"meta":{"k":1}},"sourceEventSeqs":[4],"surfaceOp":"append"}`},
			[]string{`{"type":"tool/result","seq":5,"time":6,"data":{"turn":1,"step":1,"error":{"name":"E","code":"C"},"meta":{"k":1},"message":{"id":"legacy-message:s:5","role":"user","content":[{"type":"tool-result","toolCallId":"call-1","content":[{"type":"text","text":"full result"}],"isError":true}],"source":{"kind":"tool","callId":"call-1"}}},"sourceEventSeqs":[4],"surfaceOp":"append"}`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := readStored("s", vHeader("s"), vEvents(t, c.in...), "")
			if err != nil {
				t.Fatal(err)
			}
			eventtest.SameLines(t, vLines(got), c.want)
		})
	}
}

// legacyMessageLog is the upstream coordinator contract's pre-identity log (coordinator-contract.ts).
var legacyMessageLog = []string{
	`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
	`{"type":"user/message","seq":1,"time":2,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
	`{"type":"step/start","seq":2,"time":3,"data":{"turn":1,"step":1}}`,
	`{"type":"assistant/message","seq":3,"time":4,"data":{"turn":1,"step":1,"content":[{"type":"tool-call","id":"call-1","name":"read","arguments":"{}"}],"provenance":{"provider":"mock","model":"mock"}},"surfaceOp":"append"}`,
	`{"type":"tool/call","seq":4,"time":5,"data":{"turn":1,"step":1,"callId":"call-1","name":"read","arguments":"{}"}}`,
	`{"type":"tool/result","seq":5,"time":6,"data":{"turn":1,"step":1,"callId":"call-1","content":[{"type":"text","text":"full result"}],"isError":false},"sourceEventSeqs":[4],"surfaceOp":"append"}`,
	`{"type":"tool/result","seq":6,"time":8,"data":{"turn":1,"step":1,"callId":"call-1","content":[{"type":"text","text":"pruned"}],"isError":false},"sourceEventSeqs":[5],"surfaceOp":{"op":"replace","start":5,"end":5}}`,
	`{"type":"step/end","seq":7,"time":9,"data":{"turn":1,"step":1}}`,
	`{"type":"turn/end","seq":8,"time":10,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
}

func TestLegacyReplacementInheritsStartID(t *testing.T) {
	got, err := readStored("legacy-message-load", vHeader("legacy-message-load"), vEvents(t, legacyMessageLog...), "")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"tool/result","seq":6,"time":8,"data":{"turn":1,"step":1,"message":{"id":"legacy-message:legacy-message-load:5","role":"user","content":[{"type":"tool-result","toolCallId":"call-1","content":[{"type":"text","text":"pruned"}],"isError":false}],"source":{"kind":"tool","callId":"call-1"}}},"sourceEventSeqs":[5],"surfaceOp":{"op":"replace","start":5,"end":5}}`
	if string(got[6].Raw) != want {
		t.Fatalf("got  %s\nwant %s", got[6].Raw, want)
	}
	var ids []string
	for _, e := range got {
		if id, ok := eventMessageIDOf(t, e); ok {
			ids = append(ids, id)
		}
	}
	wantIDs := []string{"legacy-message:legacy-message-load:1", "legacy-message:legacy-message-load:3",
		"legacy-message:legacy-message-load:5", "legacy-message:legacy-message-load:5"}
	if strings.Join(ids, " ") != strings.Join(wantIDs, " ") {
		t.Fatalf("ids %v, want %v", ids, wantIDs)
	}
	// Inspect agrees and the balanced log needs no closers.
	events, closers, err := inspectWith("legacy-message-load", vHeader("legacy-message-load"), vEvents(t, legacyMessageLog...), "", nil)
	if err != nil || len(closers) != 0 {
		t.Fatalf("Inspect: %v, %d closers", err, len(closers))
	}
	eventtest.SameLines(t, vLines(events), vLines(got))
}

func eventMessageIDOf(t *testing.T, e event.Event) (string, bool) {
	t.Helper()
	rec, err := e.Record()
	if err != nil {
		t.Fatal(err)
	}
	return eventMessageID(rec)
}

func TestLegacyReplacementInheritsCurrentID(t *testing.T) {
	in := []string{
		`{"type":"tool/result","seq":0,"time":1,"data":{"turn":1,"step":1,"message":{"id":"t1","role":"user","source":{"kind":"tool","callId":"c"},"content":[{"type":"tool-result","toolCallId":"c","content":[]}]}},"surfaceOp":"append"}`,
		`{"type":"tool/result","seq":1,"time":1,"data":{"turn":1,"step":1,"callId":"c","content":[],"isError":false},"surfaceOp":{"op":"replace","start":0,"end":0}}`,
	}
	got, err := readStored("s", vHeader("s"), vEvents(t, in...), "")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"tool/result","seq":1,"time":1,"data":{"turn":1,"step":1,"message":{"id":"t1","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[],"isError":false}],"source":{"kind":"tool","callId":"c"}}},"surfaceOp":{"op":"replace","start":0,"end":0}}`
	if string(got[1].Raw) != want {
		t.Fatalf("got  %s\nwant %s", got[1].Raw, want)
	}
}

func TestLegacyReplacementWithoutKnownStart(t *testing.T) {
	// The start names an event without a message: the minted message has no id and fails the shape check.
	in := []string{
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
		`{"type":"tool/result","seq":1,"time":1,"data":{"turn":1,"step":1,"callId":"c","content":[],"isError":false},"surfaceOp":{"op":"replace","start":0,"end":0}}`,
	}
	_, err := readStored("s", vHeader("s"), vEvents(t, in...), "")
	if want := "session event at seq 1 lacks an identified message"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

func TestMalformedLegacy(t *testing.T) {
	cases := []struct {
		name, event, what string
	}{
		{"turn/start trigger null", `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":null}}`, "turn/start"},
		{"turn/start turn 0", `{"type":"turn/start","seq":0,"time":1,"data":{"turn":0,"trigger":{"kind":"x"}}}`, "turn/start"},
		{"turn/start extra key", `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":"x"},"x":1}}`, "turn/start"},
		{"turn/start empty kind", `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":""}}}`, "turn/start"},
		{"steering extra key", `{"type":"steering/message","seq":0,"time":1,"surfaceOp":"append","data":{"turn":1,"content":[],"source":{"kind":"user"},"extra":true}}`, "steering/message"},
		{"steering null data", `{"type":"steering/message","seq":0,"time":1,"surfaceOp":"append","data":null}`, "steering/message"},
		{"steering missing data", `{"type":"steering/message","seq":0,"time":1,"surfaceOp":"append"}`, "steering/message"},
		{"steering flat without source", `{"type":"steering/message","seq":0,"time":1,"data":{"turn":1,"content":[]}}`, "steering/message"},
		{"steering wrapped without turn", `{"type":"steering/message","seq":0,"time":1,"data":{"message":{"id":"m"}}}`, "steering/message"},
		{"turn/end completed extra", `{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"kind":"completed","extra":true}}}`, "turn/end"},
		{"turn/end reason null", `{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":null}}`, "turn/end"},
		{"turn/end intermediate step", `{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"step":1,"reason":{"kind":"completed"}}}`, "turn/end"},
		{"turn/end turn 0", `{"type":"turn/end","seq":0,"time":1,"data":{"turn":0,"reason":{"kind":"completed"}}}`, "turn/end"},
		{"turn/end kind not a string", `{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"kind":1}}}`, "turn/end"},
		{"turn/end aborted extra", `{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"kind":"aborted","extra":true}}}`, "turn/end"},
		{"turn/end disposed extra", `{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"kind":"disposed","extra":true}}}`, "turn/end"},
		{"turn/end error step", `{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"kind":"error","step":-1,"message":"bad step"}}}`, "turn/end"},
		{"turn/end error code", `{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"kind":"error","step":0,"message":"bad code","code":1}}}`, "turn/end"},
		{"turn/end error failure status", `{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"kind":"error","step":0,"failure":{"message":"m","code":"C","status":"429"}}}}`, "turn/end"},
		{"turn/end error failure extra", `{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"kind":"error","step":0,"failure":{"message":"m","code":"C","x":1}}}}`, "turn/end"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := `session "s" contains malformed pre-react-loop ` + c.what + ` at seq 0`
			_, err := readStored("s", vHeader("s"), vEvents(t, c.event), "")
			if err == nil || err.Error() != want {
				t.Fatalf("ReadStored: got %v, want %q", err, want)
			}
			_, _, err = inspectWith("s", vHeader("s"), vEvents(t, c.event), "", nil)
			if want := `stored session "s" failed validation: Error: ` + want; err == nil || err.Error() != want {
				t.Fatalf("Inspect: got %v, want %q", err, want)
			}
		})
	}
}

func TestLegacyFirstFailingEventWins(t *testing.T) {
	// Migrations and the message-shape check run event by event, so an earlier bad message beats a later
	// malformed legacy shape.
	in := []string{
		`{"type":"user/message","seq":0,"time":1,"surfaceOp":"append","data":{"id":"x","role":"assistant","content":[],"source":{"kind":"user"}}}`,
		`{"type":"turn/start","seq":1,"time":1,"data":{"turn":1,"trigger":null}}`,
	}
	_, err := readStored("s", vHeader("s"), vEvents(t, in...), "")
	if want := `session event at seq 0 message must have role "user"`; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}
