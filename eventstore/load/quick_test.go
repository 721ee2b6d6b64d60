package load

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/eventtest"
	"github.com/dshfs/dshfs/internal/fixtures"
)

// TestQuickEventsPassEveryCheck guards quickEvent, the load checks' unparsed path for message events:
// whatever it accepts, parsed and run through every check the load makes of an event, passes each one
// and is not upgraded, carries the message id quickEvent read, and moves the repair planner as
// quickEvent's reading does. Its inputs are every message event in the fixtures (written by the harness
// and by dshfs), edge cases in both member orders, and a sample of those with one byte changed.
func TestQuickEventsPassEveryCheck(t *testing.T) {
	types := []string{"user/message", "assistant/message", "tool/call", "tool/result"}
	lines := []string{
		// dshfs's member order (internal/synth, bench/gensession)
		`{"type":"user/message","seq":2,"time":1,"data":{"id":"u-1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"assistant/message","seq":24,"time":1,"data":{"turn":1,"step":1,"message":{"id":"a-1-1","role":"assistant","content":[{"type":"text","text":"Running."},{"type":"tool-call","id":"call-1","name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}},"usage":{"inputTokens":1,"outputTokens":2}},"sourceEventSeqs":[4,5],"surfaceOp":"append"}`,
		`{"type":"tool/call","seq":25,"time":1,"data":{"turn":1,"step":1,"callId":"call-1","name":"bash","arguments":"{}"}}`,
		`{"type":"tool/result","seq":26,"time":1,"data":{"turn":1,"step":1,"message":{"id":"t-1","role":"user","content":[{"type":"tool-result","toolCallId":"call-1","content":[{"type":"text","text":"ok"}],"isError":false}],"source":{"kind":"tool","callId":"call-1"}}},"sourceEventSeqs":[25],"surfaceOp":"append"}`,
		// edges
		`{"type":"assistant/message","seq":0,"time":-5,"data":{"step":-3,"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"}}},"ignorable":true,"surfaceOp":"append"}`,
		`{"type":"assistant/message","seq":0,"time":1,"data":{"step":2,"message":{"id":"a","role":"assistant","content":[{"type":"tool-call","id":"c\"1"},{"type":"tool-call","id":"c2"},{"id":"c3"}],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}`,
		`{"type":"user/message","seq":7,"time":1,"data":{"id":"\u0000","role":"user","content":[],"source":{"kind":"k","extra":1},"turn":{}},"surfaceOp":"append"}`,
		`{"type":"tool/call","seq":3,"time":1,"data":{"callId":""}}`,
		`{"type":"tool/call","seq":3,"time":1,"data":{"callId":"c","message":null}}`,
		`{"type":"tool/call","seq":3,"time":1,"data":{"callId":7}}`,
		`{"type":"tool/result","seq":3,"time":1,"data":{"message":{"id":"t","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[]}],"source":{"kind":"tool","callId":"c"}}}}`,
		`{"type":"tool/result","seq":3,"time":1,"data":{"message":{"id":"t","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[]},{}],"source":{"kind":"tool","callId":"c"}}}}`,
		`{"type":"tool/result","seq":3,"time":1,"data":{"message":{"id":"t","role":"user","content":[{"type":"tool-result","toolCallId":"d","content":[]}],"source":{"kind":"tool","callId":"c"}}}}`,
		`{"type":"user/message","seq":2,"time":1,"data":{"id":"u","role":"user","content":"hi","source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"user/message","seq":2,"time":1,"data":{"id":"u","id":"v","role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"user/message","seq":2,"time":1.5,"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"}}}`,
		`{"type":"user/message","seq":2,"time":1,"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"}},"extra":1}`,
		// one thing wrong each (every requirement of quickEvent's has one here)
		`{"type":"tool/call","seq":3,"time":1,"data":{"callId":"c","message":{"id":"m"}}}`,
		`{"type":"tool/result","seq":3,"time":1,"data":{"message":{"id":"t","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[]},{"type":"tool-result","toolCallId":"c","content":[]}],"source":{"kind":"tool","callId":"c"}}}}`,
		`{"type":"tool/result","seq":3,"time":1,"data":{"message":{"id":"t","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":"x"}],"source":{"kind":"tool","callId":"c"}}}}`,
		`{"type":"tool/result","seq":3,"time":1,"data":{"message":{"id":"t","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[]}],"source":{"kind":"tool","callId":""}}}}`,
		`{"type":"tool/result","seq":3,"time":1,"data":{"message":{"id":"t","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[]}],"source":{"kind":"user","callId":"c"}}}}`,
		`{"type":"tool/result","seq":3,"time":1,"data":{"message":{"id":"t","role":"user","content":[{"type":"tool-result","content":[]}],"source":{"kind":"tool","callId":"c"}}}}`,
		`{"type":"tool/result","seq":3,"time":1,"data":{"message":{"id":"t","role":"user","content":[{"type":"tool-call","toolCallId":"c","content":[]}],"source":{"kind":"tool","callId":"c"}}}}`,
		`{"type":"tool/result","seq":3,"time":1,"data":{"callId":"c","content":[],"isError":false}}`,
		`{"type":"user/message","seq":2,"time":1,"data":{"id":"","role":"user","content":[],"source":{"kind":"user"}}}`,
		`{"type":"user/message","seq":2,"time":1,"data":{"id":"u","role":"user","content":[],"source":{}}}`,
		`{"type":"user/message","seq":2,"time":1,"data":{"id":"u","role":"user","content":[],"source":{"kind":""}}}`,
		`{"type":"user/message","seq":2,"time":1,"data":{"id":"u","role":"user","content":[]}}`,
		`{"type":"user/message","seq":2,"time":1,"data":{"id":"u","content":[],"source":{"kind":"user"}}}`,
		`{"type":"user/message","seq":2,"time":1,"data":{"role":"user","content":[],"source":{"kind":"user"}}}`,
		`{"type":"user/message","seq":2,"time":1,"data":{"id":"u","role":"user","source":{"kind":"user"}}}`,
		`{"type":"user/message","seq":2,"time":1,"data":{"content":[],"source":{"kind":"user"}}}`,
		`{"type":"user/message","seq":2,"time":1,"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"}},"ignorable":false}`,
		`{"type":"user/message","seq":2,"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"}}}`,
		`{"type":"user/message","time":1,"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"}}}`,
		`{"type":"user/message","seq":2,"time":1}`,
		`{"type":"user/message","seq":2,"time":1,"data":[]}`,
		`{"type":"assistant/message","seq":0,"time":1,"data":{"step":1,"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"model","provider":"p"}}}}`,
		`{"type":"assistant/message","seq":0,"time":1,"data":{"step":1,"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"model","provider":"","model":"m"}}}}`,
		`{"type":"assistant/message","seq":0,"time":1,"data":{"step":1,"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"user","provider":"p","model":"m"}}}}`,
		`{"type":"assistant/message","seq":0,"time":1,"data":{"step":1,"message":{"id":"a","role":"assistant","content":[1],"source":{"kind":"model","provider":"p","model":"m"}}}}`,
		`{"type":"assistant/message","seq":0,"time":1,"data":{"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"tool-call"}],"source":{"kind":"model","provider":"p","model":"m"}}}}`,
		`{"type":"assistant/message","seq":0,"time":1,"data":{"step":"1","message":{"id":"a","role":"assistant","content":[{"type":"tool-call","id":"c"}],"source":{"kind":"model","provider":"p","model":"m"}}}}`,
		`{"type":"assistant/message","seq":0,"time":1,"data":{"step":1.5,"message":{"id":"a","role":"assistant","content":[{"type":"tool-call","id":"c"}],"source":{"kind":"model","provider":"p","model":"m"}}}}`,
		`{"type":"assistant/message","seq":0,"time":1,"data":{"step":null,"message":{"id":"a","role":"assistant","content":[{"type":"tool-call","id":"c"}],"source":{"kind":"model","provider":"p","model":"m"}}}}`,
		`{"type":"assistant/message","seq":0,"time":1,"data":{"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"tool-call","id":7}],"source":{"kind":"model","provider":"p","model":"m"}}}}`,
		`{"type":"assistant/message","seq":0,"time":1,"data":{"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"}}}}`,
		`{"type":"assistant/message","seq":0,"time":1,"data":{"step":1,"content":[],"provenance":{}}}`,
		`{"type":"assistant/message","seq":0,"time":1,"data":{"step":1,"message":{"id":"a","role":"user","content":[],"source":{"kind":"model","provider":"p","model":"m"}}}}`,
	}
	edges := len(lines)
	fixtureEvents := eventtest.FixtureLines(t, types, fixtures.Path(t, "upstream", "raw"), fixtures.Path(t, "generated", "raw"))
	lines = append(lines, fixtureEvents...)
	fromFixtures := len(fixtureEvents)
	base := len(lines)
	for i := range base {
		if i >= edges && i%40 != 0 {
			continue // the edge cases and a sample of the fixtures
		}
		lines = append(lines, eventtest.OneByteMutations(lines[i], []byte{'0', '-', '.', '}', ']', ',', '"', 'x', '['})...)
	}
	accepted, refused, fixturesAccepted := 0, 0, 0
	for i, l := range lines {
		raw, err := event.Canonical([]byte(l))
		if err != nil || string(raw) != l {
			continue // not a stored line
		}
		e, err := event.NewEvent(raw)
		if err != nil {
			continue
		}
		q, ok := quickEvent(e)
		if !ok {
			refused++
			continue
		}
		accepted++
		if i >= edges && i < base {
			fixturesAccepted++
		}
		if why := quickCheckFailure(e, q); why != "" {
			t.Errorf("%s: accepted without parsing, but %s", l, why)
		}
	}
	if fromFixtures < 300 || fixturesAccepted*10 < fromFixtures*9 || refused < 1000 {
		t.Fatalf("%d accepted (%d of the fixtures' %d message events), %d refused: the test exercises too little",
			accepted, fixturesAccepted, fromFixtures, refused)
	}
	t.Logf("%d accepted (%d of the fixtures' %d message events), %d refused", accepted, fixturesAccepted, fromFixtures, refused)
}

