package eventstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/storetest"
)

// compactionEvent is a compaction lifecycle event as a transaction builds it.
func compactionEvent(typ string, seq int64, cause error) event.Event {
	data := `{"compactionId":"c1","turn":null}`
	if cause != nil {
		data = `{"compactionId":"c1","turn":null,"error":` + string(event.Stringify(event.String(cause.Error()))) + `}`
	}
	return event.NewEventFrom(typ, seq, time.Now().UnixMilli(), []byte(data))
}

// openTransaction is a live session holding a durable compaction/start of a tracked transaction, as a
// compaction is while its summarizer runs.
func openTransaction(t *testing.T, st *eventstore.Store, id string) (*eventstore.Session, *eventstore.Inflight, chan struct{}) {
	t.Helper()
	ctx := context.Background()
	if err := st.Create(ctx, event.Header{ID: id, CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	w, err := st.Writer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	cancelled := make(chan struct{})
	tr := w.Track(func(next int64, cause error) event.Event {
		return compactionEvent("compaction/end", next, cause)
	}, func() { close(cancelled) })
	if _, err := w.Transact(func(v eventstore.View) ([]event.Event, error) {
		return []event.Event{compactionEvent("compaction/start", v.Next(), nil)}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return w, tr, cancelled
}

// TestCloseEndsATrackedTransaction: closing a session whose compaction is still running returns at once,
// writes the transaction's failed end with the accepted events before the writer lock is given up, and
// cancels the transaction's work; the reopened session is not locked (no resume needed).
func TestCloseEndsATrackedTransaction(t *testing.T) {
	ctx := context.Background()
	for _, how := range []string{"session", "store"} {
		t.Run(how, func(t *testing.T) {
			st := storetest.Raw(t)
			w, tr, cancelled := openTransaction(t, st, "c")
			if err := w.Accept([][]byte{userMessage(0)}); err != nil { // accepted after the start, pending
				t.Fatal(err)
			}
			var err error
			if how == "session" {
				err = w.Close(ctx)
			} else {
				err = st.Close(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-cancelled:
			default:
				t.Fatal("the transaction's work was not cancelled")
			}
			ce := tr.Ended()
			if ce == nil || !errors.Is(ce, eventstore.ErrClosedMidTransaction) || ce.Failure != eventstore.Busy {
				t.Fatalf("Ended() = %v", ce)
			}
			// what the transaction does after it (its commit) is refused and writes nothing
			if _, err := w.Transact(func(v eventstore.View) ([]event.Event, error) {
				return []event.Event{compactionEvent("compaction/end", v.Next(), errors.New("the summarizer failed"))}, nil // a successful end needs a summary
			}); err == nil {
				t.Fatal("a transaction's commit after Close was accepted")
			}
			if err := w.Flush(ctx); err != nil {
				t.Fatalf("a late flush with nothing pending: %v", err)
			}
			ins, err := st.Inspect(ctx, "c")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range ins.Events {
				got = append(got, e.Type)
			}
			if strings.Join(got, " ") != "compaction/start user/message compaction/end" {
				t.Fatalf("log after Close: %v", got)
			}
			if raw, _ := event.Lookup(ins.Events[2].Raw, "data", "error"); !strings.Contains(string(raw), "closed while the transaction") {
				t.Fatalf("end carries %s", raw)
			}
			if eventstore.CompactionLocked(ins.Events) {
				t.Fatal("the closed session still holds the compaction lock")
			}
			w2, err := st.Writer(ctx, "c")
			if err != nil {
				t.Fatalf("reopening needs a resume: %v", err)
			}
			_ = w2.Close(ctx)
		})
	}
}

// TestCloseAfterATransactionEnded writes no second end: a transaction that closed itself (its end
// accepted) before the Close is left as it is.
func TestCloseAfterATransactionEnded(t *testing.T) {
	ctx := context.Background()
	st := storetest.Raw(t)
	w, tr, cancelled := openTransaction(t, st, "c")
	if _, err := w.Transact(func(v eventstore.View) ([]event.Event, error) {
		return []event.Event{compactionEvent("compaction/end", v.Next(), errors.New("the summarizer failed"))}, nil // a successful end needs a summary
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if s := w.Snapshot(); len(s.Events) != 2 || s.Durable != 2 {
		t.Fatalf("%d events, %d durable after Close; want the start and its one end", len(s.Events), s.Durable)
	}
	select {
	case <-cancelled:
	default:
		t.Fatal("Close should still cancel the transaction's remaining work")
	}
	tr.Done()
}

// TestFlushWhenWritableWaitsOutAQuiesce: the flush of a transaction closing during a quiesce writes
// nothing until resume-writes, then makes its events durable.
func TestFlushWhenWritableWaitsOutAQuiesce(t *testing.T) {
	ctx := context.Background()
	st := storetest.Raw(t)
	st.Window = 0 // only explicit flushes write
	w, tr, _ := openTransaction(t, st, "c")
	defer tr.Done()
	if _, err := st.Quiesce(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Transact(func(v eventstore.View) ([]event.Event, error) {
		return []event.Event{compactionEvent("compaction/end", v.Next(), errors.New("the summarizer failed"))}, nil // a successful end needs a summary
	}); err != nil {
		t.Fatal(err)
	}
	art := w.Revision().Artifact
	done := make(chan error, 1)
	go func() { done <- w.FlushWhenWritable(ctx) }()
	// it is waiting, not failing; a bounded context shows the wait ends with the caller's
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := w.FlushWhenWritable(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("FlushWhenWritable under a quiesce with an expiring context: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("FlushWhenWritable returned during the quiesce: %v", err)
	default:
	}
	if w.Revision().Artifact != art || w.Pending() != 1 {
		t.Fatal("something was written during the quiesce")
	}
	st.ResumeWrites("resume-writes")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("FlushWhenWritable did not return after resume-writes")
	}
	if w.Pending() != 0 {
		t.Fatalf("%d events pending after the wait", w.Pending())
	}
}
