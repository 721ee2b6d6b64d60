package eventstore

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/eventtest"
	"github.com/dshfs/dshfs/internal/fixtures"
)

// TestQuickMessageInputAgrees guards the unparsed reading of appended message events: whenever quickInput
// takes a user/message, assistant/message, tool/call or tool/result line, the parsed path (parseLine, then
// prepare) accepts the same event with the same packing and time, and the live trace, in each of several
// states — a tool call pending or not among them — decides and moves exactly as it does on the whole
// record. Its inputs are the message events of the fixtures and of the benchmarks' sessions, edge cases,
// and each of those with one byte changed.
func TestQuickMessageInputAgrees(t *testing.T) {
	lines := []string{
		`{"type":"user/message","seq":4,"time":1,"data":{"id":"u-1","role":"user","content":[{"type":"text","text":"Please run the build."}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"user/message","seq":4,"time":1,"data":{"id":"u-1","role":"user","content":[],"source":{"kind":"user"}}}`,
		`{"type":"user/message","seq":4,"time":1,"data":{"id":"u-1","role":"user","content":[],"source":{"kind":"plugin","plugin":"compact","compactionId":"k"}},"surfaceOp":"replace"}`,
		`{"type":"assistant/message","seq":4,"time":1,"data":{"turn":1,"step":1,"message":{"id":"a-1-1","role":"assistant","content":[{"type":"text","text":"Running the build."},{"type":"tool-call","id":"c-1","name":"bash","arguments":"{\"command\":\"make test\"}"}],"source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-flash"}},"usage":{"inputTokens":1001,"outputTokens":20}},"sourceEventSeqs":[1,2,3],"surfaceOp":"append"}`,
		`{"type":"assistant/message","seq":4,"time":1,"data":{"turn":2,"step":1,"message":{"id":"a-1-1","role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}`,
		`{"type":"assistant/message","seq":4,"time":1,"data":{"step":1,"message":{"id":"a-1-1","role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"}}}}`,
		`{"type":"tool/call","seq":4,"time":1,"data":{"turn":1,"step":1,"callId":"c-1","name":"bash","arguments":"{}"}}`,
		`{"type":"tool/call","seq":4,"time":1,"data":{"turn":1,"step":2,"callId":"c-2","name":"bash","arguments":"{}"}}`,
		`{"type":"tool/result","seq":4,"time":1,"data":{"turn":1,"step":1,"message":{"id":"t-1","role":"user","content":[{"type":"tool-result","toolCallId":"c-1","content":[{"type":"text","text":"ok"}],"isError":false}],"source":{"kind":"tool","callId":"c-1"}}},"sourceEventSeqs":[3],"surfaceOp":"append"}`,
		`{"type":"tool/result","seq":4,"time":1,"data":{"turn":1,"step":1,"message":{"id":"t-2","role":"user","content":[{"type":"tool-result","toolCallId":"c-2","content":[{"type":"text","text":"never ran"}],"isError":true}],"source":{"kind":"tool","callId":"c-2"}},"error":{"code":"TOOL_NOT_STARTED"}},"surfaceOp":"append"}`,
		`{"type":"tool/result","seq":4,"time":1,"data":{"turn":1,"step":1,"message":{"id":"t-1","role":"user","content":[{"type":"tool-result","toolCallId":"c-1","content":[],"isError":false}],"source":{"kind":"tool","callId":"c-1"}}}}`,
	}
	types := []string{"user/message", "assistant/message", "tool/call", "tool/result"}
	fromFixtures := eventtest.FixtureLines(t, types, fixtures.Path(t, "upstream", "raw"))
	edges := len(lines)
	lines = append(lines, fromFixtures...)
	base := len(lines)
	for i := 0; i < base; i++ {
		if i >= edges && (i-edges)%40 != 0 {
			continue
		}
		lines = append(lines, eventtest.OneByteMutations(lines[i], []byte{'0', '1', '9', '-', '.', '}', ',', '"', 'x', '['})...)
	}
	const now = 1778573709999
	// the trace states: nothing open; turn 1 open; turn 1 step 1 open; that with call c-1 pending; that
	// with a compaction open
	states := []*liveTrace{newLiveTrace()}
	for _, typ := range []string{"turn/start", "step/start", "tool/call", "compaction/start"} {
		next := states[len(states)-1].clone()
		rec, err := event.Parse([]byte(`{"data":{"turn":1,"step":1,"callId":"c-1","compactionId":"k"}}`))
		if err != nil {
			t.Fatal(err)
		}
		next.apply(typ, jsv{rec, true})
		states = append(states, next)
	}
	w := &Session{id: "s"}
	taken, fixturesTaken, refused, vetoed, parsedLater := 0, 0, 0, 0, 0
	for i, l := range lines {
		seq := int64(4)
		if e, err := event.ParseEvent([]byte(l)); err == nil && e.Seq >= 0 {
			seq = e.Seq
		}
		q, ok := quickInput([]byte(l), seq, now)
		if !ok {
			refused++
			continue
		}
		taken++
		if i >= edges && i < base {
			fixturesTaken++
		}
		if !q.message {
			t.Errorf("%s: taken, but not as a message", l)
		}
		if _, ok := quickInput([]byte(l), seq+1, now); ok {
			t.Errorf("%s: taken at seq %d and %d", l, seq, seq+1)
		}
		full, ok := parsedAlike(t, w, l, q, seq, now)
		if !ok {
			continue
		}
		for i, st := range states {
			quick, whole := st.clone(), st.clone()
			qin := q
			if _, ok := quick.clone().messageRecord(&qin); !ok {
				parsedLater++
			}
			qerr, werr := quick.acceptInput(&qin), whole.accept(full.ev.Type, full.rec)
			if fmt.Sprint(qerr) != fmt.Sprint(werr) || !reflect.DeepEqual(quick, whole) {
				t.Errorf("%s in trace state %d: vetoed %v and left %+v, parsed: %v and %+v", l, i, qerr, quick, werr, whole)
			}
			if werr != nil {
				vetoed++
			}
		}
	}
	if fixturesTaken*2 < len(fromFixtures) || refused < 1000 || vetoed < 20 || parsedLater < 5 {
		t.Fatalf("%d taken (%d of the fixtures' %d lines), %d refused, %d trace vetoes, %d parsed for the trace: the test exercises too little",
			taken, fixturesTaken, len(fromFixtures), refused, vetoed, parsedLater)
	}
	t.Logf("%d taken (%d of the fixtures' %d lines), %d refused, %d trace vetoes, %d parsed for the trace",
		taken, fixturesTaken, len(fromFixtures), refused, vetoed, parsedLater)
}
