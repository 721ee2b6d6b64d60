package eventstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/harness"
	"github.com/dshfs/dshfs/internal/storetest"
)

// Append lines of the live rules' table.
func tStart(n int) string { return fmt.Sprintf(`{"type":"turn/start","data":{"turn":%d}}`, n) }
func tEnd(n int) string {
	return fmt.Sprintf(`{"type":"turn/end","data":{"turn":%d,"reason":{"kind":"completed"}}}`, n)
}
func sStart(n, s int) string {
	return fmt.Sprintf(`{"type":"step/start","data":{"turn":%d,"step":%d}}`, n, s)
}
func sEnd(n, s int) string {
	return fmt.Sprintf(`{"type":"step/end","data":{"turn":%d,"step":%d}}`, n, s)
}
func userMsg(id string) string {
	return `{"type":"user/message","data":{"id":"` + id + `","role":"user","content":[{"type":"text","text":"q"}],"source":{"kind":"user"}},"surfaceOp":"append"}`
}
func chunk(n, s int) string {
	return fmt.Sprintf(`{"type":"assistant/chunk","data":{"turn":%d,"step":%d,"chunk":{"type":"text-delta","index":0,"text":"a"}}}`, n, s)
}
func toolCall(n, s int, id string) string {
	return fmt.Sprintf(`{"type":"tool/call","data":{"turn":%d,"step":%d,"callId":"%s","name":"read","arguments":"{}"}}`, n, s, id)
}
func toolResult(n, s int, id string, call int) string {
	return fmt.Sprintf(`{"type":"tool/result","data":{"turn":%d,"step":%d,"message":{"source":{"kind":"tool","callId":"%s"},"content":[{"type":"tool-result","toolCallId":"%s","content":[{"type":"text","text":"ok"}],"isError":false}],"role":"user","id":"r-%s"}},"sourceEventSeqs":[%d],"surfaceOp":"append"}`, n, s, id, id, id, call)
}
func compStart(id, turn string) string {
	return `{"type":"compaction/start","data":{"compactionId":"` + id + `","turn":` + turn + `}}`
}
func compEnd(id, turn string, failed bool) string {
	errMember := ""
	if failed {
		errMember = `,"error":"the summarizer failed"`
	}
	return `{"type":"compaction/end","data":{"compactionId":"` + id + `","turn":` + turn + errMember + `}}`
}

// turns1to3 is three complete turns, seqs 0..12.
var turns1to3 = []string{
	tStart(1), sStart(1, 1), userMsg("u1"), sEnd(1, 1), tEnd(1),
	tStart(2), sStart(2, 1), sEnd(2, 1), tEnd(2),
	tStart(3), sStart(3, 1), sEnd(3, 1), tEnd(3),
}

// liveCase is one row of the live rules' table: setup lines dshfs accepts, then line, refused with a
// message containing want ("": accepted). The harness's live writer, with its invariant companions,
// appends the same setup and vetoes line with exactly want, unless dshfsOnly (a rule of dshfs's input
// that the harness's Session.append has no counterpart for).
type liveCase struct {
	name      string
	setup     []string
	line      string
	want      string
	dshfsOnly bool
}

const (
	sessionVeto    = `invariant violated by "@deepseek-ai/dsh-session": `
	compactionVeto = `invariant violated by "@deepseek-ai/dsh-compaction": `
)

