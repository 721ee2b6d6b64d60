package postgres

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/internal/eventtest"
	"github.com/dshfs/dshfs/internal/pgtest"
	"github.com/dshfs/dshfs/views"
)

// TestFrozenServerAnswersWithinTimeout stops a server with SIGSTOP — its sockets stay open and nothing
// arrives, as behind a network partition — and proves every kind of operation fails as an I/O error within
// the timeout instead of waiting, that a flush keeps its events pending, and that all resumes after SIGCONT.
func TestFrozenServerAnswersWithinTimeout(t *testing.T) {
	s, err := pgtest.Start() // its own server: freezing the shared one would stall the other tests
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Thaw(); s.Stop() })
	db := s.NewDatabase(t)
	dsn := s.DSN(db)
	const limit = time.Second
	b := open(t, dsn, Options{Host: "h1", Timeout: limit, PendingDir: t.TempDir()})
	ctx := context.Background()
	st := eventstore.New(b)
	if err := st.Create(ctx, contractHeader("s")); err != nil {
		t.Fatal(err)
	}
	w, err := st.Writer(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	log := eventtest.Log(t, append(turnSpecs(1), turnSpecs(2)...)...)
	if err := w.AcceptEvents(log[:3]); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.AcceptEvents(log[3:]); err != nil {
		t.Fatal(err)
	}
	// the pool's connections are idle and open when the server stops, as on a mount that has been read
	if _, err := b.List(ctx); err != nil {
		t.Fatal(err)
	}

	s.Freeze()
	// each operation on its own: none may take much longer than the timeout (the margin is for a loaded
	// machine; an operation without a deadline would never return)
	within := func(name string, op func() error) {
		t.Helper()
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- op() }()
		select {
		case err := <-done:
			took := time.Since(start)
			var ioe *eventstore.IOError
			var te *TimeoutError
			if !errors.As(err, &ioe) || !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s on a frozen server: %v (%T), want an I/O error naming the timeout", name, err, err)
			}
			if took > 3*limit {
				t.Errorf("%s on a frozen server took %v, timeout %v", name, took, limit)
			}
		case <-time.After(30 * limit):
			t.Fatalf("%s on a frozen server did not return within %v", name, 30*limit)
		}
	}
	within("list", func() error { _, err := b.List(ctx); return err })
	within("stat", func() error { _, err := b.Stat(ctx, "s", ""); return err })
	within("load", func() error { _, err := b.LoadStored(ctx, "s"); return err })
	within("raw read", func() error { return b.WriteRaw(ctx, "s", io.Discard) })
	// a view of the session: an error, never a session refused for the revision (which caches would keep)
	within("views load", func() error {
		s, err := views.Load(ctx, st, "s", views.Options{})
		if err == nil {
			t.Errorf("views of a session on a frozen server: refused as %v, want an error", s.Refusal)
		}
		return err
	})
	within("flush", func() error { return w.Flush(ctx) })
	if w.Pending() != len(log)-3 {
		t.Fatalf("%d events pending after the failed flush, want %d", w.Pending(), len(log)-3)
	}
	// a lookup that failed is that failure, never "exists" (nor "not found")
	within("create", func() error {
		err := st.Create(ctx, contractHeader("t"))
		if ce := eventstore.AsCommandError(err); ce == nil || ce.Failure.ErrnoName() != "EIO" {
			t.Errorf("create on a frozen server: %v, want EIO", err)
		}
		return err
	})
	within("held", func() error { _, err := b.HeldAll(ctx); return err })

	s.Thaw()
	// the pending events are written by the next flush, and the reads answer again
	if err := w.Flush(ctx); err != nil {
		t.Fatalf("flush after the server resumed: %v", err)
	}
	var raw bytes.Buffer
	if err := b.WriteRaw(ctx, "s", &raw); err != nil {
		t.Fatalf("read after the server resumed: %v", err)
	}
	reader := open(t, dsn, Options{Host: "h2", ReadOnly: true})
	p, err := reader.LoadStored(ctx, "s")
	if err != nil || len(p.Events) != len(log) {
		t.Fatalf("after the server resumed: %v, %d events, want %d", err, len(p.Events), len(log))
	}
	if err := st.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// slowWriter takes its time over each write, as a reader far slower than the server does.
type slowWriter struct {
	delay time.Duration
	n     int
}

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(w.delay) // the slowness itself is what is tested: nothing to wait on
	w.n++
	return len(p), nil
}

// TestTimeoutBoundsWaitsNotWork: the timeout bounds each wait for the server, not the operation: a read
// whose own consumer takes longer than the timeout over its rows, on a server that answers, succeeds.
func TestTimeoutBoundsWaitsNotWork(t *testing.T) {
	_, _, dsn := newDB(t)
	const limit = 300 * time.Millisecond
	b := open(t, dsn, Options{Host: "h1", Timeout: limit})
	ctx := context.Background()
	st := eventstore.New(b)
	if err := st.Create(ctx, contractHeader("s")); err != nil {
		t.Fatal(err)
	}
	if err := st.Append(ctx, "s", eventtest.Log(t, turnSpecs(1)...)); err != nil {
		t.Fatal(err)
	}
	w := &slowWriter{delay: limit}
	if err := b.WriteRaw(ctx, "s", w); err != nil {
		t.Fatalf("a read slower than the timeout on its own side: %v", err)
	}
	if w.n < 3 {
		t.Fatalf("%d writes: the read took no longer than the timeout, proving nothing", w.n)
	}
}
