package eventstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/eventtest"
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
// "decodes" them and compares with the checks run after the whole load (the public Inspect): error text
// and type, events, closers. A load that fails after reporting everything returns its own error,
// whatever the checks found. (Package load varies the checks' blocks and the surface failures.)
func TestProgressiveInspectMatchesWholeLoad(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 3))
	loadErr := errors.New("the load failed")
	cwd := event.String("/w")
	h := event.Header{ID: "s", CreatedAt: 1, Cwd: &cwd}
	logs := map[string][]event.Event{
		"balanced": eventtest.Log(t, `user/message {"id":"u","role":"user","content":[],"source":{"kind":"user"}} + "surfaceOp":"append"`,
			`turn/start {"turn":1}`, `step/start {"turn":1,"step":1}`, `step/end {"turn":1,"step":1}`, `turn/end {"turn":1,"reason":{"kind":"completed"}}`),
		"open turn": eventtest.Log(t, `turn/start {"turn":1}`, `step/start {"turn":1,"step":1}`),
		"bad seq":   eventtest.Events(t, `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`, `{"type":"turn/end","seq":5,"time":1,"data":{"turn":1}}`),
	}
	for name, stored := range logs {
		for range 20 {
			var rows []uint64
			for i := range stored {
				if i%64 == 0 {
					rows = append(rows, 0)
				}
			}
			wantEv, wantCl, wantErr := Inspect("s", h, stored, "/p")
			f := &progressiveFake{h: h, stored: stored, rows: rows, rng: rng}
			st := New(f)
			ins, err := st.Inspect(context.Background(), "s")
			var ev, cl []event.Event
			if err == nil {
				ev, cl = ins.Events[:len(ins.Events)-len(ins.Closers)], ins.Closers
			}
			if fmt.Sprint(err) != fmt.Sprint(wantErr) || fmt.Sprintf("%T", err) != fmt.Sprintf("%T", wantErr) {
				t.Fatalf("%s: error %T %v, want %T %v", name, err, err, wantErr, wantErr)
			}
			if !sameRaw(ev, wantEv) || !sameRaw(cl, wantCl) {
				t.Fatalf("%s: events %d+%d, want %d+%d", name, len(ev), len(cl), len(wantEv), len(wantCl))
			}
			f.fail = loadErr
			if _, err := st.Inspect(context.Background(), "s"); err != loadErr {
				t.Fatalf("%s: failed load: error %v, want the load's", name, err)
			}
		}
	}
}

// sameRaw reports whether two lists hold the same events, byte for byte.
func sameRaw(a, b []event.Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if string(a[i].Raw) != string(b[i].Raw) {
			return false
		}
	}
	return true
}