var liveCases = []liveCase{
	{"a turn/end naming another turn", append(append([]string{}, turns1to3...), tStart(4)), tEnd(9),
		sessionVeto + "turn/end 9 does not match open turn 4", false},
	{"turn/start while a turn is open", []string{tStart(1)}, tStart(2), sessionVeto + "turn/start 2 while turn 1 is still open", false},
	{"turn/start out of order", nil, tStart(2), sessionVeto + "turn/start expected turn 1, got 2", false},
	{"turn/start after turns, out of order", append([]string{}, tStart(1), tEnd(1)), tStart(3), sessionVeto + "turn/start expected turn 2, got 3", false},
	{"turn/end with a step open", []string{tStart(1), sStart(1, 1)}, tEnd(1), sessionVeto + "turn/end 1 while step 1 is still open", false},
	{"turn/end with no turn open", nil, tEnd(1), sessionVeto + "turn/end 1 does not match open turn null", false},
	{"step/start in another turn", []string{tStart(1)}, sStart(2, 1), sessionVeto + "step/start in turn 2 but open turn is 1", false},
	{"step/start with a step open", []string{tStart(1), sStart(1, 1)}, sStart(1, 2), sessionVeto + "step/start 2 while step 1 is still open", false},
	{"step/start out of order", []string{tStart(1)}, sStart(1, 2), sessionVeto + "step/start expected step 1 in turn 1, got 2", false},
	{"step/end of another step", []string{tStart(1), sStart(1, 1)}, sEnd(1, 2), sessionVeto + "step/end names turn 1/step 2 but open is turn 1/step 1", false},
	{"assistant/chunk outside a step", []string{tStart(1)}, chunk(1, 1), sessionVeto + "assistant/chunk names turn 1/step 1 but open is turn 1/step null", false},
	{"tool/call outside any turn", nil, toolCall(1, 1, "c1"), sessionVeto + "tool/call names turn 1/step 1 but open is turn null/step null", false},
	{"tool/result without its tool/call", []string{tStart(1), sStart(1, 1)}, toolResult(1, 1, "c9", 1), sessionVeto + "tool/result for c9 with no prior tool/call in this step", false},
	{"tool/result of a call in an ended step", []string{tStart(1), sStart(1, 1), toolCall(1, 1, "c1"), sEnd(1, 1), sStart(1, 2)}, toolResult(1, 2, "c1", 2),
		sessionVeto + "tool/result for c1 with no prior tool/call in this step", false},
	{"turn/start across an open standalone compaction", []string{compStart("k1", "null")}, tStart(1),
		compactionVeto + "turn/start cannot cross an open standalone compaction", false},
	{"turn/end across an open turn compaction", []string{tStart(1), compStart("k1", "1")}, tEnd(1),
		compactionVeto + "turn/end cannot cross an open compaction for turn 1", false},
	{"standalone compaction/start inside a turn", []string{tStart(1)}, compStart("k1", "null"), compactionVeto + "compaction/start is standalone but turn 1 is open", false},
	{"turn compaction/start outside its turn", nil, compStart("k1", "1"), compactionVeto + "compaction/start for turn 1 appended outside any open turn", false},
	{"compaction/start naming another turn", []string{tStart(1)}, compStart("k1", "2"), compactionVeto + "compaction/start names turn 2 but open turn is 1", false},
	{"compaction/start while compacting", []string{compStart("k1", "null")}, compStart("k2", "null"),
		compactionVeto + "compaction/start while standalone compaction is still compacting", false},
	{"compaction/end with no start", nil, compEnd("k1", "null", true), compactionVeto + "compaction/end has no matching compaction/start", false},
	{"compaction/end of another compaction", []string{compStart("k1", "null")}, compEnd("k2", "null", true),
		compactionVeto + "compaction/end id k2 does not match compaction/start id k1", false},
	{"compaction/end of another owner", []string{tStart(1), compStart("k1", "1")}, compEnd("k1", "null", true),
		compactionVeto + "compaction/end owner null does not match compaction/start owner 1", false},
	{"successful compaction/end without a summary", []string{compStart("k1", "null")}, compEnd("k1", "null", false),
		compactionVeto + "successful compaction/end requires one compaction/summary", false},
	{"a typo'd type", []string{tStart(1)}, `{"type":"user/mesage","data":{}}`, `unknown event type "user/mesage"; known types: `, true},

	// accepted: what the harness's live writer writes
	{"a turn with a tool call and its result", []string{tStart(1), sStart(1, 1), userMsg("u1"), toolCall(1, 1, "c1")}, toolResult(1, 1, "c1", 3), "", false},
	{"the turn after three", turns1to3, tStart(4), "", false},
	{"a failed standalone compaction between turns", []string{tStart(1), tEnd(1), compStart("k1", "null")}, compEnd("k1", "null", true), "", false},
	{"a failed turn compaction inside its turn", []string{tStart(1), compStart("k1", "1")}, compEnd("k1", "1", true), "", false},
}

