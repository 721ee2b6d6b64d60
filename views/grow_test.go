package views

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/eventtest"
	"github.com/dshfs/dshfs/internal/storetest"
	"github.com/dshfs/dshfs/surface"
)

// lineageLog is a log a live session could hold, in the order its batches arrive: turns with tool calls
// (one left without a result), a compaction that stays open across a batch and ends failed, an edit that
// replaces a surface node, a resume's end-seed.
func lineageLog(t *testing.T) (events []event.Event, batches []int) {
	var specs []string
	cut := func() { batches = append(batches, len(specs)) }
	for n := 1; n <= 3; n++ {
		specs = append(specs,
			fmt.Sprintf(`turn/start {"turn":%d}`, n),
			fmt.Sprintf(`step/start {"turn":%d,"step":1}`, n),
			fmt.Sprintf(`user/message {"id":"u%d","role":"user","content":[{"type":"text","text":"q"}],"source":{"kind":"user"}} + "surfaceOp":"append"`, n),
			fmt.Sprintf(`tool/call {"turn":%d,"step":1,"callId":"c%d","name":"bash"}`, n, n))
		cut()
		if n != 2 {
			specs = append(specs, fmt.Sprintf(`tool/result {"turn":%d,"step":1,"message":{"id":"r%d","role":"user","content":[{"type":"text","text":"ok"}],"source":{"kind":"tool","callId":"c%d"}}} + "surfaceOp":"append"`, n, n, n))
		}
		specs = append(specs, fmt.Sprintf(`step/end {"turn":%d,"step":1}`, n), fmt.Sprintf(`turn/end {"turn":%d}`, n))
		cut()
	}
	specs = append(specs, `compaction/start {"compactionId":"k1","turn":null}`)
	cut()
	specs = append(specs, `compaction/end {"compactionId":"k1","turn":null,"error":"gave up"}`,
		`user/message {"id":"e","role":"user","content":[{"type":"text","text":"edited"}],"source":{"kind":"user"}} + "sourceEventSeqs":[2],"surfaceOp":{"op":"replace","start":2,"end":2}`)
	cut()
	specs = append(specs, `session/end-seed`, `turn/start {"turn":4}`)
	cut()
	return eventtest.Log(t, specs...), batches
}

// TestCarryAlongALineage: snapshots of one live lineage, each a batch longer, render status.json, turns/
// and the turn files exactly as a snapshot without a lineage (a whole scan) does — open turns, unknown
// outcomes, an active compaction and its end — while scanning each event once along the lineage and
// reading the compaction records again only after a batch that can change them.
func TestCarryAlongALineage(t *testing.T) {
	st := storetest.Raw(t)
	events, batches := lineageLog(t)
	engine := new(int) // any comparable value names a lineage
	snapshot := func(n int, lineage any) *Session {
		fold, err := surface.Fold(events[:n])
		if err != nil {
			t.Fatal(err)
		}
		s := FromSnapshot(st, eventstore.Snapshot{ID: "s", Header: event.Header{ID: "s", CreatedAt: 1}, Events: events[:n:n],
			Durable: n, Revision: eventstore.Revision{Artifact: fmt.Sprint(n)}, Fold: fold}, Options{})
		s.Lineage = lineage
		return s
	}
	var prev *Session
	lookups := 0
	for i, n := range batches {
		s := snapshot(n, engine)
		s.Continue(prev)
		got, want := s.Status(), snapshot(n, nil).Status()
		if !bytes.Equal(got, want) {
			t.Fatalf("batch %d (%d events): status.json\n%s\nwant\n%s", i, n, got, want)
		}
		if s.carry.scanned != n {
			t.Fatalf("batch %d: %d events scanned along the lineage, want each of the %d once", i, s.carry.scanned, n)
		}
		// turns/ and each turn's file, from the lineage's turn scan, read as from a whole scan
		whole := snapshot(n, nil)
		gotItems, err := s.Items(DirTurns)
		if err != nil {
			t.Fatal(err)
		}
		wantItems, _ := whole.Items(DirTurns)
		if !reflect.DeepEqual(gotItems, wantItems) {
			t.Fatalf("batch %d: turns/ lists %+v, want %+v", i, gotItems, wantItems)
		}
		for turn := int64(0); turn <= 5; turn++ {
			got, gerr := s.Render(context.Background(), Turn(turn))
			want, werr := whole.Render(context.Background(), Turn(turn))
			if !bytes.Equal(got, want) || (gerr == nil) != (werr == nil) {
				t.Fatalf("batch %d: turn %d reads %q (%v), want %q (%v)", i, turn, got, gerr, want, werr)
			}
		}
		if s.carry.turns.Len() != n {
			t.Fatalf("batch %d: the turn scan covers %d events, want %d", i, s.carry.turns.Len(), n)
		}
		lookups = s.carry.actives
		prev = s
	}
	// looked up: at the first batch, after the compaction's start, after its end (with the edit), after
	// the end-seed
	if lookups != 4 {
		t.Errorf("the active compaction was looked up %d times, want 4", lookups)
	}
	// a snapshot the carry has scanned past (it rendered nothing before a later one did) scans whole
	other := new(int)
	early, later := snapshot(batches[0], other), snapshot(batches[1], other)
	later.Continue(early)
	if early.carry != later.carry {
		t.Fatal("a later snapshot of the lineage did not take the earlier one's carry")
	}
	later.Status()
	if got, want := early.Status(), snapshot(batches[0], nil).Status(); !bytes.Equal(got, want) {
		t.Fatalf("a snapshot older than its carry: status.json\n%s\nwant\n%s", got, want)
	}
}
