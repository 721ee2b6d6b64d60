// Package synth writes synthetic but realistic sessions with dshfs's own writer, for benchmarks: turns of
// two steps with streamed text chunks (packed into rows), a tool call and its result, and the assistant
// messages that cite their chunks; one durable batch per step and turn, as the harness writes.
package synth

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
)

// gen accumulates events with contiguous seqs and flushes them as durable batches.
type gen struct {
	st    *eventstore.Store
	id    string
	seq   int64
	time  int64
	batch []event.Event
	limit int64
	// chunks is how many assistant/chunk events a turn's first step streams (its second streams three
	// quarters as many); 0 means DefaultChunks
	chunks int
}

// DefaultChunks is how many text chunks a turn's first step streams unless asked otherwise: about three
// quarters of a turn's events are then streamed chunks, as in the harness's own sessions.
const DefaultChunks = 20

// streamed is how many chunks step (1 or 2) of a turn streams.
func (g *gen) streamed(step int) int {
	n := g.chunks
	switch {
	case n == 0:
		n = DefaultChunks
	case n < 0:
		return 0
	}
	if step == 2 {
		return n * 3 / 4
	}
	return n
}

func (g *gen) add(typ string, data string, extra ...event.Member) {
	g.time += 3
	d, err := event.Canonical([]byte(data))
	if err != nil {
		panic(fmt.Sprintf("bad generated JSON %s: %v", data, err))
	}
	g.batch = append(g.batch, event.NewEventFrom(typ, g.seq, g.time, d, extra...))
	g.seq++
}

func (g *gen) flush() error {
	if len(g.batch) == 0 {
		return nil
	}
	err := g.st.Append(context.Background(), g.id, g.batch)
	g.batch = g.batch[:0]
	return err
}

func seqs(from, to int64) event.Value {
	var a []event.Value
	for s := from; s < to; s++ {
		a = append(a, event.Number(float64(s)))
	}
	return event.Array(a...)
}

var words = strings.Fields("the session log keeps every event so a crash can be resumed and the surface rebuilt from the same bytes while tools read files run tests and report results")

// Write creates session id in the JSONL root (created if absent) holding at least n events: whole turns,
// so the log ends balanced.
func Write(root string, mode jsonl.Compression, id string, n int) error {
	return WriteChunks(root, mode, id, n, DefaultChunks)
}

// WriteChunks is Write with chunks streamed text chunks in each turn's first step (three quarters as many
// in its second): fewer make a mix heavier in messages, tool calls and results, and brackets.
func WriteChunks(root string, mode jsonl.Compression, id string, n, chunks int) error {
	if chunks < 0 {
		return fmt.Errorf("chunks per step must not be negative, not %d", chunks)
	}
	b, err := jsonl.Open(root, mode)
	if err != nil {
		return err
	}
	st := eventstore.New(b)
	cwd := event.String("/home/dev/bench")
	h := event.Header{ID: id, CreatedAt: 1778573701000, Cwd: &cwd}
	if err := st.Create(context.Background(), h); err != nil {
		return closed(st, err)
	}
	g := &gen{st: st, id: id, time: 1778573701000, limit: int64(n), chunks: chunks}
	if chunks == 0 {
		g.chunks = -1 // none at all, not the default
	}
	return closed(st, g.turns(1))
}

// WriteV4 is Write in format v4, the same turns as v4 stores them: the text a v0 log streams as
// assistant/chunk events is embedded in its assistant/message (data.stream, a text-chunks run), a tool
// result is a tool-role message, and the system prompt is a system/message.
func WriteV4(root string, mode jsonl.Compression, id string, n int) error {
	b, err := jsonl.Open(root, mode)
	if err != nil {
		return err
	}
	st := eventstore.New(b)
	cwd := event.String("/home/dev/bench")
	h := eventstore.V4Header(event.Header{ID: id, CreatedAt: 1778573701000, Cwd: &cwd})
	if err := st.Create(context.Background(), h); err != nil {
		return closed(st, err)
	}
	g := &gen{st: st, id: id, time: 1778573701000, limit: int64(n)}
	return closed(st, g.turnsV4(1))
}