// TestLiveRules: every line of the table is refused by dshfs's append with the harness's live veto (or
// accepted), after its setup lines were accepted, and the request's lines are applied all or none.
func TestLiveRules(t *testing.T) {
	for _, c := range liveCases {
		t.Run(c.name, func(t *testing.T) {
			w := liveSession(t)
			for i, l := range c.setup {
				if err := w.Accept([][]byte{[]byte(l)}); err != nil {
					t.Fatalf("setup line %d %s: %v", i+1, l, err)
				}
			}
			before := len(w.Snapshot().Events)
			err := w.Accept([][]byte{[]byte(c.line)})
			if c.want == "" {
				if err != nil {
					t.Fatalf("%s: %v", c.line, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%s: %v, want %q", c.line, err, c.want)
			}
			if n := len(w.Snapshot().Events); n != before {
				t.Fatalf("a refused line left %d events, want %d", n, before)
			}
			// in one request after a good line: neither is accepted
			if err := w.Accept([][]byte{[]byte(`{"type":"plugin/note","data":{},"ignorable":true}`), []byte(c.line)}); err == nil {
				t.Fatal("accepted as the second line of a request")
			}
			if n := len(w.Snapshot().Events); n != before {
				t.Fatalf("a refused request left %d events, want %d", n, before)
			}
		})
	}
}

func liveSession(t *testing.T) *eventstore.Session {
	t.Helper()
	ctx := context.Background()
	st := storetest.Raw(t)
	cwd := event.String("/srv/live")
	if err := st.Create(ctx, event.Header{ID: "s", CreatedAt: 1, Cwd: &cwd}); err != nil {
		t.Fatal(err)
	}
	w, err := st.Writer(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(ctx) })
	return w
}

// TestLiveRulesHarness replays the table through the harness's own session store with its session and
// compaction invariant companions loaded: every line dshfs accepted (each case's setup, and the accepted
// lines) is appended there without a veto, and each line dshfs refuses is vetoed there with the same text.
func TestLiveRulesHarness(t *testing.T) {
	h := harness.Get(t)
	var cases [][]event.Event
	var rows []liveCase
	for _, c := range liveCases {
		if c.dshfsOnly {
			continue
		}
		w := liveSession(t)
		lines := append(append([]string{}, c.setup...), c.line)
		for _, l := range lines {
			w.Accept([][]byte{[]byte(l)}) // the refused last line is refused here too (TestLiveRules)
		}
		evs := w.Snapshot().Events
		if c.want != "" {
			// the refused line, as dshfs would have stored it
			e, err := eventstore.ParseInput([]byte(c.line), int64(len(evs)), 1)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			evs = append(evs, e)
		}
		cases, rows = append(cases, evs), append(rows, c)
	}
	for i, r := range h.LiveAppend(t, cases) {
		c := rows[i]
		accepted := len(cases[i])
		if c.want != "" {
			accepted--
		}
		if r.Appended != accepted {
			t.Errorf("%s: the harness appended %d of the %d events dshfs accepted (%s)", c.name, r.Appended, accepted, r.Error)
			continue
		}
		switch {
		case c.want == "" && r.Error != "":
			t.Errorf("%s: the harness vetoed an event dshfs accepts: %s", c.name, r.Error)
		case c.want != "" && r.Error != c.want:
			t.Errorf("%s: the harness says %q, dshfs %q", c.name, r.Error, c.want)
		}
	}
}
