// Package storetest is the backend contract suite (docs/architecture.md#the-store-seam): one set of
// tests that every storage backend must pass through the eventstore seam — listing, reading, inspecting, creating, appending,
// revisions, torn tails, refusals, the session engine, the writer lock, conflicts with a foreign writer,
// resume and fork. A backend's own test calls Run with a way to open it; the suite never looks at files.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/eventtest"
)

// Backend describes a backend to the suite.
type Backend struct {
	// Open opens the backend over a store at dir (an empty directory the first time). Opening the same dir
	// twice must give two independent instances over one store, as two processes would have.
	Open func(t *testing.T, dir string) eventstore.Backend
	// Tear damages the end of a session's stored log the way a crash mid-write does (a partial record
	// after the last complete one).
	Tear func(t *testing.T, b eventstore.Backend, id string)
}

// Run runs the contract suite.
func Run(t *testing.T, be Backend) {
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, be Backend)
	}{
		{"CreateListRead", testCreateListRead},
		{"AppendBatches", testAppendBatches},
		{"CreateExisting", testCreateExisting},
		{"CreateOverLimits", testCreateOverLimits},
		{"NotFound", testNotFound},
		{"Revision", testRevision},
		{"Refusals", testRefusals},
		{"EngineAcceptFlush", testEngineAcceptFlush},
		{"EngineAllOrNothing", testEngineAllOrNothing},
		{"WriteBehindBatch", testWriteBehindBatch},
		{"NoImplicitRepair", testNoImplicitRepair},
		{"TornTail", testTornTail},
		{"CompactionLock", testCompactionLock},
		{"WriterLock", testWriterLock},
		{"ForeignWriter", testForeignWriter},
		{"Fork", testFork},
		{"ProgressiveLoad", testProgressiveLoad},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, be)
		})
	}
}

var ctx = context.Background()

func header(id string) event.Header {
	cwd := event.String("/srv/contract")
	return event.Header{ID: id, CreatedAt: 1700000000000, Cwd: &cwd}
}

// turn is one complete turn numbered n starting at seq base, in the eventtest.Log spec syntax.
func turn(n int) []string {
	return []string{
		fmt.Sprintf(`turn/start {"turn":%d}`, n),
		fmt.Sprintf(`step/start {"turn":%d,"step":1}`, n),
		fmt.Sprintf(`user/message {"id":"u%d","role":"user","content":[{"type":"text","text":"q%d"}],"source":{"kind":"user"}} + "surfaceOp":"append"`, n, n),
		fmt.Sprintf(`assistant/chunk {"turn":%d,"step":1,"chunk":{"type":"text-delta","index":0,"text":"a"}}`, n),
		fmt.Sprintf(`assistant/chunk {"turn":%d,"step":1,"chunk":{"type":"text-delta","index":0,"text":"b"}}`, n),
		fmt.Sprintf(`assistant/chunk {"turn":%d,"step":1,"chunk":{"type":"text-delta","index":0,"text":"c"}}`, n),
		fmt.Sprintf(`assistant/message {"turn":%d,"step":1,"message":{"id":"a%d","role":"assistant","content":[{"type":"text","text":"abc"}],"source":{"kind":"model","provider":"p","model":"m"}}} + "surfaceOp":"append"`, n, n),
		fmt.Sprintf(`step/end {"turn":%d,"step":1}`, n),
		fmt.Sprintf(`turn/end {"turn":%d,"reason":{"kind":"completed"}}`, n),
	}
}

// turns is a log of n complete turns.
func turns(t *testing.T, n int) []event.Event {
	var specs []string
	for i := 1; i <= n; i++ {
		specs = append(specs, turn(i)...)
	}
	return eventtest.Log(t, specs...)
}

func open(t *testing.T, be Backend) (*eventstore.Store, string) {
	dir := t.TempDir()
	st := eventstore.New(be.Open(t, dir))
	t.Cleanup(func() { st.Close(ctx) })
	return st, dir
}

