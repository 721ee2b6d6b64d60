package fleetsync_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
