package fleetsync_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/eventstore/postgres"
	"github.com/dshfs/dshfs/fleetsync"
	"github.com/dshfs/dshfs/internal/synth"
)

// copyRoot copies a store root as a VM clone or a restore from a backup would: the same files, new inodes.
func copyRoot(t *testing.T, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
}

// note appends one event of its own text to session id of a root: what makes two copies of a root differ.
func note(t *testing.T, root string, mode jsonl.Compression, id, text string) {
	t.Helper()
	ctx := context.Background()
	b, err := jsonl.Open(root, mode)
	if err != nil {
		t.Fatal(err)
	}
	st := eventstore.New(b)
	defer st.Close(ctx)
	ins, err := st.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := event.Canonical([]byte(`{"by":` + stringify(text) + `}`))
	e := event.NewEventFrom("session/note", int64(len(ins.Events)), 1778573709000, data,
		event.Member{Key: "ignorable", Value: event.Bool(true)})
	if err := st.Append(ctx, id, []event.Event{e}); err != nil {
		t.Fatal(err)
	}
}

func stringify(s string) string { return string(event.Stringify(event.String(s))) }

// firstDiff is the first seq at which two roots' logs of session id differ, read by the store itself.
func firstDiff(t *testing.T, a, b, id string) int64 {
	t.Helper()
	ctx := context.Background()
	pa, err := source(t, a).Backend().LoadStored(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := source(t, b).Backend().LoadStored(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for i := range min(len(pa.Events), len(pb.Events)) {
		if !bytes.Equal(pa.Events[i].Raw, pb.Events[i].Raw) {
			return int64(i)
		}
	}
	t.Fatalf("the two copies of %s do not differ", id)
	return -1
}

// unchangedFleet checks that the fleet store's copy of id is still what it was: nothing written.
func unchangedFleet(t *testing.T, dst *postgres.Backend, id string, was postgres.Holding) {
	t.Helper()
	h, err := dst.Held(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if h.NextSeq != was.NextSeq {
		t.Errorf("the fleet store's copy changed: next seq %d, was %d", h.NextSeq, was.NextSeq)
	}
}

// TestSyncDivergedCopy syncs two copies of one root under the same host name — a VM clone, a root restored
// from an older backup — each grown on its own after the copy. Whichever comes second is refused, naming
// the first seq where its log and the fleet store's differ, and nothing of it is written: the fleet store
// never holds one copy's turns followed by the other's, and a copy of the same length as the fleet
// store's but other content is never "unchanged".
func TestSyncDivergedCopy(t *testing.T) {
	for _, mode := range []jsonl.Compression{jsonl.None, jsonl.Zstd} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			a, c := filepath.Join(dir, "a"), filepath.Join(dir, "c")
			if err := synth.Write(a, mode, "s", 40); err != nil {
				t.Fatal(err)
			}
			copyRoot(t, a, c)
			note(t, c, mode, "s", "copy C")
			note(t, a, mode, "s", "copy A")
			at := firstDiff(t, a, c, "s")

			dst, dsn := fleet(t, "h")
			if r := pass(t, fleetsync.New(source(t, c), dst, fleetsync.Options{Host: "h"}))[0]; r.Status != fleetsync.Copied {
				t.Fatalf("copy C: %+v", r)
			}
			was, _ := dst.Held(ctx, "s")

			// copy A, a new process: as long as the fleet store's copy, other content
			sa := fleetsync.New(source(t, a), dst, fleetsync.Options{Host: "h"})
			r := pass(t, sa)[0]
			want := "differs from the fleet store's copy at seq " + itoa(int(at))
			if r.Status != fleetsync.Refused || !strings.Contains(r.Reason, want) || r.Events != 0 {
				t.Errorf("copy A of the same length: %+v, want refused with %q", r, want)
			}
			unchangedFleet(t, dst, "s", was)

			// copy A grows a turn: still refused, nothing of it appended after copy C's events
			if err := synth.Append(a, mode, "s", 1); err != nil {
				t.Fatal(err)
			}
			r = pass(t, sa)[0]
			if r.Status != fleetsync.Refused || !strings.Contains(r.Reason, want) || r.Events != 0 {
				t.Errorf("copy A grown: %+v, want refused with %q", r, want)
			}
			unchangedFleet(t, dst, "s", was)
			equal(t, source(t, c), dst, dsn, true) // the fleet store holds copy C's log, whole and alone

			// copy C grows too: its own sync goes on copying it
			if err := synth.Append(c, mode, "s", 1); err != nil {
				t.Fatal(err)
			}
			if r := pass(t, fleetsync.New(source(t, c), dst, fleetsync.Options{Host: "h"}))[0]; r.Status != fleetsync.Copied {
				t.Errorf("copy C grown: %+v, want copied", r)
			}
			equal(t, source(t, c), dst, dsn, true)
		})
	}
}

