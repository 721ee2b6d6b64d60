package eventstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
)

// TestPrefixScan drives the committed-prefix rule (spec/jsonl.md §5.4) line by line: what is kept, what is
// remembered, and when the remembered damage is thrown.
func TestPrefixScan(t *testing.T) {
	ev := func(typ string, seq int64) event.Event {
		return event.Event{Raw: []byte(fmt.Sprintf(`{"type":%q,"seq":%d}`, typ, seq)), Type: typ, Seq: seq}
	}
	type line struct {
		events []event.Event
		row    bool
		bad    bool // does not decode
	}
	one := func(typ string, seq int64) line { return line{events: []event.Event{ev(typ, seq)}} }
	row := func(from, to int64) line {
		l := line{row: true}
		for s := from; s < to; s++ {
			l.events = append(l.events, ev("assistant/chunk", s))
		}
		return l
	}
	bad := line{bad: true}
	cases := []struct {
		name  string
		lines []line
		kept  []bool
		keep  int    // events kept
		rows  []int  // of them, the row members
		issue string // the remembered damage ("" none)
		fail  int    // 1-based line whose Take fails with the issue (0: none)
	}{
		{"clean", []line{one("turn/start", 0), row(1, 4), one("turn/end", 4)},
			[]bool{true, true, true}, 5, []int{1, 2, 3}, "", 0},
		{"unparsable tail", []line{one("turn/start", 0), bad, one("assistant/chunk", 1)},
			[]bool{true, false, false}, 1, nil, "unparsable committed event at line 2", 0},
		{"unparsable before a turn/end", []line{one("turn/start", 0), bad, one("turn/end", 1)},
			[]bool{true, false, false}, 1, nil, "unparsable committed event at line 2", 3},
		{"seq gap", []line{one("turn/start", 0), one("step/start", 2), one("turn/end", 3)},
			[]bool{true, false, false}, 1, nil, "seq gap in committed region at line 2 (expected 1, got 2)", 3},
		{"gap on a turn/end's own line", []line{one("turn/start", 0), one("turn/end", 5)},
			[]bool{true, false}, 1, nil, "seq gap in committed region at line 2 (expected 1, got 5)", 2},
		{"gap inside a row", []line{one("turn/start", 0), {events: []event.Event{ev("assistant/chunk", 1), ev("assistant/chunk", 3)}, row: true}},
			[]bool{true, false}, 1, nil, "seq gap in committed region at line 2 (expected 2, got 3)", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var p PrefixScan
			for i, l := range tc.lines {
				var decodeErr error
				if l.bad {
					decodeErr = errors.New("not JSON")
				}
				kept, err := p.Take(l.events, l.row, decodeErr)
				if kept != tc.kept[i] {
					t.Errorf("line %d kept = %v, want %v", i+1, kept, tc.kept[i])
				}
				if wantFail := i+1 == tc.fail; (err != nil) != wantFail || (err != nil && err != p.Issue) {
					t.Errorf("line %d: Take error %v, want the issue: %v", i+1, err, wantFail)
				}
			}
			if len(p.Events) != tc.keep {
				t.Errorf("kept %d events, want %d", len(p.Events), tc.keep)
			}
			for i := range p.Events {
				member := i/64 < len(p.Rows) && p.Rows[i/64]&(1<<(i%64)) != 0
				want := false
				for _, r := range tc.rows {
					want = want || r == i
				}
				if member != want {
					t.Errorf("event %d row member = %v, want %v", i, member, want)
				}
			}
			if got := fmt.Sprint(p.Issue); (tc.issue == "") != (p.Issue == nil) || !strings.Contains(got, tc.issue) {
				t.Errorf("issue %v, want %q", p.Issue, tc.issue)
			}
		})
	}

	// a streaming scan resumed at seq 10 keeps its place and nothing else
	st := PrefixScan{Stream: true, Next: 10, Line: 4}
	for _, l := range []line{one("turn/start", 10), row(11, 14)} {
		if kept, err := st.Take(l.events, l.row, nil); !kept || err != nil {
			t.Fatalf("resumed scan: kept %v, %v", kept, err)
		}
	}
	if kept, _ := st.Take([]event.Event{ev("turn/end", 15)}, false, nil); kept || st.Next != 14 || st.Line != 7 ||
		len(st.Events) != 0 || len(st.Rows) != 0 || !strings.Contains(fmt.Sprint(st.Issue), "at line 7 (expected 14, got 15)") {
		t.Errorf("resumed scan: kept %v, next %d, line %d, %d events, %d row words, issue %v",
			kept, st.Next, st.Line, len(st.Events), len(st.Rows), st.Issue)
	}

	// the budget refuses the line that passes it
	p := PrefixScan{Budget: Budget{Limit: 2 * EventOverhead}}
	if _, err := p.Take([]event.Event{ev("turn/start", 0)}, false, nil); err != nil {
		t.Fatal(err)
	}
	var tooLarge *TooLargeError
	if _, err := p.Take([]event.Event{ev("turn/end", 1)}, false, nil); !errors.As(err, &tooLarge) {
		t.Errorf("over the budget: %v, want a *TooLargeError", err)
	}
}
