package eventstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/storetest"
)

func userMessage(n int) []byte {
	return []byte(`{"type":"user/message","data":{"content":[{"type":"text","text":"m"}],"source":{"kind":"user"},"role":"user","id":"u` + string(rune('a'+n%26)) + `"},"surfaceOp":"append"}`)
}

// waitUntil polls cond (the engine's timers run on their own goroutines).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func isQuiesced(err error) bool {
	var ce *eventstore.CommandError
	return errors.As(err, &ce) && ce.Failure == eventstore.Busy && ce.Code == eventstore.CodeQuiesced
}

func TestQuiesce(t *testing.T) {
	ctx := context.Background()
	st := storetest.Raw(t)
	st.Window = time.Millisecond
	if err := st.Create(ctx, event.Header{ID: "q", CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	w, err := st.Writer(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Accept([][]byte{userMessage(0), userMessage(1)}); err != nil {
		t.Fatal(err)
	}
	until, err := st.Quiesce(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if w.Pending() != 0 {
		t.Fatalf("quiesce left %d events pending", w.Pending())
	}
	if got, ok := st.Quiesced(); !ok || !got.Equal(until) {
		t.Fatalf("Quiesced() = %v %v", got, ok)
	}
	rev := w.Revision().Artifact
	// appends are accepted and held; flushes, creates and resumes are refused
	if err := w.Accept([][]byte{userMessage(2)}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); !isQuiesced(err) {
		t.Fatalf("flush while quiesced: %v", err)
	}
	if err := st.Create(ctx, event.Header{ID: "other", CreatedAt: 1}); !isQuiesced(err) {
		t.Fatalf("create while quiesced: %v", err)
	}
	if _, err := st.Resume(ctx, "q"); !isQuiesced(err) {
		t.Fatalf("resume while quiesced: %v", err)
	}
	if _, err := st.Fork(ctx, "q", nil, "child"); err == nil {
		t.Fatal("fork while quiesced succeeded")
	}
	if w.Pending() != 1 || w.Revision().Artifact != rev {
		t.Fatalf("the held batch was written: pending %d", w.Pending())
	}
	if !st.ResumeWrites("resume-writes") {
		t.Fatal("ResumeWrites: not quiesced")
	}
	waitUntil(t, "the held batch to be written", func() bool { return w.Pending() == 0 })
	if q := st.LastQuiesce(); q == nil || q.Reason != "resume-writes" || !q.Until.Equal(until) {
		t.Fatalf("LastQuiesce %+v", q)
	}
	// a quiesce that times out ends by itself and lets its batch through
	if _, err := st.Quiesce(ctx, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := w.Accept([][]byte{userMessage(3)}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the quiesce to time out", func() bool { _, ok := st.Quiesced(); return !ok })
	waitUntil(t, "the held batch to be written", func() bool { return w.Pending() == 0 })
	if q := st.LastQuiesce(); q == nil || q.Reason != "timeout" {
		t.Fatalf("LastQuiesce %+v", q)
	}
	if st.ResumeWrites("resume-writes") {
		t.Fatal("ResumeWrites of a store that is not quiesced reported one")
	}
	if _, err := st.Quiesce(ctx, 0); err == nil {
		t.Fatal("a zero quiesce was accepted")
	}
	// closing ends a quiesce and writes what it held
	if _, err := st.Quiesce(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := w.Accept([][]byte{userMessage(4)}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if q := st.LastQuiesce(); q == nil || q.Reason != "unmount" {
		t.Fatalf("LastQuiesce after Close %+v", q)
	}
	ins, err := st.Inspect(ctx, "q")
	if err != nil || len(ins.Events) != 5 {
		t.Fatalf("after close: %v, %d events", err, len(ins.Events))
	}
}
