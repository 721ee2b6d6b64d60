package fleetsync_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/eventstore/postgres"
	"github.com/dshfs/dshfs/eventstore/sqlite"
	"github.com/dshfs/dshfs/fleetsync"
	"github.com/dshfs/dshfs/internal/fixtures"
	"github.com/dshfs/dshfs/internal/pgtest"
	"github.com/dshfs/dshfs/internal/synth"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// fleet opens a fresh fleet store database as host.
func fleet(t *testing.T, host string) (*postgres.Backend, string) {
	t.Helper()
	s := pgtest.Shared(t)
	dsn := s.DSN(s.NewDatabase(t))
	return openFleet(t, dsn, host), dsn
}

func openFleet(t *testing.T, dsn, host string) *postgres.Backend {
	t.Helper()
	b, err := postgres.Open(context.Background(), dsn, postgres.Options{Host: host})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// source opens a host's store read-only, as sync does.
func source(t *testing.T, path string) *eventstore.Store {
	t.Helper()
	if strings.HasSuffix(path, ".db") {
		b, err := sqlite.Open(path, sqlite.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return eventstore.New(b)
	}
	mode, _ := jsonl.Detect(path)
	b, err := jsonl.Open(path, mode)
	if err != nil {
		t.Fatal(err)
	}
	return eventstore.New(b)
}

// tree is every file under root (or the file root) with its SHA-256: what "never written" compares.
func tree(t *testing.T, root string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	base := root
	if fi, err := os.Stat(root); err == nil && !fi.IsDir() {
		base = filepath.Dir(root)
	}
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[p] = sha256.Sum256(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, before, after map[string][32]byte) {
	t.Helper()
	for p, h := range before {
		if h2, ok := after[p]; !ok || h2 != h {
			t.Errorf("source file %s changed or vanished", p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("sync created %s in the source", p)
		}
	}
}

// equal checks that every session of src reads back from the fleet store with the same header and
// byte-identical stored events; exact: and that the fleet store holds no other session.
func equal(t *testing.T, src *eventstore.Store, dst *postgres.Backend, dsn string, exact bool) int {
	t.Helper()
	ctx := context.Background()
	l, err := src.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range l.Entries {
		want, err := src.Backend().LoadStored(ctx, e.ID)
		if err != nil {
			t.Fatalf("%s: source: %v", e.ID, err)
		}
		got, ok := loadFleet(t, dst, e.ID)
		if !ok {
			t.Errorf("%s: not in the fleet store", e.ID)
			continue
		}
		if !bytes.Equal(got.Header.WithDepth().Meta(), want.Header.WithDepth().Meta()) {
			t.Errorf("%s: header %s, want %s", e.ID, got.Header.Meta(), want.Header.Meta())
		}
		if got.Torn != nil {
			t.Errorf("%s: the fleet store's copy has a torn tail", e.ID)
		}
		if len(got.Events) != len(want.Events) {
			t.Errorf("%s: %d events in the fleet store, %d in the source", e.ID, len(got.Events), len(want.Events))
			continue
		}
		for i := range want.Events {
			if !bytes.Equal(got.Events[i].Raw, want.Events[i].Raw) {
				t.Errorf("%s: event %d differs:\n got %s\nwant %s", e.ID, i, got.Events[i].Raw, want.Events[i].Raw)
				break
			}
		}
		n += len(want.Events)
	}
	if ids := fleetIDs(t, dsn); exact && len(ids) != len(l.Entries) {
		t.Errorf("the fleet store holds %d sessions, want %d", len(ids), len(l.Entries))
	}
	return n
}

func statuses(reports []fleetsync.Report) map[fleetsync.Status]int {
	m := map[fleetsync.Status]int{}
	for _, r := range reports {
		m[r.Status]++
	}
	return m
}

func pass(t *testing.T, s *fleetsync.Syncer) []fleetsync.Report {
	t.Helper()
	reports, err := s.Pass(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	return reports
}

// TestSyncFixtures syncs the harness's own stores — JSONL raw and zstd, SQLite imported and native —
// into fresh fleet stores: every session reads back byte-identical, the source is never written, and a
// second run copies nothing.
func TestSyncFixtures(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		torn       int // sessions with a torn tail left behind
	}{
		{"generated-raw", "generated/raw", 1},
		{"generated-zstd", "generated/zstd", 0}, // its torn frame is not decoded: not counted
		{"upstream-raw", "upstream/raw", 0},
		{"upstream-zstd", "upstream/zstd", 0},
		{"sqlite-v17", "generated/sqlite-v17.db", 0},
		{"sqlite-native-v17", "generated/sqlite-native-v17.db", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var root string
			if strings.HasSuffix(tc.path, ".db") {
				root = filepath.Join(t.TempDir(), filepath.Base(tc.path))
				b, err := os.ReadFile(fixtures.Path(t, tc.path))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(root, b, 0o600); err != nil {
					t.Fatal(err)
				}
			} else {
				root = fixtures.CopyTree(t, fixtures.Path(t, tc.path))
			}
			before := tree(t, root)
			dst, dsn := fleet(t, "host-a")
			src := source(t, root)
			s := fleetsync.New(src, dst, fleetsync.Options{Host: "host-a", MaxLines: 7})
			reports := pass(t, s)
			torn := 0
			for _, r := range reports {
				if r.Status != fleetsync.Copied {
					t.Errorf("%s: %s (%s), want copied", r.ID, r.Status, r.Reason)
				}
				if r.To != r.Events || r.From != 0 {
					t.Errorf("%s: copied seqs %d..%d, %d events", r.ID, r.From, r.To, r.Events)
				}
				if strings.Contains(r.Reason, "left behind") {
					torn++
				}
			}
			if torn != tc.torn {
				t.Errorf("%d sessions reported a torn tail left behind, want %d", torn, tc.torn)
			}
			events := equal(t, src, dst, dsn, true)
			if events == 0 {
				t.Fatal("no events compared")
			}
			// a second run copies nothing
			again := pass(t, s)
			if st := statuses(again); st[fleetsync.Unchanged] != len(reports) {
				t.Errorf("second run: %v, want %d unchanged", st, len(reports))
			}
			// a new Syncer (a new process) too
			fresh := pass(t, fleetsync.New(source(t, root), dst, fleetsync.Options{Host: "host-a"}))
			if st := statuses(fresh); st[fleetsync.Unchanged] != len(reports) {
				t.Errorf("rerun: %v, want %d unchanged", st, len(reports))
			}
			sameTree(t, before, tree(t, root))
		})
	}
}

// TestSyncAppended copies only the lines appended to a source session since the last run.
func TestSyncAppended(t *testing.T) {
	for _, tc := range []struct {
		mode  jsonl.Compression
		fresh bool
	}{{jsonl.None, false}, {jsonl.Zstd, false}, {jsonl.None, true}, {jsonl.Zstd, true}} {
		mode, fresh := tc.mode, tc.fresh
		t.Run(fmt.Sprintf("%s-fresh=%v", mode, fresh), func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "sessions")
			for _, id := range []string{"s1", "s2"} {
				if err := synth.Write(root, mode, id, 3); err != nil {
					t.Fatal(err)
				}
			}
			dst, dsn := fleet(t, "h")
			s := fleetsync.New(source(t, root), dst, fleetsync.Options{Host: "h", MaxLines: 5})
			first := pass(t, s)
			if st := statuses(first); st[fleetsync.Copied] != 2 {
				t.Fatalf("first run: %v", st)
			}
			held, _ := dst.Held(context.Background(), "s1")
			if err := synth.Append(root, mode, "s1", 2); err != nil {
				t.Fatal(err)
			}
			// a new run (another process: nothing remembered) reads past the fleet store's end, the
			// same run from where its last read ended
			if fresh {
				s = fleetsync.New(source(t, root), dst, fleetsync.Options{Host: "h", MaxLines: 5})
			}
			second := pass(t, s)
			var r1 fleetsync.Report
			for _, r := range second {
				switch r.ID {
				case "s1":
					r1 = r
				case "s2":
					if r.Status != fleetsync.Unchanged {
						t.Errorf("s2: %s, want unchanged", r.Status)
					}
				}
			}
			if r1.Status != fleetsync.Copied || r1.From != held.NextSeq || r1.Events == 0 || r1.To != r1.From+r1.Events {
				t.Errorf("s1: %+v, want the events after seq %d copied", r1, held.NextSeq)
			}
			equal(t, source(t, root), dst, dsn, true)
		})
	}
}

// TestSyncPartialLine leaves a line still being written (no LF yet) behind, and copies it once complete;
// a torn zstd frame likewise.
func TestSyncPartialLine(t *testing.T) {
	ctx := context.Background()
	t.Run("raw", func(t *testing.T) {
		root := filepath.Join(t.TempDir(), "sessions")
		if err := synth.Write(root, jsonl.None, "s", 1); err != nil {
			t.Fatal(err)
		}
		src := source(t, root)
		path := artifact(t, src, "s")
		p, _ := src.Backend().LoadStored(ctx, "s")
		n := len(p.Events)
		next := `{"type":"session/note","seq":` + itoa(n) + `,"time":1,"data":{}}`
		half := len(next) / 2
		appendFile(t, path, next[:half])
		before := tree(t, root)
		dst, dsn := fleet(t, "h")
		s := fleetsync.New(src, dst, fleetsync.Options{Host: "h"})
		r := pass(t, s)[0]
		if r.Status != fleetsync.Copied || r.To != int64(n) || !strings.Contains(r.Reason, itoa(half)+" bytes") {
			t.Errorf("with a partial line: %+v, want %d events and %d bytes left behind", r, n, half)
		}
		sameTree(t, before, tree(t, root))
		appendFile(t, path, next[half:]+"\n")
		r = pass(t, s)[0]
		if r.Status != fleetsync.Copied || r.From != int64(n) || r.To != int64(n+1) || r.Lines != 1 {
			t.Errorf("the line completed: %+v, want seq %d copied", r, n)
		}
		equal(t, src, dst, dsn, true)
	})
	t.Run("zstd", func(t *testing.T) {
		root := filepath.Join(t.TempDir(), "sessions")
		if err := synth.Write(root, jsonl.Zstd, "s", 1); err != nil {
			t.Fatal(err)
		}
		src := source(t, root)
		path := artifact(t, src, "s")
		p, _ := src.Backend().LoadStored(ctx, "s")
		n := len(p.Events)
		frame := jsonl.EncodeFrame(nil, []byte(`{"type":"session/note","seq":`+itoa(n)+`,"time":1,"data":{}}`+"\n"))
		appendFile(t, path, string(frame[:len(frame)-3]))
		before := tree(t, root)
		dst, dsn := fleet(t, "h")
		s := fleetsync.New(src, dst, fleetsync.Options{Host: "h"})
		r := pass(t, s)[0]
		if r.Status != fleetsync.Copied || r.To != int64(n) {
			t.Errorf("with a torn frame: %+v, want %d events", r, n)
		}
		sameTree(t, before, tree(t, root))
		appendFile(t, path, string(frame[len(frame)-3:]))
		r = pass(t, s)[0]
		if r.Status != fleetsync.Copied || r.From != int64(n) || r.To != int64(n+1) {
			t.Errorf("the frame completed: %+v, want seq %d copied", r, n)
		}
		equal(t, src, dst, dsn, true)
	})
}

// TestSyncOtherHost: the same session id from a second host is refused when its events differ (the
// fleet store's copy untouched, the other sessions synced) and nothing to do when they are identical.
func TestSyncOtherHost(t *testing.T) {
	ctx := context.Background()
	rootA := fixtures.CopyTree(t, fixtures.Path(t, "generated/raw"))
	rootB := fixtures.CopyTree(t, fixtures.Path(t, "generated/raw"))
	dst, dsn := fleet(t, "a")
	if st := statuses(pass(t, fleetsync.New(source(t, rootA), dst, fleetsync.Options{Host: "a"}))); st[fleetsync.Copied] != 5 {
		t.Fatalf("host a: %v", st)
	}
	const clean = "main-session-fa821f4b-98fd-46aa-86bc-0955a88ef4b8"
	// host b's copy of clean grows past host a's; b also has a session of its own
	srcB := source(t, rootB)
	p, _ := srcB.Backend().LoadStored(ctx, clean)
	appendFile(t, artifact(t, srcB, clean), `{"type":"session/note","seq":`+itoa(len(p.Events))+`,"time":1,"data":{}}`+"\n")
	if err := synth.Write(rootB, jsonl.None, "only-on-b", 1); err != nil {
		t.Fatal(err)
	}
	heldBefore, _ := dst.Held(ctx, clean)
	dstB := openFleet(t, dsn, "b")
	reports := pass(t, fleetsync.New(source(t, rootB), dstB, fleetsync.Options{Host: "b"}))
	st := statuses(reports)
	if st[fleetsync.Refused] != 1 || st[fleetsync.Identical] != 4 || st[fleetsync.Copied] != 1 {
		t.Errorf("host b: %v, want 1 refused, 4 identical, 1 copied", st)
	}
	for _, r := range reports {
		if r.ID == clean && (r.Status != fleetsync.Refused || !strings.Contains(r.Reason, `host "a"`)) {
			t.Errorf("clean from host b: %+v", r)
		}
	}
	heldAfter, _ := dst.Held(ctx, clean)
	if heldAfter.NextSeq != heldBefore.NextSeq || heldAfter.Revision != heldBefore.Revision || heldAfter.Host != "a" {
		t.Errorf("the fleet store's copy changed: %+v, was %+v", heldAfter, heldBefore)
	}
	equal(t, source(t, rootA), dst, dsn, false) // host a's sessions as they were
}

// TestSyncRelease: a released session is no longer followed; lines its host writes later are refused.
func TestSyncRelease(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "sessions")
	if err := synth.Write(root, jsonl.None, "s", 1); err != nil {
		t.Fatal(err)
	}
	dst, _ := fleet(t, "h")
	s := fleetsync.New(source(t, root), dst, fleetsync.Options{Host: "h"})
	pass(t, s)
	if err := s.Release(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if h, _ := dst.Held(ctx, "s"); h.SyncHost != "" {
		t.Fatalf("released, yet synced by %q", h.SyncHost)
	}
	if r := pass(t, s)[0]; r.Status != fleetsync.Released {
		t.Errorf("after release: %+v", r)
	}
	held, _ := dst.Held(ctx, "s")
	if err := synth.Append(root, jsonl.None, "s", 1); err != nil {
		t.Fatal(err)
	}
	if r := pass(t, s)[0]; r.Status != fleetsync.Refused || r.Events != 0 {
		t.Errorf("appended after release: %+v, want refused", r)
	}
	if h, _ := dst.Held(ctx, "s"); h.NextSeq != held.NextSeq || h.SyncHost != "" {
		t.Errorf("the released session changed: %+v", h)
	}
}

// TestSyncGenerations skips sessions of a later format generation by name and reason.
func TestSyncGenerations(t *testing.T) {
	for _, g := range []string{"v2/raw", "v3/zstd"} {
		root := fixtures.CopyTree(t, fixtures.Path(t, "generations", g))
		dst, dsn := fleet(t, "h")
		for _, r := range pass(t, fleetsync.New(source(t, root), dst, fleetsync.Options{Host: "h"})) {
			if r.Status != fleetsync.Skipped || !strings.Contains(r.Reason, "generation v") {
				t.Errorf("%s %s: %+v, want skipped", g, r.ID, r)
			}
		}
		if ids := fleetIDs(t, dsn); len(ids) != 0 {
			t.Errorf("%s: the fleet store holds %v", g, ids)
		}
	}
}

// TestWatch follows a growing session until the context ends.
func TestWatch(t *testing.T) {
	for _, mode := range []jsonl.Compression{jsonl.None, jsonl.Zstd} {
		t.Run(string(mode), func(t *testing.T) {
			ctx := context.Background()
			root := filepath.Join(t.TempDir(), "sessions")
			if err := synth.Write(root, mode, "s", 1); err != nil {
				t.Fatal(err)
			}
			dst, dsn := fleet(t, "h")
			src := source(t, root)
			s := fleetsync.New(src, dst, fleetsync.Options{Host: "h"})
			pass(t, s)
			wctx, cancel := context.WithCancel(ctx)
			// a copy is reported after it is committed: the test awaits the reports, not only the store
			var mu sync.Mutex
			copies := map[string]int{}
			copied := func(id string) int { mu.Lock(); defer mu.Unlock(); return copies[id] }
			done := make(chan error, 1)
			go func() {
				done <- s.Watch(wctx, func(r fleetsync.Report) {
					if r.Status == fleetsync.Copied {
						mu.Lock()
						copies[r.ID]++
						mu.Unlock()
					}
				}, func(msg string) { t.Log(msg) })
			}()
			for round := 1; round <= 3; round++ {
				if err := synth.Append(root, mode, "s", 1); err != nil {
					t.Fatal(err)
				}
				p, _ := src.Backend().LoadStored(ctx, "s")
				await(t, func() bool {
					h, _ := dst.Held(ctx, "s")
					return h.NextSeq == int64(len(p.Events)) && copied("s") >= round
				})
			}
			// a new session appears and is followed too
			if err := synth.Write(root, mode, "t", 1); err != nil {
				t.Fatal(err)
			}
			pt, err := src.Backend().LoadStored(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			await(t, func() bool { h, _ := dst.Held(ctx, "t"); return h.NextSeq == int64(len(pt.Events)) && copied("t") >= 1 })
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Watch did not stop")
			}
			equal(t, src, dst, dsn, true)
		})
	}
}

// await polls cond until it holds, failing after a deadline.
func await(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func artifact(t *testing.T, st *eventstore.Store, id string) string {
	t.Helper()
	l, err := st.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Entries {
		if e.ID == id {
			return e.Path
		}
	}
	t.Fatalf("no session %s", id)
	return ""
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestRefresh: a sync keeps the sessions it feeds held — their sync_seen refreshed once older than a
// minute, by a run with nothing to copy and by Refresh — and leaves a released session released.
func TestRefresh(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "sessions")
	for _, id := range []string{"a", "b"} {
		if err := synth.Write(root, jsonl.None, id, 1); err != nil {
			t.Fatal(err)
		}
	}
	dst, dsn := fleet(t, "h")
	s := fleetsync.New(source(t, root), dst, fleetsync.Options{Host: "h"})
	pass(t, s)
	if err := s.Release(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	age := func() {
		if err := pgtest.Shared(t).Exec(dbName(dsn), `UPDATE sessions SET sync_seen = now() - interval '5 minutes' WHERE sync_host IS NOT NULL`); err != nil {
			t.Fatal(err)
		}
	}
	fresh := func(id string) bool {
		h, err := dst.Held(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return h.SyncHost == "h" && time.Since(h.SyncSeen) < time.Minute
	}
	age()
	if fresh("a") {
		t.Fatal("aging did not take")
	}
	s.Refresh(ctx)
	if !fresh("a") {
		t.Error("Refresh left a's sync_seen old")
	}
	age()
	if r := pass(t, fleetsync.New(source(t, root), dst, fleetsync.Options{Host: "h"})); statuses(r)[fleetsync.Unchanged] != 1 {
		t.Errorf("rerun: %v", statuses(r))
	}
	if !fresh("a") {
		t.Error("a run with nothing to copy left a's sync_seen old")
	}
	if h, _ := dst.Held(ctx, "b"); h.SyncHost != "" {
		t.Errorf("the released session is synced by %q again", h.SyncHost)
	}
}

// dbName is the database a pgtest DSN names.
func dbName(dsn string) string {
	rest := dsn[strings.Index(dsn, "@/")+2:]
	return rest[:strings.IndexByte(rest, '?')]
}

// TestWatchSQLite follows a SQLite database: a commit by another connection (here the eventstore writer
// over a read-write handle) is copied as it lands.
func TestWatchSQLite(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "sessions.db")
	b, err := os.ReadFile(fixtures.Path(t, "generated/sqlite-native-v17.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db, b, 0o600); err != nil {
		t.Fatal(err)
	}
	const clean = "main-session-fa821f4b-98fd-46aa-86bc-0955a88ef4b8"
	dst, dsn := fleet(t, "h")
	src := source(t, db)
	s := fleetsync.New(src, dst, fleetsync.Options{Host: "h"})
	pass(t, s)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Watch(wctx, func(fleetsync.Report) {}, func(msg string) { t.Log(msg) }) }()
	wb, err := sqlite.Open(db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := eventstore.New(wb)
	p, err := wb.LoadStored(ctx, clean)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(p.Events))
	note := event.NewEventFrom("session/note", n, 1778573709000, []byte(`{"text":"appended"}`),
		event.Member{Key: "ignorable", Value: event.Bool(true)})
	if err := w.Append(ctx, clean, []event.Event{note}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	wb.Close()
	await(t, func() bool { h, _ := dst.Held(ctx, clean); return h.NextSeq == n+1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	equal(t, src, dst, dsn, true)
}

// TestSyncBusy: while a fleet store writer holds a session's writer lock, its new lines are refused
// (nothing written) and copied by the next pass once the lock is gone, though the source did not change.
func TestSyncBusy(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "sessions")
	if err := synth.Write(root, jsonl.None, "s", 1); err != nil {
		t.Fatal(err)
	}
	dst, dsn := fleet(t, "h")
	s := fleetsync.New(source(t, root), dst, fleetsync.Options{Host: "h"})
	pass(t, s)
	if err := synth.Append(root, jsonl.None, "s", 1); err != nil {
		t.Fatal(err)
	}
	// the fleet store's writer lock, as a writer on another host holds it (eventstore/postgres: an
	// advisory lock in the fleet namespace on hashtext(id))
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(x'64736866'::int, hashtext('s'))`); err != nil {
		t.Fatal(err)
	}
	held, _ := dst.Held(ctx, "s")
	r, err := s.Pass(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(r) != 1 || r[0].Status != fleetsync.Refused || r[0].Events != 0 {
		t.Fatalf("while locked: %+v, want refused", r)
	}
	if h, _ := dst.Held(ctx, "s"); h.NextSeq != held.NextSeq {
		t.Fatalf("written while locked: %d, was %d", h.NextSeq, held.NextSeq)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock(x'64736866'::int, hashtext('s'))`); err != nil {
		t.Fatal(err)
	}
	r, err = s.Pass(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(r) != 1 || r[0].Status != fleetsync.Copied {
		t.Fatalf("after the lock: %+v, want copied", r)
	}
	equal(t, source(t, root), dst, dsn, true)
}

// TestSyncTakenOver: a session its host's sync has not fed for release_after is writable through the
// fleet store; once written there, the host's later lines are refused, never merged onto it.
func TestSyncTakenOver(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "sessions")
	if err := synth.Write(root, jsonl.None, "s", 1); err != nil {
		t.Fatal(err)
	}
	dst, dsn := fleet(t, "h")
	s := fleetsync.New(source(t, root), dst, fleetsync.Options{Host: "h"})
	pass(t, s)
	if err := pgtest.Shared(t).Exec(dbName(dsn), `UPDATE sessions SET sync_seen = now() - interval '20 minutes'`); err != nil {
		t.Fatal(err)
	}
	// an operator on another host writes the idle session through the fleet store
	op, err := postgres.Open(ctx, dsn, postgres.Options{Host: "operator", ReleaseAfter: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	held, _ := dst.Held(ctx, "s")
	w := eventstore.New(op)
	note := event.NewEventFrom("session/note", held.NextSeq, 1778573709000, []byte(`{"by":"operator"}`),
		event.Member{Key: "ignorable", Value: event.Bool(true)})
	if err := w.Append(ctx, "s", []event.Event{note}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	written, _ := dst.Held(ctx, "s")
	if written.NextSeq != held.NextSeq+1 {
		t.Fatalf("the operator's write: next seq %d, want %d", written.NextSeq, held.NextSeq+1)
	}
	// the host goes on writing its own copy, past the operator's
	if err := synth.Append(root, jsonl.None, "s", 1); err != nil {
		t.Fatal(err)
	}
	r := pass(t, s)[0]
	// the operator's write ended the host's hold: the session is released, and the host's new events are
	// refused, never merged
	if r.Status != fleetsync.Refused || r.Events != 0 || !strings.Contains(r.Reason, "written through the fleet store") {
		t.Errorf("after the takeover: %+v, want refused", r)
	}
	if h, _ := dst.Held(ctx, "s"); h.NextSeq != written.NextSeq || h.Revision != written.Revision {
		t.Errorf("the taken-over session changed: %+v, was %+v", h, written)
	}
}