// TestSyncRestoredUnderWatch is the other order: a sync that has followed a root copies it, then the
// root is replaced by an older backup of itself that grows differently. The same syncer (its proof of
// the fleet store's copy in memory) sees the artifact replaced and compares again before it appends.
func TestSyncRestoredUnderWatch(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root, backup := filepath.Join(dir, "sessions"), filepath.Join(dir, "backup")
	if err := synth.Write(root, jsonl.None, "s", 40); err != nil {
		t.Fatal(err)
	}
	copyRoot(t, root, backup)
	dst, dsn := fleet(t, "h")
	s := fleetsync.New(source(t, root), dst, fleetsync.Options{Host: "h"})
	pass(t, s)
	note(t, root, jsonl.None, "s", "before the restore")
	if r := pass(t, s)[0]; r.Status != fleetsync.Copied {
		t.Fatalf("the first copy grown: %+v", r)
	}
	synced := filepath.Join(dir, "synced")
	copyRoot(t, root, synced)

	// the root is restored from the backup, and the harness writes on there
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	copyRoot(t, backup, root)
	note(t, root, jsonl.None, "s", "after the restore")
	if err := synth.Append(root, jsonl.None, "s", 1); err != nil {
		t.Fatal(err)
	}
	at := firstDiff(t, root, synced, "s")
	was, _ := dst.Held(ctx, "s")
	r := pass(t, s)[0]
	if want := "at seq " + itoa(int(at)); r.Status != fleetsync.Refused || !strings.Contains(r.Reason, want) {
		t.Errorf("the restored root: %+v, want refused %q", r, want)
	}
	unchangedFleet(t, dst, "s", was)
	equal(t, source(t, synced), dst, dsn, true)
}