// quickCheckFailure runs the load's checks of one event on its parsed record and says which one the
// event fails or what differs from quickEvent's reading q, "" when none.
func quickCheckFailure(e event.Event, q quickMessage) string {
	rec, why := recordCheckFailure(e)
	if why != "" {
		return why
	}
	if id, ok := eventMessageID(rec); id != q.id || ok != (q.id != "") {
		return fmt.Sprintf("its message id is %q (%v), read as %q", id, ok, q.id)
	}
	if seq, ok := rec.Get("seq"); e.Seq < 0 || !ok || seq.Num != float64(e.Seq) {
		return "its seq is not its own"
	}
	parsed, fast := newTurnScan(), newTurnScan()
	for _, s := range []*turnScan{parsed, fast} { // calls pending, the event's own among them
		s.openTurn, s.openStep = slotOf(event.Number(7), true), slotOf(event.Number(8), true)
		for _, id := range []string{"other", q.callID} {
			s.pending.set(s.pending.key(event.String(id), true), &pendingCall{id: event.String(id), idOK: true})
		}
	}
	if err := parsed.step(e, &rec); err != nil {
		return "the planner fails: " + err.Error()
	}
	fast.stepQuick(e, &q)
	if !reflect.DeepEqual(parsed, fast) {
		return fmt.Sprintf("the planner's state differs: parsed %+v, quick %+v", *parsed, *fast)
	}
	return ""
}

