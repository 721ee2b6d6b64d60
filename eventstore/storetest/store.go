package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/eventtest"
)

// The store's own contract: creating, listing, reading and appending sessions within the limits,
// what a missing session and a revision answer, and the refusal of a log the harness does not accept
// (an unknown event type, damage in the committed region).

func testCreateListRead(t *testing.T, be Backend) {
	st, _ := open(t, be)
	if err := st.Create(ctx, header("a")); err != nil {
		t.Fatal(err)
	}
	l, err := st.List(ctx)
	if err != nil || len(l.Entries) != 1 || l.Entries[0].ID != "a" || l.Entries[0].Refusal != nil || l.Entries[0].Header == nil {
		t.Fatalf("list after create: %+v %v", l, err)
	}
	if e := l.Entries[0]; e.Revision == "" || e.ModTime.IsZero() {
		t.Errorf("listed entry lacks its revision or mtime: %+v", e)
	}
	p, err := st.ReadFrom(ctx, "a", 0)
	if err != nil || len(p.Events) != 0 || p.Header.ID != "a" {
		t.Fatalf("read of a header-only session: %+v %v", p, err)
	}
	ins, err := st.Inspect(ctx, "a")
	if err != nil || len(ins.Events) != 0 || string(ins.Header.Meta()) != string(header("a").Meta()) {
		t.Fatalf("inspect of a header-only session: %v", err)
	}
}

