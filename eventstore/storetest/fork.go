package storetest

import (
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/eventtest"
)

// Forking a session at a boundary, and the progressive load a backend may report while it decodes.

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
