package compaction

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore"
)

// blocked is a summarizer that waits until the test releases it (or its context ends), as an LLM
// summarizer does for minutes.
type blocked struct {
	started, release chan struct{}
	ctxErr           chan error // what ended the wait when the context did
}

func newBlocked() *blocked {
	return &blocked{started: make(chan struct{}), release: make(chan struct{}), ctxErr: make(chan error, 1)}
}

func (b *blocked) Summarize(ctx context.Context, in Input) (Summary, error) {
	close(b.started)
	select {
	case <-b.release:
		return Summary{Text: []string{"short"}, Provider: "dshfs", Model: "test"}, nil
	case <-ctx.Done():
		b.ctxErr <- ctx.Err()
		return Summary{}, ctx.Err()
	}
}

type compacted struct {
	out Outcome
	err error
}

// compactInBackground starts a compaction and returns once its summarizer runs.
func compactInBackground(t *testing.T, w *eventstore.Session, sum *blocked) <-chan compacted {
	t.Helper()
	done := make(chan compacted, 1)
	go func() {
		out, err := Compact(context.Background(), w, Request{Summarizer: sum})
		done <- compacted{out, err}
	}()
	select {
	case <-sum.started:
	case r := <-done:
		t.Fatalf("the compaction ended before summarizing: %v", r.err)
	}
	return done
}

// within fails the test unless op returns within a second (it must not wait for the summarizer).
func within(t *testing.T, what string, op func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- op() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(time.Second):
		t.Fatalf("%s waited for the summarizer", what)
	}
}

func result(t *testing.T, done <-chan compacted) compacted {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("the compaction did not end")
		return compacted{}
	}
}

// TestFlushDoesNotWaitForTheSummarizer: with the summarizer still working, compaction/start is durable
// and flush, quiesce and resume-writes return at once; the compaction commits when the summary arrives.
func TestFlushDoesNotWaitForTheSummarizer(t *testing.T) {
	ctx := context.Background()
	st, w, _ := liveFixture(t, cleanID)
	sum := newBlocked()
	done := compactInBackground(t, w, sum)
	if s := w.Snapshot(); s.Durable != len(s.Events) || s.Events[len(s.Events)-1].Type != "compaction/start" {
		t.Fatalf("summarizing with %d of %d events durable", s.Durable, len(s.Events))
	}
	accept(t, w, `{"type":"user/message","data":{"content":[{"type":"text","text":"later"}],"source":{"kind":"user"},"role":"user","id":"u9"},"surfaceOp":"append"}`)
	within(t, "flush", func() error { return w.Flush(ctx) })
	if w.Pending() != 0 {
		t.Fatalf("%d events pending after flush", w.Pending())
	}
	within(t, "quiesce", func() error { _, err := st.Quiesce(ctx, time.Minute); return err })
	st.ResumeWrites("resume-writes")
	close(sum.release)
	r := result(t, done)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if s := w.Snapshot(); s.Durable != len(s.Events) || s.Events[r.out.EndSeq].Type != "compaction/end" {
		t.Fatalf("after the commit: %d of %d durable", s.Durable, len(s.Events))
	}
}

// TestCommitWaitsOutAQuiesce: a summary arriving while the store is quiesced is committed in memory
// but written only after resume-writes, and the compaction then succeeds (not a persistence failure).
func TestCommitWaitsOutAQuiesce(t *testing.T) {
	ctx := context.Background()
	st, w, _ := liveFixture(t, cleanID)
	sum := newBlocked()
	done := compactInBackground(t, w, sum)
	if _, err := st.Quiesce(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	art := w.Revision().Artifact
	close(sum.release)
	waitFor(t, "the commit to be accepted", func() bool {
		s := w.Snapshot()
		return s.Events[len(s.Events)-1].Type == "compaction/end"
	})
	select {
	case r := <-done:
		t.Fatalf("the compaction returned during the quiesce: %v", r.err)
	default:
	}
	if w.Revision().Artifact != art {
		t.Fatal("the compaction wrote during the quiesce")
	}
	st.ResumeWrites("resume-writes")
	if r := result(t, done); r.err != nil {
		t.Fatal(r.err)
	}
	if w.Pending() != 0 {
		t.Fatalf("%d events pending after the commit", w.Pending())
	}
}

// TestCloseDuringSummarization: closing the session while its summarizer works returns at once; the
// transaction is recorded failed (compaction/end with the close's error, durable before the writer lock
// is released), the summarizer is cancelled, and the compaction reports the cancellation without
// writing anything after the close.
func TestCloseDuringSummarization(t *testing.T) {
	ctx := context.Background()
	st, w, _ := liveFixture(t, cleanID)
	before := w.Snapshot()
	sum := newBlocked()
	done := compactInBackground(t, w, sum)
	within(t, "close", func() error { return w.Close(ctx) })
	r := result(t, done)
	var ce *eventstore.CommandError
	if !errors.As(r.err, &ce) || ce.Code != CodeCancelled || !errors.Is(r.err, eventstore.ErrClosedMidTransaction) {
		t.Fatalf("compaction after close: %#v", r.err)
	}
	if err := <-sum.ctxErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("summarizer ended by %v", err)
	}
	failedEnd(t, w, before, r.out.CompactionID, eventstore.ErrClosedMidTransaction.Error())
	ins, err := st.Inspect(ctx, cleanID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ins.Events) != len(w.Snapshot().Events) || eventstore.CompactionLocked(ins.Events) {
		t.Fatalf("stored %d events (locked %v), the engine had %d", len(ins.Events), eventstore.CompactionLocked(ins.Events), len(w.Snapshot().Events))
	}
	if _, err := st.Writer(ctx, cleanID); err != nil {
		t.Fatalf("the closed session needs a resume: %v", err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