// TestSyncStateShown: what a sync found wrong with the fleet store's copy is where the fleet store is
// read — its listing and status.json's custody — not only in the host's report: a diverged copy keeps
// the fleet store's log readable and says so; a session the host's harness upgraded to format v4 after
// it was synced is refused there as stale, never served as the current log.
func TestSyncStateShown(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, c := filepath.Join(dir, "a"), filepath.Join(dir, "c")
	for _, id := range []string{"s", "u"} {
		if err := synth.Write(a, jsonl.None, id, 40); err != nil {
			t.Fatal(err)
		}
	}
	copyRoot(t, a, c)
	note(t, c, jsonl.None, "s", "copy C")
	note(t, a, jsonl.None, "s", "copy A")
	dst, dsn := fleet(t, "h")
	pass(t, fleetsync.New(source(t, c), dst, fleetsync.Options{Host: "h"}))

	// the harness on host A upgrades session u to format v4: its v4 file appears beside session.jsonl
	v4 := filepath.Join(dir, "v4")
	if err := synth.WriteV4(v4, jsonl.None, "u", 40); err != nil {
		t.Fatal(err)
	}
	src := artifact(t, source(t, v4), "u")
	beside := filepath.Join(filepath.Dir(artifact(t, source(t, a), "u")), filepath.Base(src))
	if err := os.Rename(src, beside); err != nil {
		t.Fatal(err)
	}
	sa := fleetsync.New(source(t, a), dst, fleetsync.Options{Host: "h"})
	byID := map[string]fleetsync.Report{}
	for _, r := range pass(t, sa) {
		byID[r.ID] = r
	}
	if r := byID["u"]; r.Status != fleetsync.Skipped || !strings.Contains(r.Reason, "generation v4") || !strings.Contains(r.Reason, "marked stale") {
		t.Errorf("the upgraded session: %+v, want skipped and marked stale", r)
	}
	if r := byID["s"]; r.Status != fleetsync.Refused {
		t.Errorf("the diverged session: %+v, want refused", r)
	}

	// a fresh reader of the fleet store: the listing and status.json's custody say what was found
	reader := openFleet(t, dsn, "reader")
	l, err := reader.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Entries {
		switch e.ID {
		case "u":
			if e.Refusal == nil || !strings.Contains(e.Refusal.Error(), "stale") || eventstore.Classify(e.Refusal) != eventstore.KindUnsupported {
				t.Errorf("u listed with refusal %v, want stale", e.Refusal)
			}
		case "s":
			if e.Refusal != nil {
				t.Errorf("s listed refused (%v): the fleet store's copy is a log its host wrote, and stays readable", e.Refusal)
			}
		}
	}
	if _, err := reader.LoadStored(ctx, "u"); err == nil || !strings.Contains(err.Error(), "stale") {
		t.Errorf("loading the stale session: %v, want refused", err)
	}
	if _, ok := loadFleet(t, reader, "s"); !ok {
		t.Error("the diverged session's copy does not read")
	}
	for id, want := range map[string]string{"s": postgres.Diverged, "u": postgres.Stale} {
		cu, err := reader.Custody(ctx, id)
		if err != nil || cu.State != want || cu.StateReason == "" {
			t.Errorf("%s: custody %+v %v, want state %s", id, cu, err, want)
		}
	}
	cu, _ := reader.Custody(ctx, "s")
	if !strings.Contains(cu.StateReason, "at seq") {
		t.Errorf("the diverged state's reason %q names no seq", cu.StateReason)
	}

	// the next passes of the same sync find nothing changed, and record nothing again
	h, _ := dst.Held(ctx, "s")
	rs, err := sa.Pass(ctx, true)
	if err != nil || len(rs) != 0 {
		t.Errorf("a pass over nothing changed: %+v %v, want no report", rs, err)
	}
	if h2, _ := dst.Held(ctx, "s"); h2.Revision != h.Revision {
		t.Errorf("a pass over nothing changed moved the revision %d to %d", h.Revision, h2.Revision)
	}
}

// TestSyncUnsyncableOnce: a session that cannot be synced — a NUL in the cwd (PostgreSQL's text holds
// none) — is reported by the pass that finds it and not again until its source changes, as `sync --watch`
// runs its passes; a v4 session beside it is copied once.
func TestSyncUnsyncableOnce(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "sessions")
	b, err := jsonl.Open(root, jsonl.None)
	if err != nil {
		t.Fatal(err)
	}
	st := eventstore.New(b)
	cwd := event.String("/srv/a\x00b")
	if err := st.Create(ctx, event.Header{ID: "nul", CreatedAt: 1778573701000, Cwd: &cwd}); err != nil {
		t.Fatal(err)
	}
	st.Close(ctx)
	if err := synth.WriteV4(root, jsonl.None, "v4", 40); err != nil {
		t.Fatal(err)
	}
	if err := synth.Write(root, jsonl.None, "ok", 40); err != nil {
		t.Fatal(err)
	}
	dst, _ := fleet(t, "h")
	s := fleetsync.New(source(t, root), dst, fleetsync.Options{Host: "h"})
	first, err := s.Pass(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]fleetsync.Report{}
	for _, r := range first {
		byID[r.ID] = r
	}
	if r := byID["nul"]; r.Status != fleetsync.Skipped || !strings.Contains(r.Reason, "NUL") {
		t.Errorf("the session with a NUL in its cwd: %+v, want skipped naming the NUL", r)
	}
	if r := byID["v4"]; r.Status != fleetsync.Copied || r.Events == 0 {
		t.Errorf("the v4 session: %+v, want it copied", r)
	}
	for i := 0; i < 2; i++ {
		again, err := s.Pass(ctx, true)
		if err != nil || len(again) != 0 {
			t.Errorf("pass %d over nothing changed: %+v %v, want no report", i+2, again, err)
		}
	}
	// its source changes: reported again, once
	note(t, root, jsonl.None, "nul", "more")
	again, err := s.Pass(ctx, true)
	if err != nil || len(again) != 1 || again[0].ID != "nul" || again[0].Status != fleetsync.Skipped {
		t.Errorf("after the session grew: %+v %v, want it reported skipped once", again, err)
	}
}

