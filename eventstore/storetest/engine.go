package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/eventtest"
)

// The session engine over a backend: acceptance and flush, all-or-nothing batches, the write-behind
// batch, a crashed session that only an explicit resume closes (no implicit repair), and a torn tail.

func testEngineAcceptFlush(t *testing.T, be Backend) {
	st, w := live(t, be, "a")
	in := [][]byte{
		[]byte(`{"type":"turn/start","data":{"turn":1}}`),
		[]byte(`{"type":"user/message","seq":1,"time":5,"data":{"id":"u","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}`),
		[]byte(`{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}`),
	}
	if err := w.Accept(in); err != nil {
		t.Fatal(err)
	}
	snap := w.Snapshot()
	if len(snap.Events) != 3 || snap.Durable != 0 || len(snap.Fold.Nodes) != 1 {
		t.Fatalf("snapshot after accept: %d events, %d durable, surface %v", len(snap.Events), snap.Durable, snap.Fold.Nodes)
	}
	if got := string(snap.Events[1].Raw); !strings.HasPrefix(got, `{"type":"user/message","seq":1,"time":5,"data":`) || !strings.HasSuffix(got, `,"surfaceOp":"append"}`) {
		t.Errorf("encoded event %s", got)
	}
	if p, _ := st.ReadFrom(ctx, "a", 0); len(p.Events) != 0 {
		t.Errorf("accepted events reached the store before a flush")
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p, _ := st.ReadFrom(ctx, "a", 0)
	sameEvents(t, "after flush", p.Events, snap.Events)
	if err := w.Close(ctx); err != nil || st.Live("a") != nil {
		t.Fatalf("close: %v", err)
	}
}

func testEngineAllOrNothing(t *testing.T, be Backend) {
	st, w := live(t, be, "a")
	good := []byte(`{"type":"user/message","data":{"id":"u","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}`)
	bad := []byte(`{"type":"user/message","data":{"id":"v","role":"user","content":[{"type":"text","text":"x"}],"source":{"kind":"user"}},"surfaceOp":{"op":"replace","start":7,"end":7}}`)
	err := w.Accept([][]byte{good, bad})
	mustFail(t, "a replace of a seq not on the surface", err, eventstore.Invalid, eventstore.CodeBadInput)
	if ce := eventstore.AsCommandError(err); ce.Line != 2 {
		t.Errorf("the error names line %d, want 2", ce.Line)
	}
	if s := w.Snapshot(); len(s.Events) != 0 || len(s.Fold.Nodes) != 0 {
		t.Fatalf("a rejected request left %d events, surface %v", len(s.Events), s.Fold.Nodes)
	}
	if err := w.Accept([][]byte{good}); err != nil {
		t.Fatalf("the fold was not restored after the rejection: %v", err)
	}
	st.MaxLine = int64(len(good)) // a line one byte longer is refused, whoever writes it
	err = w.Accept([][]byte{good, append([]byte(" "), good...)})
	mustFail(t, "a line over the store's MaxLine", err, eventstore.Invalid, eventstore.CodeBadInput)
	if ce := eventstore.AsCommandError(err); ce.Line != 2 || !strings.Contains(ce.Message, "max_line_bytes") {
		t.Errorf("over-long line: %v (line %d)", ce, ce.Line)
	}
}

func testWriteBehindBatch(t *testing.T, be Backend) {
	st, _ := open(t, be)
	st.Window = 20 * time.Millisecond
	if err := st.Create(ctx, header("a")); err != nil {
		t.Fatal(err)
	}
	w, err := st.Writer(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AcceptEvents(turns(t, 1)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for w.Pending() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the write-behind batch never ran")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if p, _ := st.ReadFrom(ctx, "a", 0); len(p.Events) != 9 {
		t.Errorf("after the batch window: %d durable events", len(p.Events))
	}
}

// crashed writes a log that ends inside turn 2 with an unanswered tool call.
func crashed(t *testing.T, st *eventstore.Store, id string) []event.Event {
	log := eventtest.Log(t, append(turn(1),
		`turn/start {"turn":2}`,
		`step/start {"turn":2,"step":1}`,
		`assistant/message {"turn":2,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}}} + "surfaceOp":"append"`,
		`tool/call {"turn":2,"step":1,"callId":"c1","name":"bash","arguments":"{}"}`)...)
	if _, err := st.Backend().Materialize(ctx, header(id), log); err != nil {
		t.Fatal(err)
	}
	return log
}

func testNoImplicitRepair(t *testing.T, be Backend) {
	st, _ := open(t, be)
	log := crashed(t, st, "a")
	err := st.Append(ctx, "a", eventtest.Events(t, fmt.Sprintf(`{"type":"plugin/x","seq":%d,"time":1,"data":{},"ignorable":true}`, len(log))))
	mustFail(t, "append to a crashed session", err, eventstore.Busy, eventstore.CodeOpenTurn)
	if p, _ := st.ReadFrom(ctx, "a", 0); len(p.Events) != len(log) {
		t.Fatalf("the refused append changed the log")
	}
	w, err := st.Resume(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	snap := w.Snapshot()
	var types []string
	for _, e := range snap.Events[len(log):] {
		types = append(types, e.Type)
	}
	if strings.Join(types, " ") != "tool/result step/end turn/end session/end-seed" {
		t.Errorf("resume appended %v", types)
	}
	if snap.Durable != len(snap.Events) {
		t.Errorf("resume left %d events pending", len(snap.Events)-snap.Durable)
	}
	// resuming again appends nothing: the log already ends with its end-seed
	if _, err := st.Resume(ctx, "a"); err != nil || len(w.Snapshot().Events) != len(snap.Events) {
		t.Errorf("a second resume: %v", err)
	}
}

func testTornTail(t *testing.T, be Backend) {
	st, _ := open(t, be)
	log := turns(t, 1)
	if _, err := st.Backend().Materialize(ctx, header("a"), log); err != nil {
		t.Fatal(err)
	}
	be.Tear(t, st.Backend(), "a")
	p, err := st.ReadFrom(ctx, "a", 0)
	if err != nil || p.Torn == nil {
		t.Fatalf("a torn log: %v torn %+v", err, p)
	}
	sameEvents(t, "the committed prefix", p.Events, log)
	mustFail(t, "a writer over torn bytes", func() error { _, err := st.Writer(ctx, "a"); return err }(), eventstore.Busy, eventstore.CodeTornTail)
	if _, err := st.Resume(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	p, err = st.ReadFrom(ctx, "a", 0)
	if err != nil || p.Torn != nil || len(p.Events) != len(log)+1 || p.Events[len(log)].Type != "session/end-seed" {
		t.Fatalf("after resume: %v torn %+v, %d events", err, p.Torn, len(p.Events))
	}
}