func testAppendBatches(t *testing.T, be Backend) {
	st, _ := open(t, be)
	if err := st.Create(ctx, header("a")); err != nil {
		t.Fatal(err)
	}
	log := turns(t, 3)
	for _, cut := range [][2]int{{0, 4}, {4, 9}, {9, 10}, {10, 27}} {
		if err := st.Append(ctx, "a", log[cut[0]:cut[1]]); err != nil {
			t.Fatal(err)
		}
	}
	p, err := st.ReadFrom(ctx, "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, "readFrom", p.Events, log)
	if p, _ = st.ReadFrom(ctx, "a", 20); len(p.Events) != 7 || p.Events[0].Seq != 20 {
		t.Errorf("readFrom(20): %d events", len(p.Events))
	}
	ins, err := st.Inspect(ctx, "a")
	if err != nil || len(ins.Closers) != 0 {
		t.Fatalf("inspect: %v closers %d", err, len(ins.Closers))
	}
	sameEvents(t, "inspect", ins.Events, log)
	// with the chunk rows a backend can keep packed kept so: the same events once expanded, and no hollow
	// event that no row stands for
	packed, err := st.InspectPacked(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	members := 0
	for _, r := range packed.Packed {
		members += r.Members
	}
	hollow := 0
	for _, e := range packed.Events {
		if e.IsHollow() {
			hollow++
		}
	}
	if hollow != members {
		t.Fatalf("inspect, rows kept packed: %d hollow events for %d rows of %d members", hollow, len(packed.Packed), members)
	}
	whole, err := event.Materialize(packed.Events, packed.Packed)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, "inspect, rows kept packed", whole, log)
	// a second Store (another process) reads the same log
	other := eventstore.New(st.Backend())
	if p, err := other.ReadFrom(ctx, "a", 0); err != nil || len(p.Events) != len(log) {
		t.Fatalf("another store reads %v", err)
	}
	// a batch whose first seq is not the next one is refused, and nothing is written
	err = st.Append(ctx, "a", log[3:4])
	mustFail(t, "append of a stale seq", err, eventstore.Invalid, eventstore.CodeBadInput)
}

func testCreateExisting(t *testing.T, be Backend) {
	st, _ := open(t, be)
	if err := st.Create(ctx, header("a")); err != nil {
		t.Fatal(err)
	}
	mustFail(t, "second create", st.Create(ctx, header("a")), eventstore.Exists, eventstore.CodeAlreadyExists)
	mustFail(t, "create of the empty id", st.Create(ctx, header("")), eventstore.Invalid, "")
}

// testCreateOverLimits: an id the harness could not keep (its directory name in a JSONL root over 255
// bytes, raw or once escaped) is refused by every backend, nothing created, so that every session can be
// converted, synced and backed up to a JSONL root; the longest id that fits is taken.
func testCreateOverLimits(t *testing.T, be Backend) {
	st, _ := open(t, be)
	for _, id := range []string{strings.Repeat("x", 256), strings.Repeat("x", 300), strings.Repeat("/", 60)} {
		mustFail(t, fmt.Sprintf("create of a %d-byte id", len(id)), st.Create(ctx, header(id)), eventstore.Invalid, eventstore.CodeBadInput)
		if _, err := st.ReadFrom(ctx, id, 0); !eventstore.IsNotFound(err) {
			t.Errorf("the refused %d-byte id was created: %v", len(id), err)
		}
	}
	longest := strings.Repeat("y", 255)
	if err := st.Create(ctx, header(longest)); err != nil {
		t.Errorf("create of a 255-byte id: %v", err)
	}
}

func testNotFound(t *testing.T, be Backend) {
	st, _ := open(t, be)
	if _, err := st.ReadFrom(ctx, "nope", 0); !eventstore.IsNotFound(err) {
		t.Errorf("readFrom of a missing session: %v", err)
	}
	if _, err := st.Stat(ctx, "nope", ""); !eventstore.IsNotFound(err) {
		t.Errorf("stat of a missing session: %v", err)
	}
	mustFail(t, "writer of a missing session", func() error { _, err := st.Writer(ctx, "nope"); return err }(), eventstore.Missing, "")
	_, err := st.Fork(ctx, "nope", nil, "child")
	mustFail(t, "fork of a missing session", err, eventstore.Missing, eventstore.CodeNotFound)
}

func testRevision(t *testing.T, be Backend) {
	st, _ := open(t, be)
	if err := st.Create(ctx, header("a")); err != nil {
		t.Fatal(err)
	}
	a1, err := st.Stat(ctx, "a", "")
	if err != nil || a1.Token == "" {
		t.Fatalf("stat: %+v %v", a1, err)
	}
	if again, _ := st.Stat(ctx, "a", ""); again.Token != a1.Token {
		t.Errorf("the revision changed without a write")
	}
	if err := st.Append(ctx, "a", turns(t, 1)); err != nil {
		t.Fatal(err)
	}
	a2, _ := st.Stat(ctx, "a", "")
	if a2.Token == a1.Token {
		t.Errorf("the revision did not change after an append")
	}
	w := st.Live("a")
	if w == nil {
		t.Fatal("the appending store does not hold the session live")
	}
	r1 := w.Revision()
	if err := w.AcceptEvents(eventtest.Log(t, append(turn(1), `plugin/note {} + "ignorable":true`)...)[9:]); err != nil {
		t.Fatal(err)
	}
	r2 := w.Revision()
	if r2 == r1 || r2.Pending != 1 || r2.Artifact != r1.Artifact {
		t.Errorf("logical revision after accepting one event: %+v -> %+v", r1, r2)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if r3 := w.Revision(); r3.Pending != 0 || r3.Durable != 10 || r3.Artifact == r2.Artifact {
		t.Errorf("logical revision after flush: %+v", r3)
	}
}

func testRefusals(t *testing.T, be Backend) {
	st, _ := open(t, be)
	b := st.Backend()
	if _, err := b.Materialize(ctx, header("unknown"), eventtest.Log(t, `plugin/x {}`)); err != nil {
		t.Fatal(err)
	}
	_, err := st.Inspect(ctx, "unknown")
	var u *eventstore.UnsupportedError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), `contains event type "plugin/x" (seq 0) unknown to this harness and not marked ignorable`) {
		t.Errorf("unknown type: %v", err)
	}
	mustFail(t, "writer of a refused session", func() error { _, err := st.Writer(ctx, "unknown"); return err }(), eventstore.Refused, eventstore.CodeRefused)
	// a seq gap followed by a turn/end is damage in the committed region, not a torn tail
	if _, err := b.Materialize(ctx, header("gap"), eventtest.Events(t, `{"type":"plugin/x","seq":1,"time":1,"data":{},"ignorable":true}`,
		`{"type":"turn/end","seq":2,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}`)); err != nil {
		t.Fatal(err)
	}
	// the texts differ by backend, as the harness's do: a JSONL line scan reports the gap, a SQLite row scan
	// the row that does not continue the seqs
	_, err = st.Inspect(ctx, "gap")
	if err == nil || eventstore.Classify(err) != eventstore.KindCorrupt ||
		!(strings.Contains(err.Error(), "seq gap") || strings.Contains(err.Error(), "invalid committed physical row at seq 1")) {
		t.Errorf("a log with a seq gap before a turn/end: %v", err)
	}
}
