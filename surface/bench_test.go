package surface

import (
	"strconv"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
)

// synthLog builds a realistic long log of about n events: turns of two steps (a tool step streaming
// 30 chunks, a text step streaming 20), a prune of every tenth tool result, and a compaction of all
// but the last four surface nodes every 300 turns.
func synthLog(tb testing.TB, n int) []event.Event {
	events := make([]event.Event, 0, n+64)
	var nodes []int64
	tools := map[int64]string{}
	seq := func() int64 { return int64(len(events)) }
	add := func(typ, data string, extra ...event.Member) int64 {
		s := seq()
		events = append(events, event.NewEventFrom(typ, s, 1_700_000_000_000+s, []byte(data), extra...))
		return s
	}
	str := func(s string) event.Value { return event.String(s) }
	seqs := func(list []int64) event.Value {
		vs := make([]event.Value, len(list))
		for i, s := range list {
			vs[i] = event.Int(s)
		}
		return event.Array(vs...)
	}
	replace := func(start, end int64) event.Value {
		return event.Object(event.Member{Key: "op", Value: str("replace")}, event.Member{Key: "start", Value: event.Int(start)}, event.Member{Key: "end", Value: event.Int(end)})
	}
	app := event.Member{Key: "surfaceOp", Value: str("append")}
	toolData := func(turn int, id, text string) string {
		return `{"turn":` + strconv.Itoa(turn) + `,"step":1,"message":{"id":"` + id + `","role":"user","content":[{"type":"tool-result","toolCallId":"c` + id + `","content":[{"type":"text","text":"` + text + `"}],"isError":false}],"source":{"kind":"tool","callId":"c` + id + `"}}}`
	}
	for turn := 1; len(events) < n; turn++ {
		ts := strconv.Itoa(turn)
		add("turn/start", `{"turn":`+ts+`}`)
		add("step/start", `{"turn":`+ts+`,"step":1}`)
		nodes = append(nodes, add("user/message", `{"id":"u`+ts+`","role":"user","content":[{"type":"text","text":"please run the tests again"}],"source":{"kind":"user"}}`, app))
		add("request/header", `{"header":{"config":{"provider":"p","model":"m"}},"reason":"initial"}`)
		var chunks []int64
		for i := range 30 {
			chunks = append(chunks, add("assistant/chunk", `{"turn":`+ts+`,"step":1,"chunk":{"type":"tool-call-delta","index":0,"id":"c`+ts+`","argumentsDelta":"x`+strconv.Itoa(i)+`"}}`))
		}
		nodes = append(nodes, add("assistant/message", `{"turn":`+ts+`,"step":1,"message":{"id":"a`+ts+`","role":"assistant","content":[{"type":"tool-call","id":"c`+ts+`","name":"bash","arguments":"{\"cmd\":\"npm test\"}"}],"source":{"kind":"model","provider":"p","model":"m"}}}`,
			event.Member{Key: "sourceEventSeqs", Value: seqs(chunks)}, app))
		call := add("tool/call", `{"turn":`+ts+`,"step":1,"callId":"c`+ts+`","name":"bash","arguments":"{\"cmd\":\"npm test\"}"}`)
		res := add("tool/result", toolData(turn, ts, `PASS tests/a.spec.ts\nPASS tests/b.spec.ts\n12 passed`), event.Member{Key: "sourceEventSeqs", Value: seqs([]int64{call})}, app)
		nodes = append(nodes, res)
		tools[res] = ts
		add("step/end", `{"turn":`+ts+`,"step":1}`)
		add("step/start", `{"turn":`+ts+`,"step":2}`)
		chunks = chunks[:0]
		for range 20 {
			chunks = append(chunks, add("assistant/chunk", `{"turn":`+ts+`,"step":2,"chunk":{"type":"text-delta","index":0,"text":"ok "}}`))
		}
		nodes = append(nodes, add("assistant/message", `{"turn":`+ts+`,"step":2,"message":{"id":"b`+ts+`","role":"assistant","content":[{"type":"text","text":"All tests pass."}],"source":{"kind":"model","provider":"p","model":"m"}}}`,
			event.Member{Key: "sourceEventSeqs", Value: seqs(chunks)}, app))
		add("step/end", `{"turn":`+ts+`,"step":2}`)
		if turn%10 == 0 {
			add("compaction/prune", `{"shadowedRange":{"start":`+itoa(res)+`,"end":`+itoa(res)+`},"shadowedSeqs":[`+itoa(res)+`],"shadowedTokenCount":9}`)
			p := add("tool/result", toolData(turn, ts, "[pruned]"), event.Member{Key: "sourceEventSeqs", Value: seqs([]int64{res})}, event.Member{Key: "surfaceOp", Value: replace(res, res)})
			for i, s := range nodes {
				if s == res {
					nodes[i] = p
				}
			}
		}
		if turn%300 == 0 && len(nodes) > 8 {
			start := add("compaction/start", `{"compactionId":"k`+ts+`","turn":`+ts+`}`)
			span := append([]int64(nil), nodes[:len(nodes)-4]...)
			sum := add("compaction/summary", `{"compactionId":"k`+ts+`","summary":[{"type":"text","text":"s"}]}`)
			cp := add("user/message", `{"id":"k`+ts+`","role":"user","content":[{"type":"text","text":"checkpoint"}],"source":{"kind":"plugin","plugin":"compaction"}}`,
				event.Member{Key: "sourceEventSeqs", Value: seqs(append([]int64{start, sum}, span...))}, event.Member{Key: "surfaceOp", Value: replace(span[0], span[len(span)-1])})
			add("compaction/end", `{"compactionId":"k`+ts+`","turn":`+ts+`}`)
			nodes = append([]int64{cp}, nodes[len(nodes)-4:]...)
		}
		add("turn/end", `{"turn":`+ts+`,"reason":{"kind":"completed"}}`)
	}
	return events
}

