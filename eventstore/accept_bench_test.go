package eventstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
)

// benchLines is n events of realistic turns (streamed chunks, messages, tool calls) in the append syntax.
func benchLines(n int) [][]byte {
	var out [][]byte
	add := func(format string, a ...any) { out = append(out, []byte(fmt.Sprintf(format, a...))) }
	for t := 1; len(out) < n; t++ {
		add(`{"type":"turn/start","data":{"turn":%d}}`, t)
		add(`{"type":"step/start","data":{"turn":%d,"step":1}}`, t)
		add(`{"type":"user/message","data":{"id":"u-%d","role":"user","content":[{"type":"text","text":"Please run step %d of the build and tell me what failed."}],"source":{"kind":"user"}},"surfaceOp":"append"}`, t, t)
		for k := 0; k < 20; k++ {
			add(`{"type":"assistant/chunk","data":{"turn":%d,"step":1,"chunk":{"type":"text-delta","index":0,"text":"word%d "}}}`, t, k)
		}
		add(`{"type":"assistant/message","data":{"turn":%d,"step":1,"message":{"id":"a-%d","role":"assistant","content":[{"type":"text","text":"Running the build."},{"type":"tool-call","id":"c-%d","name":"bash","arguments":"{\"command\":\"make test\"}"}],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}`, t, t, t)
		add(`{"type":"tool/call","data":{"turn":%d,"step":1,"callId":"c-%d","name":"bash","arguments":"{\"command\":\"make test\"}"}}`, t, t)
		add(`{"type":"tool/result","data":{"turn":%d,"step":1,"message":{"id":"t-%d","role":"user","content":[{"type":"tool-result","toolCallId":"c-%d","content":[{"type":"text","text":"FAIL pkg/b"}],"isError":false}],"source":{"kind":"tool","callId":"c-%d"}}},"surfaceOp":"append"}`, t, t, t, t)
		add(`{"type":"step/end","data":{"turn":%d,"step":1}}`, t)
		add(`{"type":"turn/end","data":{"turn":%d,"reason":{"kind":"completed"}}}`, t)
	}
	return out
}

// BenchmarkAcceptFlush measures the live writer's own cost per event: 1,000-line requests accepted and
// flushed (one zstd frame each, fsynced), as bench/append.sh drives it through the mount.
func BenchmarkAcceptFlush(b *testing.B) {
	lines := benchLines(20000)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		be, err := jsonl.Open(b.TempDir(), jsonl.Zstd)
		if err != nil {
			b.Fatal(err)
		}
		st := eventstore.New(be)
		cwd := event.String("/srv/bench")
		if err := st.Create(ctx, event.Header{ID: "s", CreatedAt: 1, Cwd: &cwd}); err != nil {
			b.Fatal(err)
		}
		w, err := st.Writer(ctx, "s")
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for j := 0; j < len(lines); j += 1000 {
			if err := w.Accept(lines[j:min(j+1000, len(lines))]); err != nil {
				b.Fatal(err)
			}
			if err := w.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		st.Close(ctx)
	}
	b.ReportMetric(float64(b.N*len(lines))/b.Elapsed().Seconds(), "events/s")
}
