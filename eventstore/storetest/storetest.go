// Package storetest is the backend contract suite (docs/architecture.md#the-store-seam): one set of
// tests that every storage backend must pass through the eventstore seam — listing, reading, inspecting, creating, appending,
// revisions, torn tails, refusals, the session engine, the writer lock, conflicts with a foreign writer,
// resume and fork. A backend's own test calls Run with a way to open it; the suite never looks at files.
package storetest

import (
	"context"
	"fmt"
	"testing"

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