// live opens a fresh store holding one created session, live in a writer.
func live(t *testing.T, be Backend, id string) (*eventstore.Store, *eventstore.Session) {
	t.Helper()
	st, _ := open(t, be)
	if err := st.Create(ctx, header(id)); err != nil {
		t.Fatal(err)
	}
	w, err := st.Writer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return st, w
}

func mustFail(t *testing.T, what string, err error, f eventstore.Failure, code string) {
	t.Helper()
	ce := eventstore.AsCommandError(err)
	if ce == nil || ce.Failure != f || (code != "" && ce.Code != code) {
		t.Fatalf("%s: got %v, want failure %s code %s", what, err, f, code)
	}
}

func sameEvents(t *testing.T, what string, got, want []event.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i := range got {
		if string(got[i].Raw) != string(want[i].Raw) {
			t.Fatalf("%s: event %d\n got %s\nwant %s", what, i, got[i].Raw, want[i].Raw)
		}
	}
}

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

func testEngineAcceptFlush(t *testing.T, be Backend) {
	st, w := live(t, be, "a")
	in := [][]byte{
		[]byte(`{"type":"turn/start","data":{"turn":1}}`),
		[]byte(`{"type":"user/message","seq":1,"time":5,"data":{"id":"u","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}`),
		[]byte(`{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}`),
	}
	if err := w.Accept(in); err != nil {
		t.Fatal(err)
	}
	snap := w.Snapshot()
	if len(snap.Events) != 3 || snap.Durable != 0 || len(snap.Fold.Nodes) != 1 {
		t.Fatalf("snapshot after accept: %d events, %d durable, surface %v", len(snap.Events), snap.Durable, snap.Fold.Nodes)
	}
	if got := string(snap.Events[1].Raw); !strings.HasPrefix(got, `{"type":"user/message","seq":1,"time":5,"data":`) || !strings.HasSuffix(got, `,"surfaceOp":"append"}`) {
		t.Errorf("encoded event %s", got)
	}
	if p, _ := st.ReadFrom(ctx, "a", 0); len(p.Events) != 0 {
		t.Errorf("accepted events reached the store before a flush")
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p, _ := st.ReadFrom(ctx, "a", 0)
	sameEvents(t, "after flush", p.Events, snap.Events)
	if err := w.Close(ctx); err != nil || st.Live("a") != nil {
		t.Fatalf("close: %v", err)
	}
}

func testEngineAllOrNothing(t *testing.T, be Backend) {
	st, w := live(t, be, "a")
	good := []byte(`{"type":"user/message","data":{"id":"u","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}`)
	bad := []byte(`{"type":"user/message","data":{"id":"v","role":"user","content":[{"type":"text","text":"x"}],"source":{"kind":"user"}},"surfaceOp":{"op":"replace","start":7,"end":7}}`)
	err := w.Accept([][]byte{good, bad})
	mustFail(t, "a replace of a seq not on the surface", err, eventstore.Invalid, eventstore.CodeBadInput)
	if ce := eventstore.AsCommandError(err); ce.Line != 2 {
		t.Errorf("the error names line %d, want 2", ce.Line)
	}
	if s := w.Snapshot(); len(s.Events) != 0 || len(s.Fold.Nodes) != 0 {
		t.Fatalf("a rejected request left %d events, surface %v", len(s.Events), s.Fold.Nodes)
	}
	if err := w.Accept([][]byte{good}); err != nil {
		t.Fatalf("the fold was not restored after the rejection: %v", err)
	}
	st.MaxLine = int64(len(good)) // a line one byte longer is refused, whoever writes it
	err = w.Accept([][]byte{good, append([]byte(" "), good...)})
	mustFail(t, "a line over the store's MaxLine", err, eventstore.Invalid, eventstore.CodeBadInput)
	if ce := eventstore.AsCommandError(err); ce.Line != 2 || !strings.Contains(ce.Message, "max_line_bytes") {
		t.Errorf("over-long line: %v (line %d)", ce, ce.Line)
	}
}

func testWriteBehindBatch(t *testing.T, be Backend) {
	st, _ := open(t, be)
	st.Window = 20 * time.Millisecond
	if err := st.Create(ctx, header("a")); err != nil {
		t.Fatal(err)
	}
	w, err := st.Writer(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AcceptEvents(turns(t, 1)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for w.Pending() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the write-behind batch never ran")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if p, _ := st.ReadFrom(ctx, "a", 0); len(p.Events) != 9 {
		t.Errorf("after the batch window: %d durable events", len(p.Events))
	}
}

// crashed writes a log that ends inside turn 2 with an unanswered tool call.
func crashed(t *testing.T, st *eventstore.Store, id string) []event.Event {
	log := eventtest.Log(t, append(turn(1),
		`turn/start {"turn":2}`,
		`step/start {"turn":2,"step":1}`,
		`assistant/message {"turn":2,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}}} + "surfaceOp":"append"`,
		`tool/call {"turn":2,"step":1,"callId":"c1","name":"bash","arguments":"{}"}`)...)
	if _, err := st.Backend().Materialize(ctx, header(id), log); err != nil {
		t.Fatal(err)
	}
	return log
}

func testNoImplicitRepair(t *testing.T, be Backend) {
	st, _ := open(t, be)
	log := crashed(t, st, "a")
	err := st.Append(ctx, "a", eventtest.Events(t, fmt.Sprintf(`{"type":"plugin/x","seq":%d,"time":1,"data":{},"ignorable":true}`, len(log))))
	mustFail(t, "append to a crashed session", err, eventstore.Busy, eventstore.CodeOpenTurn)
	if p, _ := st.ReadFrom(ctx, "a", 0); len(p.Events) != len(log) {
		t.Fatalf("the refused append changed the log")
	}
	w, err := st.Resume(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	snap := w.Snapshot()
	var types []string
	for _, e := range snap.Events[len(log):] {
		types = append(types, e.Type)
	}
	if strings.Join(types, " ") != "tool/result step/end turn/end session/end-seed" {
		t.Errorf("resume appended %v", types)
	}
	if snap.Durable != len(snap.Events) {
		t.Errorf("resume left %d events pending", len(snap.Events)-snap.Durable)
	}
	// resuming again appends nothing: the log already ends with its end-seed
	if _, err := st.Resume(ctx, "a"); err != nil || len(w.Snapshot().Events) != len(snap.Events) {
		t.Errorf("a second resume: %v", err)
	}
}

func testTornTail(t *testing.T, be Backend) {
	st, _ := open(t, be)
	log := turns(t, 1)
	if _, err := st.Backend().Materialize(ctx, header("a"), log); err != nil {
		t.Fatal(err)
	}
	be.Tear(t, st.Backend(), "a")
	p, err := st.ReadFrom(ctx, "a", 0)
	if err != nil || p.Torn == nil {
		t.Fatalf("a torn log: %v torn %+v", err, p)
	}
	sameEvents(t, "the committed prefix", p.Events, log)
	mustFail(t, "a writer over torn bytes", func() error { _, err := st.Writer(ctx, "a"); return err }(), eventstore.Busy, eventstore.CodeTornTail)
	if _, err := st.Resume(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	p, err = st.ReadFrom(ctx, "a", 0)
	if err != nil || p.Torn != nil || len(p.Events) != len(log)+1 || p.Events[len(log)].Type != "session/end-seed" {
		t.Fatalf("after resume: %v torn %+v, %d events", err, p.Torn, len(p.Events))
	}
}

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

func testFork(t *testing.T, be Backend) {
	st, _ := open(t, be)
	if err := st.Create(ctx, header("p")); err != nil {
		t.Fatal(err)
	}
	log := turns(t, 2)
	if err := st.Append(ctx, "p", log); err != nil {
		t.Fatal(err)
	}
	w := st.Live("p")
	pending := eventtest.Log(t, append(append(turn(1), turn(2)...), `turn/start {"turn":3}`)...)[18:]
	if err := w.AcceptEvents(pending); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		boundary *int64
		failure  eventstore.Failure
		code     string
		text     string
	}{
		{seq(-1), eventstore.Invalid, eventstore.CodeInvalidBoundary, `fork boundary for session "p" must be a non-negative safe integer, got -1`},
		{seq(event.MaxSafeInteger + 1), eventstore.Invalid, eventstore.CodeInvalidBoundary, `fork boundary for session "p" must be a non-negative safe integer, got 9007199254740992`},
		{seq(19), eventstore.Invalid, eventstore.CodeInvalidBoundary, `fork boundary 19 does not exist in session "p" (last seq: 18)`},
		{seq(3), eventstore.Invalid, eventstore.CodeOpenTurn, `fork boundary 3 in session "p" ends inside open turn 1`},
		{nil, eventstore.Invalid, eventstore.CodeOpenTurn, `fork boundary 18 in session "p" ends inside open turn 3`},
	} {
		_, err := st.Fork(ctx, "p", c.boundary, "c")
		mustFail(t, "fork: "+c.text, err, c.failure, c.code)
		if err.Error() != c.text {
			t.Errorf("fork: %q, want %q", err, c.text)
		}
	}
	if _, err := st.Stat(ctx, "c", ""); !eventstore.IsNotFound(err) {
		t.Fatalf("a refused fork left a child: %v", err)
	}
	child, err := st.Fork(ctx, "p", seq(17), "c")
	if err != nil || child != "c" {
		t.Fatalf("fork: %q %v", child, err)
	}
	if w.Pending() != 0 {
		t.Errorf("the parent was not flushed before the fork")
	}
	ins, err := st.Inspect(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, "child prefix", ins.Events[:18], log)
	if len(ins.Events) != 19 || ins.Events[18].Type != "session/end-seed" {
		t.Fatalf("child: %d events", len(ins.Events))
	}
	h := ins.Header
	if h.ParentSession == nil || h.ParentSession.Str != "p" || h.SeedLength == nil || h.SeedLength.Num != 18 || h.Cwd == nil || h.Cwd.Str != "/srv/contract" {
		t.Errorf("child header %s", h.Meta())
	}
	_, err = st.Fork(ctx, "p", seq(8), "c")
	mustFail(t, "fork to an existing child", err, eventstore.Exists, eventstore.CodeAlreadyExists)
	id, err := st.Fork(ctx, "p", seq(8), "")
	if err != nil || len(id) != 36 || id[14] != '4' {
		t.Errorf("fork with a default child id: %q %v", id, err)
	}
}

// testProgressiveLoad: a backend that reports a load's events as it decodes them reports a header first,
// then prefixes of what the load returns, for an intact log and a torn one; and Inspect, which checks
// what it reports while the load goes on, finds what checking the loaded prefix afterwards finds.
func testProgressiveLoad(t *testing.T, be Backend) {
	st, _ := open(t, be)
	pb, ok := st.Backend().(eventstore.ProgressiveBackend)
	if !ok {
		// both backends of this project are (Store.Inspect checks a load while it decodes): a backend that
		// is not loses that, which this suite reports rather than passes over
		t.Fatalf("%T is not an eventstore.ProgressiveBackend", st.Backend())
	}
	log := turns(t, 400)
	for _, id := range []string{"intact", "torn"} {
		if _, err := st.Backend().Materialize(ctx, header(id), log); err != nil {
			t.Fatal(err)
		}
	}
	be.Tear(t, st.Backend(), "torn")
	for _, id := range []string{"intact", "torn"} {
		want, err := st.Backend().LoadStored(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		rec := &ProgressRecorder{}
		got, err := pb.LoadStoredProgress(ctx, id, rec)
		if err != nil {
			t.Fatal(err)
		}
		sameEvents(t, id+": the progressive load", got.Events, want.Events)
		if (got.Torn == nil) != (id == "intact") {
			t.Fatalf("%s: torn %+v", id, got.Torn)
		}
		rec.Check(t, id, got)

		ins, err := st.Inspect(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		events, closers, err := eventstore.Inspect(id, want.Header, want.Events, want.Path)
		if err != nil {
			t.Fatal(err)
		}
		sameEvents(t, id+": the inspected events", ins.Events, append(events, closers...))
	}
}

// seq is a fork boundary.
func seq(n int64) *int64 { return &n }