// textStream is an embedded stream of one text block: its start, a text-chunks run of the words, its end.
func (g *gen) textStream(words []string) string {
	texts := make([]string, len(words))
	dt := make([]string, len(words)-1)
	for i, w := range words {
		texts[i] = `"` + w + ` "`
		if i > 0 {
			dt[i-1] = "3"
		}
	}
	full := strings.Join(words, " ") + " "
	t := g.time
	return fmt.Sprintf(`[{"type":"chunk","time":%d,"chunk":{"type":"block-start","index":0,"blockType":"text"}},`+
		`{"type":"text-chunks","time0":%d,"index":0,"dt":[%s],"texts":[%s]},`+
		`{"type":"chunk","time":%d,"chunk":{"type":"block-end","index":0,"block":{"type":"text","text":%q}}}]`,
		t, t+3, strings.Join(dt, ","), strings.Join(texts, ","), t+3*int64(len(words)+1), full)
}

// turnsV4 is turns in format v4.
func (g *gen) turnsV4(first int) error {
	appendOp := event.Member{Key: "surfaceOp", Value: event.String("append")}
	pick := func(t, k, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = words[(t*k+i)%len(words)]
		}
		return out
	}
	for t := first; g.seq < g.limit; t++ {
		g.add("turn/start", fmt.Sprintf(`{"turn":%d}`, t))
		g.add("step/start", fmt.Sprintf(`{"turn":%d,"step":1}`, t))
		if t == 1 {
			g.add("system/message", `{"turn":1,"step":1,"message":{"id":"s-1","role":"system","source":{"kind":"system-prompt"},"content":[{"type":"text","text":"You are a coding agent."}]}}`, appendOp)
		}
		g.add("user/message", fmt.Sprintf(`{"id":"u-%d","role":"user","content":[{"type":"text","text":"Please run step %d of the build and tell me what failed."}],"source":{"kind":"user"}}`, t, t), appendOp)
		if t == 1 {
			g.add("request/header", `{"header":{"config":{"provider":"deepseek-official","model":"deepseek-v4-flash"}},"reason":"initial"}`)
		}
		callID := fmt.Sprintf("call-%d", t)
		g.add("assistant/message", fmt.Sprintf(`{"turn":%d,"step":1,"message":{"id":"a-%d-1","role":"assistant","content":[{"type":"text","text":"Running the build."},{"type":"tool-call","id":"%s","name":"bash","arguments":"{\"command\":\"make test\"}"}],"source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-flash"}},"usage":{"inputTokens":%d,"outputTokens":20},"stream":%s}`, t, t, callID, 1000+t, g.textStream(pick(t, 1, 20))), appendOp)
		callSeq := g.seq
		g.add("tool/call", fmt.Sprintf(`{"turn":%d,"step":1,"callId":"%s","name":"bash","arguments":"{\"command\":\"make test\"}"}`, t, callID))
		g.add("tool/result", fmt.Sprintf(`{"turn":%d,"step":1,"message":{"role":"tool","source":{"kind":"tool","callId":"%s"},"toolCallId":"%s","content":[{"type":"text","text":"ok  \tpkg/a\t0.1%ds\nFAIL\tpkg/b\t0.2s\n--- FAIL: TestB (0.00s)\n    b_test.go:12: want 3, got 4"}],"isError":false,"id":"t-%d"}}`, t, callID, callID, t%10, t),
			event.Member{Key: "sourceEventSeqs", Value: seqs(callSeq, callSeq+1)}, appendOp)
		g.add("step/end", fmt.Sprintf(`{"turn":%d,"step":1}`, t))
		if err := g.flush(); err != nil {
			return err
		}
		g.add("step/start", fmt.Sprintf(`{"turn":%d,"step":2}`, t))
		g.add("assistant/message", fmt.Sprintf(`{"turn":%d,"step":2,"message":{"id":"a-%d-2","role":"assistant","content":[{"type":"text","text":"TestB in pkg/b fails: it wants 3 and gets 4."}],"source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-flash"}},"stream":%s}`, t, t, g.textStream(pick(t, 7, 15))), appendOp)
		g.add("step/end", fmt.Sprintf(`{"turn":%d,"step":2}`, t))
		if err := g.flush(); err != nil {
			return err
		}
		g.add("turn/end", fmt.Sprintf(`{"turn":%d,"reason":{"kind":"completed"}}`, t))
		if err := g.flush(); err != nil {
			return err
		}
	}
	return g.flush()
}

// closed closes the store — releasing the session's write lease, so that another writer in the same
// process (a test appending next) can take it — and returns the first error.
func closed(st *eventstore.Store, err error) error {
	if cerr := st.Close(context.Background()); err == nil {
		err = cerr
	}
	return err
}

