package eventstore

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/eventtest"
	"github.com/dshfs/dshfs/internal/fixtures"
)

// turnRow is a Turn with Reason as JSON text, for readable table expectations.
type turnRow struct {
	N, Start, End int64
	Reason        string
}

func turnRows(ts []Turn) []turnRow {
	out := make([]turnRow, len(ts))
	for i, t := range ts {
		out[i] = turnRow{t.N, t.StartSeq, t.EndSeq, string(event.Stringify(t.Reason))}
	}
	return out
}

func seqsOf(events []event.Event) []int64 {
	out := make([]int64, len(events))
	for i, e := range events {
		out[i] = e.Seq
	}
	return out
}

func TestTurns(t *testing.T) {
	const (
		completed = `{"kind":"completed"}`
		aborted   = `{"kind":"aborted","reason":{"kind":"user"}}`
	)
	cases := []struct {
		name  string
		log   []string
		want  []turnRow
		views map[int64][]int64 // n -> seqs of TurnEvents(n); absent n -> not found
	}{
		{name: "empty log", log: nil, want: []turnRow{}},
		{
			name: "events between turns are in no turn",
			log: []string{
				`user/message {}`,
				`turn/start {"turn":1}`, `step/start {"turn":1,"step":1}`, `step/end {"turn":1,"step":1}`,
				`turn/end {"turn":1,"reason":` + completed + `}`,
				`command/run {}`, `compaction/start {}`, `compaction/end {}`, `command/done {}`,
				`turn/start {"turn":2}`, `turn/end {"turn":2,"reason":` + aborted + `}`,
				`session/title {}`,
			},
			want:  []turnRow{{1, 1, 4, completed}, {2, 9, 10, aborted}},
			views: map[int64][]int64{1: {1, 2, 3, 4}, 2: {9, 10}, 3: nil, 0: nil},
		},
		{
			name: "open turn runs to the end of the log",
			log: []string{
				`turn/start {"turn":1}`, `turn/end {"turn":1,"reason":` + completed + `}`,
				`turn/start {"turn":2}`, `step/start {"turn":2,"step":1}`, `tool/call {}`,
			},
			want:  []turnRow{{1, 0, 1, completed}, {2, 2, -1, "null"}},
			views: map[int64][]int64{1: {0, 1}, 2: {2, 3, 4}},
		},
		{
			// Never written by the harness; the earlier turn ends just before the intruding start.
			name: "turn/start while a turn is open",
			log: []string{
				`turn/start {"turn":1}`, `user/message {}`,
				`turn/start {"turn":2}`, `turn/end {"turn":2,"reason":` + completed + `}`,
			},
			want:  []turnRow{{1, 0, 1, "null"}, {2, 2, 3, completed}},
			views: map[int64][]int64{1: {0, 1}, 2: {2, 3}},
		},
		{
			// Brackets follow the log, not the numbers: a mismatched turn/end closes the open turn, and a
			// turn/end with nothing open is in no turn.
			name: "mismatched and stray turn/end",
			log: []string{
				`turn/start {"turn":1}`, `turn/end {"turn":7,"reason":` + completed + `}`,
				`turn/end {"turn":1,"reason":` + completed + `}`,
			},
			want:  []turnRow{{1, 0, 1, completed}},
			views: map[int64][]int64{1: {0, 1}, 7: nil},
		},
		{
			name: "duplicate numbers: both listed, first wins",
			log: []string{
				`turn/start {"turn":1}`, `turn/end {"turn":1,"reason":` + completed + `}`,
				`turn/start {"turn":1}`, `turn/end {"turn":1}`,
			},
			want:  []turnRow{{1, 0, 1, completed}, {1, 2, 3, "null"}},
			views: map[int64][]int64{1: {0, 1}},
		},
		{
			name: "unusable turn numbers",
			log: []string{
				`turn/start {"turn":"1"}`, `turn/end {"turn":1,"reason":` + completed + `}`,
				`turn/start {"turn":1.5}`, `turn/end {}`,
				`turn/start {"turn":-2}`, `turn/end {}`,
				`turn/start null`,
			},
			want:  []turnRow{{-1, 0, 1, completed}, {-1, 2, 3, "null"}, {-1, 4, 5, "null"}, {-1, 6, -1, "null"}},
			views: map[int64][]int64{-1: nil, 1: nil, -2: nil},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			events := eventtest.Log(t, c.log...)
			if got := turnRows(Turns(events)); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Turns = %+v\nwant    %+v", got, c.want)
			}
			for n, want := range c.views {
				got, ok := TurnEvents(events, n)
				if ok != (want != nil) || !reflect.DeepEqual(seqsOf(got), append([]int64{}, want...)) {
					t.Errorf("TurnEvents(%d) = %v, %v; want %v", n, seqsOf(got), ok, want)
				}
			}
		})
	}
}

