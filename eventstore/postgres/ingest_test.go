package postgres

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/eventtest"
)

func header(id string) []byte {
	cwd := event.String("/work/p")
	return event.Header{ID: id, CreatedAt: 1700000000000, Cwd: &cwd}.Line()
}

// lines are n stored event lines from seq from on.
func lines(from, n int64) [][]byte {
	out := make([][]byte, n)
	for i := range n {
		out[i] = fmt.Appendf(nil, `{"type":"user/message","seq":%d,"time":%d,"data":{"text":"line %d"}}`, from+i, 1700000000000+from+i, from+i)
	}
	return out
}

func TestIngestAndHeld(t *testing.T) {
	_, _, dsn := newDB(t)
	b := open(t, dsn, Options{})
	ctx := context.Background()
	big := []byte(`{"type":"user/message","seq":3,"time":5,"data":{"text":"` + strings.Repeat("ab", 5000) + `"}}`)
	if err := b.Ingest(ctx, "ci-1", "s1", header("s1"), 0, lines(0, 3)); err != nil {
		t.Fatal(err)
	}
	if err := b.Ingest(ctx, "ci-1", "s1", header("s1"), 3, [][]byte{big}); err != nil {
		t.Fatal(err)
	}
	h, err := b.Held(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if !h.Exists || h.Host != "ci-1" || h.NextSeq != 4 || h.SyncHost != "ci-1" || string(h.Header) != string(header("s1")) || time.Since(h.SyncSeen) > time.Minute || h.Revision != 2 {
		t.Fatalf("held %+v", h)
	}
	if c := query[bool](t, dsn, `SELECT compressed FROM events WHERE session_id = 's1' AND seq = 3`); !c {
		t.Fatal("a 10 kB line was not compressed")
	}
	want := int64(len(header("s1")) + 1 + len(big) + 1)
	for _, l := range lines(0, 3) {
		want += int64(len(l) + 1)
	}
	if n := query[int64](t, dsn, `SELECT bytes FROM sessions WHERE id = 's1'`); n != want {
		t.Fatalf("bytes %d, want %d", n, want)
	}
	if h, err := b.Held(ctx, "nope"); err != nil || h.Exists {
		t.Fatalf("held of an absent session: %+v %v", h, err)
	}
	if err := b.Ingest(ctx, "ci-2", "s2", header("s2"), 0, lines(0, 2)); err != nil {
		t.Fatal(err)
	}
	all, err := b.HeldAll(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("HeldAll: %v, %d sessions", err, len(all))
	}
	for _, id := range []string{"s1", "s2"} {
		one, _ := b.Held(ctx, id)
		if got := all[id]; got.Host != one.Host || got.NextSeq != one.NextSeq || string(got.Header) != string(one.Header) ||
			got.SyncHost != one.SyncHost || !got.SyncSeen.Equal(one.SyncSeen) || got.Revision != one.Revision || !got.Exists {
			t.Fatalf("HeldAll[%s] = %+v, Held = %+v", id, got, one)
		}
	}
}

func TestIngestRefusalsWriteNothing(t *testing.T) {
	_, _, dsn := newDB(t)
	b := open(t, dsn, Options{})
	ctx := context.Background()
	if err := b.Ingest(ctx, "ci-1", "s1", header("s1"), 0, lines(0, 2)); err != nil {
		t.Fatal(err)
	}
	dup := append(lines(2, 2), lines(3, 1)...) // seqs 2, 3, 3
	other := header("s1")
	other = append(other[:len(other)-1], `,"x":1}`...)
	var gap *GapError
	var conflict *HostConflictError
	var bad *LineError
	for _, c := range []struct {
		name   string
		host   string
		header []byte
		from   int64
		lines  [][]byte
		ok     func(error) bool
	}{
		{"gap", "ci-1", header("s1"), 3, lines(3, 1), func(err error) bool { return errors.As(err, &gap) && gap.NextSeq == 2 && gap.From == 3 }},
		{"overlap", "ci-1", header("s1"), 1, lines(1, 2), func(err error) bool { return errors.As(err, &gap) }},
		{"other host", "laptop", header("s1"), 2, lines(2, 1), func(err error) bool {
			return errors.As(err, &conflict) && conflict.Have == "ci-1" && strings.Contains(err.Error(), `from host "ci-1"`)
		}},
		{"other header", "ci-1", other, 2, lines(2, 1), func(err error) bool { return errors.As(err, &conflict) && conflict.HeaderDiffers }},
		{"duplicate seq in batch", "ci-1", header("s1"), 2, dup, func(err error) bool { return errors.As(err, &bad) && bad.Index == 2 }},
		{"not json", "ci-1", header("s1"), 2, [][]byte{lines(2, 1)[0], []byte(`{"type":`)}, func(err error) bool { return errors.As(err, &bad) }},
		{"header of another id", "ci-1", header("s2"), 2, lines(2, 1), func(err error) bool { return err != nil && strings.Contains(err.Error(), `names session "s2"`) }},
		{"new session not from 0", "ci-1", nil, 5, lines(5, 1), func(err error) bool { return errors.As(err, &gap) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, hdr := "s1", c.header
			if hdr == nil {
				id, hdr = "s9", header("s9")
			}
			before := query[string](t, dsn, `SELECT string_agg(session_id || ':' || seq, ',' ORDER BY session_id, seq) || (SELECT string_agg(id || revision || next_seq, ',') FROM sessions) FROM events`)
			err := b.Ingest(ctx, c.host, id, hdr, c.from, c.lines)
			if !c.ok(err) {
				t.Fatalf("got %T %v", err, err)
			}
			after := query[string](t, dsn, `SELECT string_agg(session_id || ':' || seq, ',' ORDER BY session_id, seq) || (SELECT string_agg(id || revision || next_seq, ',') FROM sessions) FROM events`)
			if before != after {
				t.Fatalf("a refused ingest changed the store: %s → %s", before, after)
			}
		})
	}
}

func TestIngestRefusedWhileWriterHoldsLock(t *testing.T) {
	_, _, dsn := newDB(t)
	a := open(t, dsn, Options{Host: "fleet-a"})
	b := open(t, dsn, Options{Host: "ci-1"})
	ctx := context.Background()
	if err := b.Ingest(ctx, "ci-1", "s1", header("s1"), 0, lines(0, 1)); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, "ci-1", "s1"); err != nil {
		t.Fatal(err)
	}
	l, err := a.Lock(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	err = b.Ingest(ctx, "ci-1", "s1", header("s1"), 1, lines(1, 1))
	var ce *eventstore.CommandError
	if !errors.As(err, &ce) || ce.Failure != eventstore.Busy || !strings.Contains(err.Error(), "fleet-a") {
		t.Fatalf("ingest under a writer's lock: %v", err)
	}
	l.Release()
	// released, the session is the fleet writers' now: the sync does not take it back
	var rel *ReleasedError
	if err := b.Ingest(ctx, "ci-1", "s1", header("s1"), 1, lines(1, 1)); !errors.As(err, &rel) {
		t.Fatalf("ingest of a released session: %v", err)
	}
}

func TestReleaseHandsOver(t *testing.T) {
	_, _, dsn := newDB(t)
	sync := open(t, dsn, Options{Host: "ci-1"})
	fleet := open(t, dsn, Options{Host: "operator"})
	ctx := context.Background()
	if err := sync.Ingest(ctx, "ci-1", "s1", header("s1"), 0, lines(0, 1)); err != nil {
		t.Fatal(err)
	}
	_, err := fleet.Lock(ctx, "s1")
	var ce *eventstore.CommandError
	if !errors.As(err, &ce) || ce.Failure != eventstore.Busy || !strings.Contains(err.Error(), "synced into the fleet store by host ci-1") {
		t.Fatalf("lock of a synced session: %v", err)
	}
	if err := fleet.Release(ctx, "laptop", "s1"); err == nil || !strings.Contains(err.Error(), `synced by host "ci-1"`) {
		t.Fatalf("release by another host: %v", err)
	}
	if err := fleet.Release(ctx, "ci-1", "s1"); err != nil {
		t.Fatal(err)
	}
	if h, _ := fleet.Held(ctx, "s1"); h.SyncHost != "" || h.Revision != 2 {
		t.Fatalf("after release: %+v", h)
	}
	l, err := fleet.Lock(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	var nf *eventstore.NotFoundError
	if err := fleet.Release(ctx, "", "absent"); !errors.As(err, &nf) {
		t.Fatalf("release of an absent session: %v", err)
	}
}

func TestReleaseAfterIdle(t *testing.T) {
	s, db, dsn := newDB(t)
	sync := open(t, dsn, Options{Host: "ci-1"})
	fleet := open(t, dsn, Options{Host: "operator", ReleaseAfter: time.Hour})
	ctx := context.Background()
	if err := sync.Ingest(ctx, "ci-1", "s1", header("s1"), 0, lines(0, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := fleet.Lock(ctx, "s1"); err == nil {
		t.Fatal("a session synced a moment ago was writable")
	}
	if err := s.Exec(db, `UPDATE sessions SET sync_seen = now() - interval '61 minutes'`); err != nil {
		t.Fatal(err)
	}
	l, err := fleet.Lock(ctx, "s1")
	if err != nil {
		t.Fatalf("a session idle past release_after: %v", err)
	}
	l.Release()
}

// TestIngestFailsWhole: a batch the database refuses midway — a row of it already stored, which the primary
// key forbids twice — leaves nothing of the batch behind.
func TestIngestFailsWhole(t *testing.T) {
	s, db, dsn := newDB(t)
	b := open(t, dsn, Options{})
	ctx := context.Background()
	if err := b.Ingest(ctx, "ci-1", "s1", header("s1"), 0, lines(0, 2)); err != nil {
		t.Fatal(err)
	}
	// a stray row at seq 3, past next_seq: the batch 2..4 collides with it on its second line
	if err := s.Exec(db, `INSERT INTO events (session_id, seq, last_seq, type, time, line, compressed) VALUES ('s1', 3, 3, 'x', 0, 'x', false)`); err != nil {
		t.Fatal(err)
	}
	err := b.Ingest(ctx, "ci-1", "s1", header("s1"), 2, lines(2, 3))
	if err == nil || !strings.Contains(err.Error(), "duplicate key") {
		t.Fatalf("ingest over a stored seq: %v", err)
	}
	if n := query[int64](t, dsn, `SELECT count(*) FROM events WHERE session_id = 's1' AND seq IN (2, 4)`); n != 0 {
		t.Fatalf("%d rows of the refused batch were written", n)
	}
	if h, _ := b.Held(ctx, "s1"); h.NextSeq != 2 || h.Revision != 1 {
		t.Fatalf("the refused batch moved the session: %+v", h)
	}
}

// TestKeepPendingWithoutDatabase: events that cannot be written while the server is down are kept in a
// local file, and the answer says where.
func TestKeepPendingWithoutDatabase(t *testing.T) {
	s, _, dsn := newDB(t)
	dir := t.TempDir()
	b := open(t, dsn, Options{PendingDir: dir})
	evs := eventtest.Log(t, turnSpecs(1)...)
	s.Pause()
	where, err := b.KeepPending(context.Background(), contractHeader("s/1"), evs)
	if rerr := s.Resume(); rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil || !strings.HasPrefix(where, dir+"/pending-s%2F1-") {
		t.Fatalf("kept in %q: %v", where, err)
	}
	body, err := os.ReadFile(where)
	if err != nil {
		t.Fatal(err)
	}
	want := string(contractHeader("s/1").Line()) + "\n"
	for _, e := range evs {
		want += string(e.Raw) + "\n"
	}
	if string(body) != want {
		t.Fatalf("kept %q", body)
	}
}

// TestSyncNeverTakesBack: a session released, or written through the fleet store once its sync went idle,
// is no longer its host's sync's — a later Ingest is refused (nothing written), never merged — and Touch
// keeps only the sessions a sync still feeds held.
func TestSyncNeverTakesBack(t *testing.T) {
	s, db, dsn := newDB(t)
	sync := open(t, dsn, Options{Host: "ci-1"})
	fleet := open(t, dsn, Options{Host: "operator", ReleaseAfter: time.Hour})
	ctx := context.Background()
	log := eventtest.Log(t, append(turnSpecs(1), turnSpecs(2)...)...)
	raw := func(from, to int) [][]byte {
		var out [][]byte
		for _, e := range log[from:to] {
			out = append(out, e.Raw)
		}
		return out
	}
	h := contractHeader("taken").Line()
	for _, id := range []string{"taken", "fed", "released"} {
		hd := contractHeader(id).Line()
		if id == "taken" {
			hd = h
		}
		if err := sync.Ingest(ctx, "ci-1", id, hd, 0, raw(0, 3)); err != nil {
			t.Fatal(err)
		}
	}
	if err := sync.Release(ctx, "ci-1", "released"); err != nil {
		t.Fatal(err)
	}
	var rel *ReleasedError
	if err := sync.Ingest(ctx, "ci-1", "released", contractHeader("released").Line(), 3, raw(3, 6)); !errors.As(err, &rel) {
		t.Fatalf("ingest after release: %v", err)
	}
	if n := query[int64](t, dsn, `SELECT next_seq FROM sessions WHERE id = 'released'`); n != 3 {
		t.Fatalf("a refused ingest wrote: next_seq %d", n)
	}

	// the sync of "taken" goes idle; an operator writes it through the fleet store
	if err := s.Exec(db, `UPDATE sessions SET sync_seen = now() - interval '2 hours' WHERE id <> 'released'`); err != nil {
		t.Fatal(err)
	}
	st := eventstore.New(fleet)
	w, err := st.Writer(ctx, "taken")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AcceptEvents(log[3:6]); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if hd, _ := fleet.Held(ctx, "taken"); hd.SyncHost != "" || hd.NextSeq != 6 {
		t.Fatalf("after a fleet write: %+v", hd)
	}
	if err := sync.Ingest(ctx, "ci-1", "taken", h, 6, nil); !errors.As(err, &rel) {
		t.Fatalf("the idle sync coming back: %v", err)
	}

	// Touch refreshes the sessions ci-1 still feeds, and only those
	if err := sync.Touch(ctx, "ci-1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if hd, _ := fleet.Held(ctx, "fed"); hd.SyncHost != "ci-1" || time.Since(hd.SyncSeen) > time.Minute {
		t.Fatalf("fed after Touch: %+v", hd)
	}
	for _, id := range []string{"taken", "released"} {
		if hd, _ := fleet.Held(ctx, id); hd.SyncHost != "" || !hd.SyncSeen.IsZero() {
			t.Fatalf("%s after Touch: %+v", id, hd)
		}
	}
	ro := open(t, dsn, Options{Host: "ci-1", ReadOnly: true})
	if err := ro.Touch(ctx, "ci-1", time.Minute); err == nil {
		t.Fatal("Touch through a read-only store")
	}
}

// TestUnstorable: a NUL in a value the fleet store keeps as text is refused as content, before the
// server sees it — by a sync's ingest and by a writer's create — never as a failure of the database.
func TestUnstorable(t *testing.T) {
	_, _, dsn := newDB(t)
	b := open(t, dsn, Options{})
	ctx := context.Background()
	nul := event.String("/a\x00b")
	nulCwd := event.Header{ID: "s1", CreatedAt: 1, Cwd: &nul}.Line()
	var us *UnstorableError
	if err := b.Ingest(ctx, "h", "s1", nulCwd, 0, nil); !errors.As(err, &us) || us.What != "the cwd" {
		t.Errorf("ingest of a NUL cwd: %v, want unstorable", err)
	}
	cwd := event.String("/a\x00b")
	_, err := b.Materialize(ctx, event.Header{ID: "s2", CreatedAt: 1, Cwd: &cwd}, nil)
	if !errors.As(err, &us) && !strings.Contains(fmt.Sprint(err), "NUL") || eventstore.Classify(err) == eventstore.KindIO {
		t.Errorf("create with a NUL cwd: %v, want refused as input", err)
	}
	if h, _ := b.Held(ctx, "s1"); h.Exists {
		t.Error("the refused session was stored")
	}
}

// TestDigests: a session's stored lines come back as the SHA-256 of each line as it was ingested — a row
// the server keeps as it is hashed there, one kept as a zstd frame hashed once decompressed — with the
// revision of the same read; StoredLine returns one line's text.
func TestDigests(t *testing.T) {
	_, _, dsn := newDB(t)
	b := open(t, dsn, Options{})
	ctx := context.Background()
	if _, ok, ds, err := b.Digests(ctx, "s1"); err != nil || ok || len(ds) != 0 {
		t.Fatalf("digests of no session: %v %v %v", ok, ds, err)
	}
	big := []byte(`{"type":"user/message","seq":3,"time":5,"data":{"text":"` + strings.Repeat("ab", 5000) + `"}}`)
	want := append(lines(0, 3), big)
	if err := b.Ingest(ctx, "h", "s1", header("s1"), 0, nil); err != nil {
		t.Fatal(err)
	}
	if rev, ok, ds, err := b.Digests(ctx, "s1"); err != nil || !ok || len(ds) != 0 || rev != 1 {
		t.Fatalf("digests of a session of no events: %d %v %v %v", rev, ok, ds, err)
	}
	rev, err := b.IngestRevision(ctx, "h", "s1", header("s1"), 0, want)
	if err != nil {
		t.Fatal(err)
	}
	got, ok, ds, err := b.Digests(ctx, "s1")
	if err != nil || !ok || got != rev || len(ds) != len(want) {
		t.Fatalf("digests: revision %d (ingest said %d), %d digests, %v", got, rev, len(ds), err)
	}
	for i, d := range ds {
		if d.Seq != int64(i) || d.LastSeq != int64(i) || d.Sum != sha256.Sum256(want[i]) {
			t.Errorf("digest %d: %+v, want the SHA-256 of %.40q", i, d, want[i])
		}
	}
	if line, err := b.StoredLine(ctx, "s1", 3); err != nil || string(line) != string(big) {
		t.Errorf("stored line 3: %.40q %v", line, err)
	}
	if h, _ := b.Held(ctx, "s1"); h.Revision != rev {
		t.Errorf("held revision %d, ingest returned %d", h.Revision, rev)
	}
}