// Append adds turns whole turns to an existing session (loading it first, as the harness does when it
// adopts a session from disk), stamped with the current time: benchmarks and tests use it as "another
// process appending to the store".
func Append(root string, mode jsonl.Compression, id string, turns int) error {
	b, err := jsonl.Open(root, mode)
	if err != nil {
		return err
	}
	st := eventstore.New(b)
	ins, err := st.Load(context.Background(), id)
	if err != nil {
		return closed(st, err)
	}
	next := 1
	for _, t := range eventstore.Turns(ins.Events) {
		if int(t.N) >= next {
			next = int(t.N) + 1
		}
	}
	g := &gen{st: st, id: id, seq: int64(len(ins.Events)), time: time.Now().UnixMilli()}
	g.limit = g.seq + 1
	for i := 0; i < turns; i++ {
		if err := g.turns(next + i); err != nil {
			return closed(st, err)
		}
		g.limit = g.seq + 1
	}
	return closed(st, nil)
}

// turns writes whole turns numbered from first until the log holds at least g.limit events.
func (g *gen) turns(first int) error {
	appendOp := event.Member{Key: "surfaceOp", Value: event.String("append")}
	for t := first; g.seq < g.limit; t++ {
		g.add("turn/start", fmt.Sprintf(`{"turn":%d}`, t))
		g.add("step/start", fmt.Sprintf(`{"turn":%d,"step":1}`, t))
		g.add("user/message", fmt.Sprintf(`{"id":"u-%d","role":"user","content":[{"type":"text","text":"Please run step %d of the build and tell me what failed."}],"source":{"kind":"user"}}`, t, t), appendOp)
		if t == 1 {
			g.add("request/header", `{"header":{"config":{"provider":"deepseek-official","model":"deepseek-v4-flash"},"system":"You are a coding agent."},"reason":"initial"}`)
		}
		first := g.seq
		for k := 0; k < g.streamed(1); k++ {
			g.add("assistant/chunk", fmt.Sprintf(`{"turn":%d,"step":1,"chunk":{"type":"text-delta","index":0,"text":"%s "}}`, t, words[(t+k)%len(words)]))
		}
		callID := fmt.Sprintf("call-%d", t)
		g.add("assistant/message", fmt.Sprintf(`{"turn":%d,"step":1,"message":{"id":"a-%d-1","role":"assistant","content":[{"type":"text","text":"Running the build."},{"type":"tool-call","id":"%s","name":"bash","arguments":"{\"command\":\"make test\"}"}],"source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-flash"}},"usage":{"inputTokens":%d,"outputTokens":20}}`, t, t, callID, 1000+t),
			event.Member{Key: "sourceEventSeqs", Value: seqs(first, g.seq)}, appendOp)
		callSeq := g.seq
		g.add("tool/call", fmt.Sprintf(`{"turn":%d,"step":1,"callId":"%s","name":"bash","arguments":"{\"command\":\"make test\"}"}`, t, callID))
		g.add("tool/result", fmt.Sprintf(`{"turn":%d,"step":1,"message":{"id":"t-%d","role":"user","content":[{"type":"tool-result","toolCallId":"%s","content":[{"type":"text","text":"ok  \tpkg/a\t0.1%ds\nFAIL\tpkg/b\t0.2s\n--- FAIL: TestB (0.00s)\n    b_test.go:12: want 3, got 4"}],"isError":false}],"source":{"kind":"tool","callId":"%s"}}}`, t, t, callID, t%10, callID),
			event.Member{Key: "sourceEventSeqs", Value: seqs(callSeq, callSeq+1)}, appendOp)
		g.add("step/end", fmt.Sprintf(`{"turn":%d,"step":1}`, t))
		if err := g.flush(); err != nil {
			return err
		}
		g.add("step/start", fmt.Sprintf(`{"turn":%d,"step":2}`, t))
		first = g.seq
		for k := 0; k < g.streamed(2); k++ {
			g.add("assistant/chunk", fmt.Sprintf(`{"turn":%d,"step":2,"chunk":{"type":"text-delta","index":0,"text":"%s "}}`, t, words[(t*7+k)%len(words)]))
		}
		g.add("assistant/message", fmt.Sprintf(`{"turn":%d,"step":2,"message":{"id":"a-%d-2","role":"assistant","content":[{"type":"text","text":"TestB in pkg/b fails: it wants 3 and gets 4."}],"source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-flash"}}}`, t, t),
			event.Member{Key: "sourceEventSeqs", Value: seqs(first, g.seq)}, appendOp)
		g.add("step/end", fmt.Sprintf(`{"turn":%d,"step":2}`, t))
		if err := g.flush(); err != nil {
			return err
		}
		g.add("turn/end", fmt.Sprintf(`{"turn":%d,"reason":{"kind":"completed"}}`, t))
		if err := g.flush(); err != nil {
			return err
		}
	}
	return g.flush()
}