// TurnEvents hands out a view of the log; appending to it must not scribble over the following events.
func TestTurnEventsCapped(t *testing.T) {
	events := eventtest.Log(t, `turn/start {"turn":1}`, `turn/end {"turn":1}`, `user/message {}`)
	got, ok := TurnEvents(events, 1)
	if !ok || len(got) != 2 {
		t.Fatalf("got %d events, %v", len(got), ok)
	}
	_ = append(got, events[0])
	if events[2].Type != "user/message" {
		t.Fatal("append through the turn view overwrote the log")
	}
}

func TestTurnsGolden(t *testing.T) {
	gen := fixtures.Path(t, "golden", "generated-raw")
	interrupted := `{"kind":"interrupted"}`
	completed := `{"kind":"completed"}`

	// Crash session: stored, turn 2 is open to the end of the log; under --inspect (events.jsonl) the
	// closers end it with turn/end interrupted.
	crash := filepath.Join(gen, "main-session-30628611-e45f-4f98-9688-010e1428e585")
	stored := eventtest.ReadFile(t, filepath.Join(crash, "stored.jsonl"))
	inspected := eventtest.ReadFile(t, filepath.Join(crash, "events.jsonl"))
	ts := Turns(stored)
	if len(ts) != 2 || ts[1].N != 2 || ts[1].EndSeq != -1 || ts[1].Reason.Kind != event.KindNull {
		t.Fatalf("stored crash turns = %+v", turnRows(ts))
	}
	open, ok := TurnEvents(stored, 2)
	if !ok || open[0].Seq != ts[1].StartSeq || open[len(open)-1].Seq != stored[len(stored)-1].Seq {
		t.Fatalf("open turn 2 = %v", seqsOf(open))
	}
	ts = Turns(inspected)
	last := inspected[len(inspected)-1]
	if len(ts) != 2 || ts[1].EndSeq != last.Seq || last.Type != "turn/end" || string(event.Stringify(ts[1].Reason)) != interrupted {
		t.Fatalf("inspected crash turns = %+v", turnRows(ts))
	}
	closed, _ := TurnEvents(inspected, 2)
	if !reflect.DeepEqual(seqsOf(closed[:len(open)]), seqsOf(open)) || len(closed) != len(open)+3 {
		t.Fatalf("closed turn 2 = %v (open was %v)", seqsOf(closed), seqsOf(open))
	}

	// Compaction session: a manual /compact (seqs 108..113) sits between turns 3 and 4, in no turn.
	comp := eventtest.ReadFile(t, filepath.Join(gen, "main-session-39ade10b-6855-483e-897d-dd835505a4e6", "events.jsonl"))
	want := []turnRow{{1, 0, 35, completed}, {2, 36, 69, completed}, {3, 70, 107, completed}, {4, 114, 142, completed}}
	if got := turnRows(Turns(comp)); !reflect.DeepEqual(got, want) {
		t.Fatalf("compaction session turns = %+v", got)
	}
	inTurn := map[int64]bool{}
	for n := int64(1); n <= 4; n++ {
		evs, ok := TurnEvents(comp, n)
		if !ok || evs[0].Type != "turn/start" || evs[len(evs)-1].Type != "turn/end" {
			t.Fatalf("turn %d: %v", n, seqsOf(evs))
		}
		for _, e := range evs {
			inTurn[e.Seq] = true
		}
	}
	for _, e := range comp {
		if between := e.Seq >= 108 && e.Seq <= 113; inTurn[e.Seq] == between {
			t.Errorf("seq %d (%s): in a turn = %v", e.Seq, e.Type, inTurn[e.Seq])
		}
	}
}

