package eventstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
)

// progressiveFake is a backend that reports its stored log to the checks in random steps, the row
// members with it, and then returns it or fails.
type progressiveFake struct {
	Backend // nil: only the load is used
	h       event.Header
	stored  []event.Event
	rows    []uint64
	rng     *rand.Rand
	fail    error // returned after everything was reported
}

func (f *progressiveFake) LoadStored(ctx context.Context, id string) (*Prefix, error) {
	return f.LoadStoredProgress(ctx, id, nil)
}

func (f *progressiveFake) LoadStoredProgress(ctx context.Context, id string, p ProgressSink) (*Prefix, error) {
	if p != nil {
		p.Header(f.h, "/p")
		// the list grows through new arrays, as a scanner's does, and is reported at any length
		// and the row words are set bit by bit as members arrive, so that a check reading a word before
		// it is final races with the writes (go test -race)
		var list []event.Event
		var rows []uint64
		for len(list) < len(f.stored) {
			n := min(len(f.stored), len(list)+1+f.rng.IntN(100))
			grown := make([]event.Event, len(list), n+f.rng.IntN(8))
			copy(grown, list)
			for i := len(list); i < n; i++ {
				for i/64 >= len(rows) {
					rows = append(rows, 0)
				}
				rows[i/64] |= f.rows[i/64] & (1 << (i % 64))
			}
			list = append(grown, f.stored[len(list):n]...)
			p.Events(list, rows)
			// let the checks catch up and wait for more (not a wait for a condition: the result must be
			// the same at any speed; this only varies the interleavings)
			for range f.rng.IntN(4) {
				runtime.Gosched()
			}
		}
	}
	if f.fail != nil {
		return nil, f.fail
	}
	return &Prefix{Header: f.h, Events: f.stored, RowMembers: f.rows, Path: "/p"}, nil
}

// TestProgressiveInspectMatchesWholeLoad runs Store.Inspect over a backend that reports its events as it
// "decodes" them, with blocks down to one event, and compares with the checks run after the whole load
// (the public Inspect): error text and type, events, closers. A load that fails after reporting
// everything returns its own error, whatever the checks found.
func TestProgressiveInspectMatchesWholeLoad(t *testing.T) {
	defer func(n int) { checkBlock = n }(checkBlock)
	rng := rand.New(rand.NewPCG(7, 3))
	loadErr := errors.New("the load failed")
	for round := range 300 {
		lines := randomTurns(rng, 1+rng.IntN(40)) // a block waits for the 64 events its row words cover
		stored := vEvents(t, lines...)
		var rows []uint64 // some of the events a chunk row's member could be (rowMember)
		for i, e := range stored {
			for i/64 >= len(rows) {
				rows = append(rows, 0)
			}
			member := e.Type == "assistant/chunk" && e.Seq == int64(i) && plainEnvelope(e) && !markers(e)
			if member && rng.IntN(2) == 0 {
				rows[i/64] |= 1 << (i % 64)
			}
		}
		failAt := int64(-1)
		if rng.IntN(4) == 0 {
			failAt = int64(rng.IntN(len(lines) + 2))
		}
		newSC := func() surfaceCheck { return failingSurface{at: failAt} }
		wantEv, wantCl, wantErr := inspectWith("s", vHeader("s"), stored, "/p", newSC())
		for _, block := range []int{1, 3, 64, 16384} {
			checkBlock = block
			where := fmt.Sprintf("round %d, block %d, log:\n%s", round, block, strings.Join(lines, "\n"))
			f := &progressiveFake{h: vHeader("s"), stored: stored, rows: rows, rng: rng}
			st := New(f)
			st.newSurface = newSC
			ins, err := st.Inspect(context.Background(), "s")
			var ev, cl []event.Event
			if err == nil {
				ev, cl = ins.Events[:len(ins.Events)-len(ins.Closers)], ins.Closers
			}
			sameResult(t, "Store.Inspect", where, ev, cl, err, wantEv, wantCl, wantErr)

			f.fail = loadErr
			if _, err := st.Inspect(context.Background(), "s"); err != loadErr {
				t.Fatalf("failed load: error %v, want the load's (%s)", err, where)
			}
		}
	}
}
