package postgres

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/eventtest"
	"github.com/dshfs/dshfs/internal/pgtest"
)

func contractHeader(id string) event.Header {
	cwd := event.String("/srv/fleet")
	return event.Header{ID: id, CreatedAt: 1700000000000, Cwd: &cwd}
}

// turnSpecs is one complete turn n in the eventtest.Log spec syntax.
func turnSpecs(n int) []string {
	return []string{
		fmt.Sprintf(`turn/start {"turn":%d}`, n),
		fmt.Sprintf(`user/message {"id":"u%d","role":"user","content":[{"type":"text","text":"q%d"}],"source":{"kind":"user"}} + "surfaceOp":"append"`, n, n),
		fmt.Sprintf(`turn/end {"turn":%d,"reason":{"kind":"completed"}}`, n),
	}
}

func TestLockBusyNamesHolder(t *testing.T) {
	_, _, dsn := newDB(t)
	a := open(t, dsn, Options{Host: "build-7"})
	b := open(t, dsn, Options{Host: "laptop"})
	ctx := context.Background()
	if _, err := a.Materialize(ctx, contractHeader("s"), nil); err != nil {
		t.Fatal(err)
	}
	l, err := a.Lock(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Lock(ctx, "s")
	var ce *eventstore.CommandError
	if !errors.As(err, &ce) || ce.Failure != eventstore.Busy || ce.Code != eventstore.CodeLocked ||
		!regexp.MustCompile(`being written by dshfs on host build-7 \(pid \d+, since `).MatchString(err.Error()) {
		t.Fatalf("second lock: %v", err)
	}
	if who, err := b.Holder(ctx, "s"); err != nil || !strings.HasPrefix(who, "dshfs on host build-7 (pid ") {
		t.Fatalf("holder: %q %v", who, err)
	}
	// the same Backend, another Store: refused as well
	if _, err := a.Lock(ctx, "s"); !errors.As(err, &ce) || ce.Code != eventstore.CodeLocked {
		t.Fatalf("second lock through the same backend: %v", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := b.Lock(ctx, "s")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	l2.Release()
	if who, err := b.Holder(ctx, "s"); err != nil || who != "" {
		t.Fatalf("holder after release: %q %v", who, err)
	}
	if n := query[int64](t, dsn, `SELECT count(*) FROM writers`); n != 0 {
		t.Fatalf("%d writer records left after release", n)
	}
}

// writerPid is the server process of the connection holding session id's writer lock.
func writerPid(t *testing.T, dsn, id string) int32 {
	return query[int32](t, dsn, `SELECT backend_pid FROM writers WHERE session_id = $1`, id)
}

// dropWriterConnection ends the server connection holding session id's writer lock.
func dropWriterConnection(t *testing.T, s *pgtest.Server, db, dsn, id string) {
	t.Helper()
	if err := s.Exec(db, `SELECT pg_terminate_backend($1, 10000)`, writerPid(t, dsn, id)); err != nil {
		t.Fatal(err)
	}
}

// droppedWithPending creates session "s" through b, accepts the first 3 events of a two-turn log without
// flushing them, and then ends the connection holding the session's lock; the log is returned whole.
func droppedWithPending(t *testing.T, b *Backend, s *pgtest.Server, db, dsn string) (*eventstore.Store, *eventstore.Session, []event.Event) {
	t.Helper()
	st := eventstore.New(b)
	ctx := context.Background()
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
	dropWriterConnection(t, s, db, dsn, "s")
	return st, w, log
}

func TestDroppedConnectionRetakesLock(t *testing.T) {
	s, db, dsn := newDB(t)
	b := open(t, dsn, Options{Host: "h1"})
	st, w, _ := droppedWithPending(t, b, s, db, dsn)
	ctx := context.Background()
	if err := w.Flush(ctx); err != nil {
		t.Fatalf("flush after the lock's connection was dropped: %v", err)
	}
	reader := open(t, dsn, Options{Host: "h2", ReadOnly: true})
	p, err := reader.LoadStored(ctx, "s")
	if err != nil || len(p.Events) != 3 {
		t.Fatalf("after the retried flush: %v, %d events", err, len(p.Events))
	}
	// the lock was taken again: another writer is still refused
	other := open(t, dsn, Options{Host: "h2"})
	if _, err := other.Lock(ctx, "s"); err == nil || !strings.Contains(err.Error(), "host h1") {
		t.Fatalf("a second writer after the re-take: %v", err)
	}
	if err := st.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestDroppedConnectionLockTakenElsewhereKeepsBatch(t *testing.T) {
	s, db, dsn := newDB(t)
	b := open(t, dsn, Options{Host: "h1", PendingDir: t.TempDir()})
	st, w, log := droppedWithPending(t, b, s, db, dsn)
	ctx := context.Background()
	other := open(t, dsn, Options{Host: "h2"})
	l, err := other.Lock(ctx, "s")
	if err != nil {
		t.Fatalf("the lost lock could not be taken: %v", err)
	}
	err = w.Flush(ctx)
	var ce *eventstore.CommandError
	if !errors.As(err, &ce) || ce.Failure != eventstore.Busy || !strings.Contains(err.Error(), "host h2") {
		t.Fatalf("flush while another host holds the lost lock: %v", err)
	}
	if w.Pending() != 3 {
		t.Fatalf("%d events pending after the refused flush, want 3", w.Pending())
	}
	// once the other writer lets go, the kept batch is written by the next flush
	l.Release()
	if err := w.Flush(ctx); err != nil {
		t.Fatalf("flush after the other writer released: %v", err)
	}
	p, err := other.LoadStored(ctx, "s")
	if err != nil || len(p.Events) != 3 {
		t.Fatalf("%v, %d events", err, len(p.Events))
	}
	// and when it cannot be written at all, closing keeps it and says where
	if err := w.AcceptEvents(log[3:]); err != nil {
		t.Fatal(err)
	}
	dropWriterConnection(t, s, db, dsn, "s")
	if l, err = other.Lock(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	err = st.Close(ctx)
	if err == nil || !strings.Contains(err.Error(), "3 accepted events (seq 3..5) were not written and are kept in the fleet store") {
		t.Fatalf("close with an unwritable batch: %v", err)
	}
	body := query[[]byte](t, dsn, `SELECT body FROM kept WHERE session_id = 's' AND kind = 'pending'`)
	want := string(contractHeader("s").Line()) + "\n"
	for _, e := range log[3:] {
		want += string(e.Raw) + "\n"
	}
	if string(body) != want {
		t.Fatalf("kept:\n%s\nwant:\n%s", body, want)
	}
}

func TestReadOnlyRole(t *testing.T) {
	s, db, dsn := newDB(t)
	ctx := context.Background()
	w := open(t, dsn, Options{Host: "h1"})
	st := eventstore.New(w)
	if err := st.Create(ctx, contractHeader("s")); err != nil {
		t.Fatal(err)
	}
	if err := st.Append(ctx, "s", eventtest.Log(t, turnSpecs(1)...)); err != nil {
		t.Fatal(err)
	}
	st.Close(ctx)
	viewer := "viewer_" + db // roles are the server's, not the database's
	s.CreateRole(t, db, viewer, "v-pass-91", true)
	rdsn := s.TCPDSN(db, viewer, "v-pass-91")
	r := open(t, rdsn, Options{Host: "h2", ReadOnly: true})
	l, err := r.List(ctx)
	if err != nil || len(l.Entries) != 1 || l.Entries[0].Host != "h1" || l.Entries[0].Refusal != nil {
		t.Fatalf("list as a read-only role: %+v %v", l, err)
	}
	p, err := r.LoadStored(ctx, "s")
	if err != nil || len(p.Events) != 3 {
		t.Fatalf("load as a read-only role: %v", err)
	}
	raw, err := r.ReadRaw(ctx, "s")
	if err != nil || !strings.HasPrefix(string(raw), string(contractHeader("s").Line())+"\n") {
		t.Fatalf("raw: %q %v", raw, err)
	}
	for name, write := range map[string]func() error{
		"lock":        func() error { _, err := r.Lock(ctx, "s"); return err },
		"materialize": func() error { _, err := r.Materialize(ctx, contractHeader("t"), nil); return err },
		"append": func() error {
			_, err := r.AppendBatch(ctx, contractHeader("s"), p.Artifact, eventtest.Log(t, turnSpecs(1)...)[:1], nil)
			return err
		},
		"ingest":  func() error { return r.Ingest(ctx, "h2", "t", header("t"), 0, nil) },
		"release": func() error { return r.Release(ctx, "", "s") },
	} {
		err := write()
		var ce *eventstore.CommandError
		if !errors.As(err, &ce) || ce.Failure != eventstore.Refused || !strings.Contains(err.Error(), "opened read-only; nothing was written") {
			t.Errorf("%s through a read-only backend: %v", name, err)
		}
	}
	// a read-write Open as that role finds the schema, but the server refuses its writes, clearly
	rw := open(t, rdsn, Options{Host: "h3"})
	_, err = rw.Materialize(ctx, contractHeader("t"), nil)
	if err == nil || !strings.Contains(err.Error(), "permission denied") || strings.Contains(err.Error(), "v-pass-91") {
		t.Fatalf("a write as a read-only role: %v", err)
	}
	if _, err := rw.Lock(ctx, "s"); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("a lock as a read-only role: %v", err)
	}
	if n := query[int64](t, dsn, `SELECT count(*) FROM sessions`); n != 1 {
		t.Fatalf("%d sessions after the refused writes", n)
	}
}
