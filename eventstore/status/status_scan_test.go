package status

import (
	"reflect"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/load"
	"github.com/dshfs/dshfs/internal/eventtest"
)

// naiveUnknown is the unknown-outcome rule as a whole pass over the log (what status.json reported before
// the rule was kept event by event): every call id in the order first seen, each at its last tool/call,
// unless a real result settled it.
func naiveUnknown(events []event.Event) []UnknownOutcome {
	type state struct {
		u       UnknownOutcome
		settled bool
	}
	var order []string
	calls := map[string]*state{}
	for _, e := range events {
		rec, err := e.Record()
		if err != nil {
			continue
		}
		data, _ := rec.Get("data")
		switch e.Type {
		case "tool/call":
			id, ok := data.Get("callId")
			if !ok || id.Kind != event.KindString {
				continue
			}
			turn, _ := data.Get("turn")
			step, _ := data.Get("step")
			name, _ := data.Get("name")
			if _, seen := calls[id.Str]; !seen {
				order = append(order, id.Str)
			}
			calls[id.Str] = &state{u: UnknownOutcome{CallID: id.Str, CallSeq: e.Seq, Turn: turn, Step: step, Name: name, ResolvedBySeq: -1}}
		case "tool/result":
			msg, _ := data.Get("message")
			src, _ := msg.Get("source")
			id, ok := src.Get("callId")
			if !ok || id.Kind != event.KindString {
				continue
			}
			st := calls[id.Str]
			if st == nil || st.settled {
				continue
			}
			errv, _ := data.Get("error")
			if code, _ := errv.Get("code"); code.Kind == event.KindString && code.Str == "TOOL_OUTCOME_UNKNOWN" {
				st.u.ResolvedBySeq = e.Seq
				continue
			}
			st.settled = true
		}
	}
	var out []UnknownOutcome
	for _, id := range order {
		if st := calls[id]; !st.settled {
			out = append(out, st.u)
		}
	}
	return out
}

// TestStatusScan: a scan fed a log in pieces — every split point — answers the open turn and the unknown
// outcomes as a whole pass over the log does, through calls settled, re-recorded after settling, resolved
// by a synthetic TOOL_OUTCOME_UNKNOWN result, and turns left open.
func TestStatusScan(t *testing.T) {
	call := func(id string) string { return `tool/call {"turn":1,"step":1,"callId":"` + id + `","name":"bash"}` }
	result := func(id string) string {
		return `tool/result {"turn":1,"step":1,"message":{"source":{"callId":"` + id + `"}}}`
	}
	unknown := func(id string) string {
		return `tool/result {"turn":1,"step":1,"message":{"source":{"callId":"` + id + `"}},"error":{"code":"TOOL_OUTCOME_UNKNOWN"}}`
	}
	log := eventtest.Log(t,
		`turn/start {"turn":1}`, call("a"), call("b"), call("c"), result("b"), unknown("a"), call("b"),
		`turn/end {"turn":1}`, `turn/start {"turn":2}`, call("d"), result("c"), result("a"), call("a"),
		result("zz"), `turn/end {"turn":2}`, `turn/start {"turn":"x"}`, call("e"), unknown("e"), unknown("e"),
		result("d"), `turn/end {"turn":"x"}`, `turn/start {"turn":3}`, call("c"),
	)
	for n := 0; n <= len(log); n++ {
		events := log[:n]
		wantTurn, wantOpen := load.OpenTurn(events)
		want := naiveUnknown(events)
		for split := 0; split <= n; split++ {
			var s StatusScan
			s.Add(events[:split])
			s.Add(events[split:])
			if s.Len() != n {
				t.Fatalf("%d events: scanned %d", n, s.Len())
			}
			if turn, open := s.OpenTurn(); turn != wantTurn || open != wantOpen {
				t.Fatalf("%d events split at %d: open turn %d %v, want %d %v", n, split, turn, open, wantTurn, wantOpen)
			}
			if got := s.UnknownOutcomes(); !reflect.DeepEqual(got, want) {
				t.Fatalf("%d events split at %d: unknown outcomes\n%+v\nwant\n%+v", n, split, got, want)
			}
		}
		if got := UnknownOutcomes(events); !reflect.DeepEqual(got, want) {
			t.Fatalf("%d events: UnknownOutcomes\n%+v\nwant\n%+v", n, got, want)
		}
	}
}