// TestQuickEventTakesAnyBytes: quickEvent reads bytes that are not JSON — every proper prefix of the edge
// lines of TestQuickEventsPassEveryCheck, and those lines with a byte changed, canonical or not — without
// panicking, and accepts no proper prefix of a line.
func TestQuickEventTakesAnyBytes(t *testing.T) {
	lines := []string{
		`{"type":"user/message","seq":2,"time":1,"data":{"id":"u-1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"assistant/message","seq":24,"time":1,"data":{"turn":1,"step":1,"message":{"id":"a-1-1","role":"assistant","content":[{"type":"text","text":"Running."},{"type":"tool-call","id":"call-1","name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}},"usage":{"inputTokens":1,"outputTokens":2}},"sourceEventSeqs":[4,5],"surfaceOp":"append"}`,
		`{"type":"tool/call","seq":25,"time":1,"data":{"turn":1,"step":1,"callId":"call-1","name":"bash","arguments":"{}"}}`,
		`{"type":"tool/result","seq":26,"time":1,"data":{"turn":1,"step":1,"message":{"id":"t-1","role":"user","content":[{"type":"tool-result","toolCallId":"call-1","content":[{"type":"text","text":"ok"}],"isError":false}],"source":{"kind":"tool","callId":"call-1"}}},"sourceEventSeqs":[25],"surfaceOp":"append"}`,
	}
	types := []string{"user/message", "assistant/message", "tool/call", "tool/result"}
	seqs := []int64{2, 24, 25, 26}
	read := func(raw []byte, typ string, seq int64) (ok bool) {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("%s: quickEvent panics: %v", raw, r)
			}
		}()
		_, ok = quickEvent(event.Event{Raw: raw, Type: typ, Seq: seq})
		return ok
	}
	for i, l := range lines {
		if !read([]byte(l), types[i], seqs[i]) {
			t.Fatalf("%s: refused", l)
		}
		for n := range len(l) {
			if read([]byte(l[:n]), types[i], seqs[i]) {
				t.Errorf("%q: a proper prefix accepted", l[:n])
			}
		}
		for at := range len(l) {
			for _, b := range []byte{'0', '-', '.', '}', ']', ',', '"', 'x', '[', '{', ':', ' ', '\\', 0xff} {
				m := []byte(l)
				m[at] = b
				read(m, types[i], seqs[i])
				read(m[:at+1], types[i], seqs[i])
			}
		}
	}
}