// TestWatchReportsOnce: under `sync --watch`, a session that cannot be synced, or that a fleet writer
// holds (tried again by every pass), is reported once per change of its source, not on every pass.
func TestWatchReportsOnce(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "sessions")
	if err := synth.Write(root, jsonl.None, "s", 1); err != nil {
		t.Fatal(err)
	}
	b, err := jsonl.Open(root, jsonl.None)
	if err != nil {
		t.Fatal(err)
	}
	st := eventstore.New(b)
	cwd := event.String("/srv/a\x00b")
	if err := st.Create(ctx, event.Header{ID: "nul", CreatedAt: 1778573701000, Cwd: &cwd}); err != nil {
		t.Fatal(err)
	}
	st.Close(ctx)
	dst, dsn := fleet(t, "h")
	s := fleetsync.New(source(t, root), dst, fleetsync.Options{Host: "h"})
	pass(t, s)
	// a writer on another host holds s in the fleet store, and s grows on this host
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(x'64736866'::int, hashtext('s'))`); err != nil {
		t.Fatal(err)
	}
	if err := synth.Append(root, jsonl.None, "s", 1); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	reports := map[string][]fleetsync.Status{}
	got := func(id string) []fleetsync.Status {
		mu.Lock()
		defer mu.Unlock()
		return append([]fleetsync.Status(nil), reports[id]...)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- s.Watch(wctx, func(r fleetsync.Report) {
			mu.Lock()
			reports[r.ID] = append(reports[r.ID], r.Status)
			mu.Unlock()
		}, func(msg string) { t.Log(msg) })
	}()
	await(t, func() bool { return len(got("s")) >= 1 })
	// new sessions make the watch pass over the store again, trying s each time
	for _, id := range []string{"t1", "t2", "t3"} {
		if err := synth.Write(root, jsonl.None, id, 1); err != nil {
			t.Fatal(err)
		}
		await(t, func() bool { return len(got(id)) >= 1 })
	}
	if r := got("s"); len(r) != 1 || r[0] != fleetsync.Refused {
		t.Errorf("the held session was reported %v, want refused once", r)
	}
	if r := got("nul"); len(r) > 1 {
		t.Errorf("the session with a NUL was reported %v, want once at most (the first pass said it)", r)
	}
	// the writer lets go and s grows again: copied, and said
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock(x'64736866'::int, hashtext('s'))`); err != nil {
		t.Fatal(err)
	}
	if err := synth.Append(root, jsonl.None, "s", 1); err != nil {
		t.Fatal(err)
	}
	await(t, func() bool { r := got("s"); return len(r) == 2 && r[1] == fleetsync.Copied })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	p, _ := source(t, root).Backend().LoadStored(ctx, "s")
	if h, _ := dst.Held(ctx, "s"); h.NextSeq != int64(len(p.Events)) {
		t.Errorf("the fleet store holds %d events of s, its source %d", h.NextSeq, len(p.Events))
	}
}