func TestSynthLogFolds(t *testing.T) {
	events := synthLog(t, 20_000)
	r := mustFold(t, events)
	if r.Generation == 0 {
		t.Fatal("synthetic log has no replacements")
	}
	f := NewFolder(0)
	for _, e := range events {
		if err := f.Push(e); err != nil {
			t.Fatal(err)
		}
	}
	if string(f.Result().JSON()) != string(r.JSON()) {
		t.Fatal("folder and fold disagree on the synthetic log")
	}
	b, err := Balance(events, r)
	if err != nil || b[len(b)-1] != 0 {
		t.Fatalf("balance %v", err)
	}
}

// BenchmarkFoldDerive folds a 500k-event log and derives its messages, as every session load does.
func BenchmarkFoldDerive(b *testing.B) {
	events := synthLog(b, 500_000)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r, err := Fold(events)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := DeriveMessages(events, r); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(events)), "events")
}

// BenchmarkFoldLongSurface folds a log that never compacts but prunes: a 100k-node surface where
// every replace is a one-node rewrite far behind the tail.
func BenchmarkFoldLongSurface(b *testing.B) {
	app := event.Member{Key: "surfaceOp", Value: event.String("append")}
	data := func(i int, text string) []byte {
		return []byte(`{"turn":1,"step":1,"message":{"id":"t` + strconv.Itoa(i) + `","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[{"type":"text","text":"` + text + `"}],"isError":false}],"source":{"kind":"tool","callId":"c"}}}`)
	}
	var events []event.Event
	var originals []int64
	for i := range 100_000 {
		s := int64(len(events))
		events = append(events, event.NewEventFrom("tool/result", s, s, data(i, "output"), app))
		originals = append(originals, s)
		if i%3 == 2 && i >= 1000 {
			j := i - 1000
			target := originals[j]
			p := int64(len(events))
			events = append(events, event.NewEventFrom("tool/result", p, p, data(j, "[pruned]"),
				event.Member{Key: "sourceEventSeqs", Value: event.Array(event.Int(target))},
				event.Member{Key: "surfaceOp", Value: event.Object(
					event.Member{Key: "op", Value: event.String("replace")},
					event.Member{Key: "start", Value: event.Int(target)},
					event.Member{Key: "end", Value: event.Int(target)})}))
		}
	}
	r, err := Fold(events)
	if err != nil {
		b.Fatal(err)
	}
	if len(r.Nodes) != 100_000 || r.Generation < 30_000 {
		b.Fatalf("%d nodes, %d replacements", len(r.Nodes), r.Generation)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Fold(events); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFold is Fold alone over the 500k-event log.
func BenchmarkFold(b *testing.B) {
	events := synthLog(b, 500_000)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Fold(events); err != nil {
			b.Fatal(err)
		}
	}
}
