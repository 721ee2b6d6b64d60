package eventstore_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/eventstore/load"
)

// turnOf is one complete turn numbered n in the append syntax (with a packed chunk row's worth of chunks).
func turnOf(n int) [][]byte {
	var out [][]byte
	for _, l := range []string{tStart(n), sStart(n, 1), userMsg(fmt.Sprintf("u%d", n)), chunk(n, 1), chunk(n, 1), sEnd(n, 1), tEnd(n)} {
		out = append(out, []byte(l))
	}
	return out
}

// residentStore is a Store over a fresh raw JSONL root, with the root for a second Store.
func residentStore(t *testing.T) (*eventstore.Store, string) {
	t.Helper()
	root := t.TempDir()
	b, err := jsonl.Open(root, jsonl.None)
	if err != nil {
		t.Fatal(err)
	}
	st := eventstore.New(b)
	t.Cleanup(func() { st.Close(context.Background()) })
	return st, root
}

// liveWriter creates session id and makes it live with turns complete turns accepted and flushed.
func liveWriter(t *testing.T, st *eventstore.Store, id string, turns int) *eventstore.Session {
	t.Helper()
	ctx := context.Background()
	if err := st.Create(ctx, event.Header{ID: id, CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	w, err := st.Writer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= turns; n++ {
		if err := w.Accept(turnOf(n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return w
}

// wantLog checks that events are seqs 0..len-1 in order with exactly the text of want.
func wantLog(t *testing.T, what string, got, want []event.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i].Seq != int64(i) || !bytes.Equal(got[i].Raw, want[i].Raw) {
			t.Fatalf("%s: event %d is %s, want %s", what, i, got[i].Raw, want[i].Raw)
		}
	}
}

// TestIdleEngineReleasesItsLog: over the live budget, the least recently used idle engine releases its
// log — never one with events pending — keeps its writer lease, and reads its log back when it is next
// used: an append continues it with the right seqs, and every event, old and new, is in the snapshot
// and on disk in order.
func TestIdleEngineReleasesItsLog(t *testing.T) {
	ctx := context.Background()
	st, root := residentStore(t)
	st.LiveBytes = 1 // every idle engine but the one in use releases its log

	a := liveWriter(t, st, "a", 3)
	before := a.Snapshot().Events
	// a has events pending: opening b (over the budget) must not release a's log
	if err := a.Accept(turnOf(4)); err != nil {
		t.Fatal(err)
	}
	b := liveWriter(t, st, "b", 1)
	if !a.Resident() || a.Pending() == 0 {
		t.Fatalf("a released its log with %d events pending", a.Pending())
	}
	if m := st.LiveMemory(); m.Shed != 0 {
		t.Fatalf("a log was released while a was pending: %+v", m)
	}
	// a's flush makes it idle; b, used last, stays; then b's use releases a
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	held := a.Snapshot().Events
	if _, err := b.SnapshotContext(ctx); err != nil {
		t.Fatal(err)
	}
	if a.Resident() || !b.Resident() {
		t.Fatalf("after b's use: a resident %v, b resident %v; want a released, b resident", a.Resident(), b.Resident())
	}
	m := st.LiveMemory()
	if m.Resident != 1 || m.Shed == 0 || m.Bytes <= 0 {
		t.Fatalf("live memory %+v: want one resident log and a release counted", m)
	}
	if a.Pending() != 0 || st.Live("a") != a {
		t.Fatalf("the released engine is no longer a's live writer with nothing pending")
	}
	if r := a.Revision(); r.Durable != int64(len(held)) || r.Pending != 0 {
		t.Fatalf("released engine's revision %+v, want %d durable", r, len(held))
	}

	// the lease is kept: another Store cannot write a
	jb, err := jsonl.Open(root, jsonl.None)
	if err != nil {
		t.Fatal(err)
	}
	other := eventstore.New(jb)
	if _, err := other.Writer(ctx, "a"); eventstore.AsCommandError(err) == nil || eventstore.AsCommandError(err).Code != eventstore.CodeOwned {
		t.Fatalf("a second writer of the released session: %v; want %s", err, eventstore.CodeOwned)
	}

	// an append reads the log back and continues it
	reloaded := m.Reloaded
	if err := a.Accept(turnOf(5)); err != nil {
		t.Fatal(err)
	}
	if !a.Resident() || st.LiveMemory().Reloaded != reloaded+1 {
		t.Fatalf("the append did not read a's log back: resident %v, %+v", a.Resident(), st.LiveMemory())
	}
	snap := a.Snapshot()
	wantLog(t, "a's log before the release", snap.Events[:len(held)], held)
	if len(before) >= len(held) || len(snap.Events) != len(held)+len(turnOf(5)) || snap.Durable != len(held) {
		t.Fatalf("after the append: %d events, %d durable; want %d, %d", len(snap.Events), snap.Durable, len(held)+len(turnOf(5)), len(held))
	}
	for i, e := range snap.Events {
		if e.Seq != int64(i) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ins, err := other.Inspect(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	wantLog(t, "a on disk", ins.Events, snap.Events)
}

// TestIdleEngineReleasesAfterLiveIdle: with no budget, an engine idle for LiveIdle releases its log; one
// with events pending keeps it until they are durable. A view of the released engine reads it back.
func TestIdleEngineReleasesAfterLiveIdle(t *testing.T) {
	ctx := context.Background()
	st, _ := residentStore(t)
	st.LiveIdle = 20 * time.Millisecond
	w := liveWriter(t, st, "a", 2)
	if err := w.Accept(turnOf(3)); err != nil { // pending: no batch window, only Flush writes
		t.Fatal(err)
	}
	// b, idle and used after a, releases its log once its idle period has passed, so a's has too
	b := liveWriter(t, st, "b", 1)
	waitUntil(t, "the idle engine b to release its log", func() bool { return !b.Resident() })
	if !w.Resident() {
		t.Fatalf("the engine released its log with %d events pending", w.Pending())
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	want := w.Snapshot().Events
	waitUntil(t, "the idle engine to release its log", func() bool { return !w.Resident() })
	snap, err := w.SnapshotContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantLog(t, "the log read back", snap.Events, want)
}

// TestReleasedEngineFindsAForeignWrite: a write by another process while the engine's log is released is
// found when it is read back: the engine refuses writes until a rescan, and shows the artifact as it is.
func TestReleasedEngineFindsAForeignWrite(t *testing.T) {
	ctx := context.Background()
	st, root := residentStore(t)
	st.LiveIdle = time.Millisecond
	w := liveWriter(t, st, "a", 1)
	n := len(w.Snapshot().Events)
	token := w.Revision().Artifact
	waitUntil(t, "the idle engine to release its log", func() bool { return !w.Resident() })
	// a writer without the lease appends a line behind the engine's back
	matches, _ := filepath.Glob(filepath.Join(root, "*", "a", "session.jsonl"))
	if len(matches) != 1 {
		t.Fatalf("session a's artifact: %v", matches)
	}
	f, err := os.OpenFile(matches[0], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf(`{"type":"turn/start","seq":%d,"time":5,"data":{"turn":2}}`+"\n", n)
	if _, err := f.WriteString(line); err != nil {
		t.Fatal(err)
	}
	f.Close()
	snap, err := w.SnapshotContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Conflict == nil || snap.Conflict.Code != eventstore.CodeConflict || len(snap.Events) != n+1 {
		t.Fatalf("after a foreign write: conflict %v, %d events; want %s and %d", snap.Conflict, len(snap.Events), eventstore.CodeConflict, n+1)
	}
	if snap.Revision.Artifact == token {
		t.Fatalf("the snapshot of the changed artifact kept its old revision %s", token)
	}
	if err := w.Accept(turnOf(2)); eventstore.AsCommandError(err) == nil || eventstore.AsCommandError(err).Code != eventstore.CodeConflict {
		t.Fatalf("an append after the foreign write: %v; want %s", err, eventstore.CodeConflict)
	}
}

// TestReleasedEngineInAnOpenTurn: an engine idle inside an open turn (a writer waiting for its model)
// releases its log, reads it back without taking the open turn for a crash, and continues the turn.
func TestReleasedEngineInAnOpenTurn(t *testing.T) {
	ctx := context.Background()
	st, _ := residentStore(t)
	st.LiveBytes = 1
	w := liveWriter(t, st, "a", 1)
	open := turnOf(2)[:3] // turn/start, step/start, user/message
	if err := w.Accept(open); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	want := w.Snapshot().Events
	liveWriter(t, st, "b", 1) // b's use releases a's log
	if w.Resident() {
		t.Fatal("the idle engine kept its log over the budget")
	}
	if err := w.Accept(turnOf(2)[3:]); err != nil {
		t.Fatalf("continuing the open turn after the release: %v", err)
	}
	snap := w.Snapshot()
	if snap.Conflict != nil {
		t.Fatalf("the log read back was taken for another writer's: %v", snap.Conflict)
	}
	wantLog(t, "the open turn read back", snap.Events[:len(want)], want)
	if _, open := load.OpenTurn(snap.Events); open || len(snap.Events) != len(want)+len(turnOf(2))-3 {
		t.Fatalf("after the rest of the turn: %d events, open %v", len(snap.Events), open)
	}
}