// Over every golden log (all balanced by --inspect): turns partition the bracketed events, every turn
// is closed, and numbering is 1, 2, 3, ...
func TestTurnsAllGolden(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(fixtures.Path(t, "golden"), "*", "*", "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 100 {
		t.Fatalf("only %d golden logs", len(paths))
	}
	turns := 0
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			continue
		}
		events := eventtest.ReadFile(t, p)
		for i, tr := range Turns(events) {
			turns++
			if tr.N != int64(i+1) || tr.EndSeq < tr.StartSeq || tr.Reason.Kind != event.KindObject {
				t.Fatalf("%s: turn %d = %+v", p, i, tr)
			}
			evs, ok := TurnEvents(events, tr.N)
			if !ok || evs[0].Seq != tr.StartSeq || evs[len(evs)-1].Seq != tr.EndSeq {
				t.Fatalf("%s: TurnEvents(%d) = %v", p, tr.N, seqsOf(evs))
			}
			for _, e := range evs[1 : len(evs)-1] {
				if e.Type == "turn/start" || e.Type == "turn/end" {
					t.Fatalf("%s: turn %d contains %s at %d", p, tr.N, e.Type, e.Seq)
				}
			}
		}
	}
	if turns < 100 {
		t.Fatalf("only %d turns in the golden logs", turns)
	}
}

// TestTurnScanInPieces: a turn scan fed a log in pieces — every split point of every prefix — lists the
// same turns and slices the same turn events as one pass (which turns_test checks against the harness's
// brackets): through an intruding turn/start, a turn/end with no open turn, a repeated and an unnamed
// turn number, and a turn left open.
func TestTurnScanInPieces(t *testing.T) {
	log := eventtest.Log(t,
		`user/message {}`, `turn/start {"turn":1}`, `step/start {"turn":1,"step":1}`, `turn/end {"turn":1,"reason":{"kind":"completed"}}`,
		`turn/end {"turn":9}`, `turn/start {"turn":2}`, `user/message {}`, `turn/start {"turn":3}`, `turn/end {"turn":3}`,
		`turn/start {"turn":2}`, `turn/end {"turn":2,"reason":"x"}`, `turn/start {"turn":"n"}`, `turn/end {}`,
		`turn/start {"turn":4}`, `step/start {"turn":4,"step":1}`,
	)
	for n := 0; n <= len(log); n++ {
		events := log[:n]
		var whole TurnScan
		whole.Add(events)
		for split := 0; split <= n; split++ {
			var s TurnScan
			s.Add(events[:split])
			s.Add(events[split:])
			if !reflect.DeepEqual(s.Turns(), whole.Turns()) {
				t.Fatalf("%d events split at %d: turns %+v, want %+v", n, split, s.Turns(), whole.Turns())
			}
			for turn := int64(-1); turn <= 5; turn++ {
				got, gok := s.TurnEvents(events, turn)
				want, wok := TurnEvents(events, turn)
				if gok != wok || len(got) != len(want) || (len(got) > 0 && got[0].Seq != want[0].Seq) {
					t.Fatalf("%d events split at %d: turn %d: %d events (%v), want %d (%v)", n, split, turn, len(got), gok, len(want), wok)
				}
			}
		}
	}
}
