package load

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
)

// feed reports stored to p in random steps, the row members with it, as a progressive backend's decode
// does, and then finishes it.
func feed(p *Progress, h event.Header, stored []event.Event, rowsWant []uint64, rng *rand.Rand) {
	p.Header(h, "/p")
	// the list grows through new arrays, as a scanner's does, and is reported at any length, and the
	// row words are set bit by bit as members arrive, so that a check reading a word before it is final
	// races with the writes (go test -race)
	var list []event.Event
	var rows []uint64
	for len(list) < len(stored) {
		n := min(len(stored), len(list)+1+rng.IntN(100))
		grown := make([]event.Event, len(list), n+rng.IntN(8))
		copy(grown, list)
		for i := len(list); i < n; i++ {
			for i/64 >= len(rows) {
				rows = append(rows, 0)
			}
			rows[i/64] |= rowsWant[i/64] & (1 << (i % 64))
		}
		list = append(grown, stored[len(list):n]...)
		p.Events(list, rows)
		// let the checks catch up and wait for more (not a wait for a condition: the result must be the
		// same at any speed; this only varies the interleavings)
		for range rng.IntN(4) {
			runtime.Gosched()
		}
	}
	p.Finish(h, "/p", stored, rowsWant)
}

// TestProgressiveInspectMatchesWholeLoad runs Inspect over a Progress that a load reports its events to as
// it "decodes" them, with blocks down to one event, and compares with the checks run after the whole
// load: error text and type, events, closers.
func TestProgressiveInspectMatchesWholeLoad(t *testing.T) {
	defer func(n int) { checkBlock = n }(checkBlock)
	rng := rand.New(rand.NewPCG(7, 3))
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
		wantEv, wantCl, wantErr := inspectWith("s", vHeader("s"), stored, "/p", failingSurface{at: failAt})
		for _, block := range []int{1, 3, 64, 16384} {
			checkBlock = block
			where := fmt.Sprintf("round %d, block %d, log:\n%s", round, block, strings.Join(lines, "\n"))
			p := NewProgress()
			go feed(p, vHeader("s"), stored, rows, rand.New(rand.NewPCG(uint64(round), uint64(block))))
			ev, cl, err := Inspect("s", p, failingSurface{at: failAt}, nil)
			if err != nil {
				err = inspectError("s", err)
			}
			sameResult(t, "Inspect", where, ev, cl, err, wantEv, wantCl, wantErr)
		}
	}
}
