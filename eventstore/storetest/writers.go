package storetest

import (
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/internal/eventtest"
)

// Who may write: the compaction lock, the writer lock between two instances over one store, and
// conflicts with a writer outside the engine.

func testCompactionLock(t *testing.T, be Backend) {
	st, _ := open(t, be)
	log := eventtest.Log(t, append(turn(1), `compaction/start {"compactionId":"c1","turn":null}`)...)
	if _, err := st.Backend().Materialize(ctx, header("a"), log); err != nil {
		t.Fatal(err)
	}
	mustFail(t, "a writer while a compaction lock is held", func() error { _, err := st.Writer(ctx, "a"); return err }(), eventstore.Busy, eventstore.CodeCompactionLock)
	if _, err := st.Resume(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Writer(ctx, "a"); err != nil {
		t.Errorf("after resume the stale start still blocks writers: %v", err)
	}
}

func testWriterLock(t *testing.T, be Backend) {
	a, dir := open(t, be)
	if err := a.Create(ctx, header("s")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Writer(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	b := eventstore.New(be.Open(t, dir)) // another process over the same store
	defer b.Close(ctx)
	code := eventstore.CodeLocked
	if _, leased := b.Backend().(eventstore.Leaser); leased {
		code = eventstore.CodeOwned // the harness's lease is taken first, and refuses first
	}
	mustFail(t, "a second writer", func() error { _, err := b.Writer(ctx, "s"); return err }(), eventstore.Busy, code)
	mustFail(t, "a second resume", func() error { _, err := b.Resume(ctx, "s"); return err }(), eventstore.Busy, code)
	if _, err := b.ReadFrom(ctx, "s", 0); err != nil {
		t.Errorf("reads need no lock: %v", err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Writer(ctx, "s"); err != nil {
		t.Errorf("after the holder released: %v", err)
	}
}

func testForeignWriter(t *testing.T, be Backend) {
	st, dir := open(t, be)
	if err := st.Create(ctx, header("s")); err != nil {
		t.Fatal(err)
	}
	log := turns(t, 2)
	if err := st.Append(ctx, "s", log[:9]); err != nil {
		t.Fatal(err)
	}
	// events accepted, then a foreign writer that takes no lock (the harness) appends through its own
	// backend instance before they are written
	w := st.Live("s")
	if err := w.AcceptEvents(log[9:]); err != nil {
		t.Fatal(err)
	}
	foreign := be.Open(t, dir)
	art, err := foreign.Stat(ctx, "s", "")
	if err != nil {
		t.Fatal(err)
	}
	extra := eventtest.Events(t, `{"type":"plugin/foreign","seq":9,"time":1,"data":{},"ignorable":true}`)
	if _, err := foreign.AppendBatch(ctx, header("s"), art, extra, nil); err != nil {
		t.Fatal(err)
	}
	err = w.Flush(ctx)
	mustFail(t, "a flush after a foreign write", err, eventstore.Busy, eventstore.CodeConflict)
	if !strings.Contains(err.Error(), "9 accepted events (seq 9..17) were not written and are kept in ") {
		t.Errorf("the conflict does not say where the pending events are: %v", err)
	}
	p, err := eventstore.New(foreign).ReadFrom(ctx, "s", 0)
	if err != nil || len(p.Events) != 10 || p.Events[9].Type != "plugin/foreign" {
		t.Fatalf("the store after the refused flush: %v, %d events", err, len(p.Events))
	}
	mustFail(t, "accept after the conflict", w.AcceptEvents(nil), eventstore.Busy, eventstore.CodeConflict)
	if n := st.Rescan(); n != 1 || st.Live("s") != nil {
		t.Fatalf("rescan released %d", n)
	}
	if err := st.Append(ctx, "s", eventtest.Log(t, append(make([]string, 10), turn(2)...)...)[10:]); err != nil {
		t.Errorf("after rescan: %v", err)
	}
}
