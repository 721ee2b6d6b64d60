package compaction

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/eventtest"
	"github.com/dshfs/dshfs/internal/fixtures"
	"github.com/dshfs/dshfs/surface"
)

const (
	userAppend = `user/message {"id":"u","role":"user","content":[],"source":{"kind":"user"}} + "surfaceOp":"append"`
	turn1      = `turn/start {"turn":1}`
	turn1End   = `turn/end {"turn":1,"reason":{"kind":"completed"}}`
	endSeed    = `session/end-seed {}`
)

func checkpoint(start, end int64, sources string) string {
	return fmt.Sprintf(`user/message {"id":"k","role":"user","content":[],"source":{"kind":"plugin","plugin":"compact","compactionId":"c1"}} + "sourceEventSeqs":[%s],"surfaceOp":{"op":"replace","start":%d,"end":%d}`, sources, start, end)
}

func summary(id string, start, end int64, seqs string, tokens int) string {
	return fmt.Sprintf(`compaction/summary {"compactionId":%q,"summary":[{"type":"text","text":"s"}],"shadowedRange":{"start":%d,"end":%d},"shadowedSeqs":[%s],"shadowedTokenCount":%d,"provider":"p","model":"m"}`, id, start, end, seqs, tokens)
}

func jsonLines(recs []Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.JSON())
	}
	return out
}

func TestRecords(t *testing.T) {
	// The fold's answer for the checkpoint at seq 5 replacing user messages 1..2.
	fold := &surface.Result{Nodes: []int64{5}, Replacements: []surface.Replacement{{Seq: 5, Start: 1, End: 2, ShadowedSeqs: []int64{1, 2}}}, Generation: 1}
	completeLog := []string{
		turn1, userAppend, userAppend,
		`compaction/start {"compactionId":"c1","turn":1}`,
		summary("c1", 1, 2, "1,2", 10),
		checkpoint(1, 2, "3,4,1,2"),
		`compaction/end {"compactionId":"c1","turn":1}`,
		turn1End,
	}
	cases := []struct {
		name   string
		log    []string
		fold   *surface.Result
		want   []string
		active string // compactionId of Active, "" for nil
	}{
		{
			name: "complete turn-owned", log: completeLog, fold: fold,
			want: []string{`{"compactionId":"c1","state":"complete","turn":1,"sourceCommandId":null,"startSeq":3,"summarySeq":4,"replacementSeq":5,"endSeq":6,"shadowedRange":{"start":1,"end":2},"shadowedSeqs":[1,2],"shadowedTokenCount":10,"error":null}`},
		},
		{
			name: "complete without a fold uses the summary", log: completeLog, fold: nil,
			want: []string{`{"compactionId":"c1","state":"complete","turn":1,"sourceCommandId":null,"startSeq":3,"summarySeq":4,"replacementSeq":5,"endSeq":6,"shadowedRange":{"start":1,"end":2},"shadowedSeqs":[1,2],"shadowedTokenCount":10,"error":null}`},
		},
		{
			// The summary claims more than the surface lost; the views show what the fold did.
			name: "fold wins over the summary",
			log: []string{
				userAppend, userAppend,
				`compaction/start {"compactionId":"c1","turn":null}`,
				summary("c1", 0, 1, "0,1", 7),
				checkpoint(0, 1, "2,3,0,1"),
				`compaction/end {"compactionId":"c1","turn":null}`,
			},
			fold: &surface.Result{Replacements: []surface.Replacement{{Seq: 4, Start: 0, End: 0, ShadowedSeqs: []int64{0}}}},
			want: []string{`{"compactionId":"c1","state":"complete","turn":null,"sourceCommandId":null,"startSeq":2,"summarySeq":3,"replacementSeq":4,"endSeq":5,"shadowedRange":{"start":0,"end":0},"shadowedSeqs":[0],"shadowedTokenCount":7,"error":null}`},
		},
		{
			name: "manual with sourceCommandId",
			log: []string{
				userAppend,
				`command/run {"commandId":"cmd-1","name":"compact","args":"","source":{"kind":"user"}}`,
				`compaction/start {"compactionId":"m","sourceCommandId":"cmd-1","turn":null}`,
				`compaction/summary {"compactionId":"m","sourceCommandId":"cmd-1","shadowedRange":{"start":0,"end":0},"shadowedSeqs":[0],"shadowedTokenCount":3}`,
				checkpoint(0, 0, "2,3,0"),
				`compaction/end {"compactionId":"m","sourceCommandId":"cmd-1","turn":null}`,
			},
			want: []string{`{"compactionId":"m","state":"complete","turn":null,"sourceCommandId":"cmd-1","startSeq":2,"summarySeq":3,"replacementSeq":4,"endSeq":5,"shadowedRange":{"start":0,"end":0},"shadowedSeqs":[0],"shadowedTokenCount":3,"error":null}`},
		},
		{
			name: "failed: error end",
			log: []string{
				turn1, userAppend,
				`compaction/start {"compactionId":"f","turn":1}`,
				`compaction/end {"compactionId":"f","turn":1,"error":"summary unavailable"}`,
				turn1End,
			},
			want: []string{`{"compactionId":"f","state":"failed","turn":1,"sourceCommandId":null,"startSeq":2,"summarySeq":null,"replacementSeq":null,"endSeq":3,"shadowedRange":null,"shadowedSeqs":[],"shadowedTokenCount":null,"error":"summary unavailable"}`},
		},
		{
			// error === undefined is the harness's success test, so a recorded null is a failure.
			name: "failed: error null",
			log: []string{
				`compaction/start {"compactionId":"f","turn":null}`,
				`compaction/end {"compactionId":"f","turn":null,"error":null}`,
			},
			want: []string{`{"compactionId":"f","state":"failed","turn":null,"sourceCommandId":null,"startSeq":0,"summarySeq":null,"replacementSeq":null,"endSeq":1,"shadowedRange":null,"shadowedSeqs":[],"shadowedTokenCount":null,"error":null}`},
		},
		{
			name: "failed: success end without a summary",
			log: []string{
				`compaction/start {"compactionId":"f","turn":null}`,
				`compaction/end {"compactionId":"f","turn":null}`,
			},
			want: []string{`{"compactionId":"f","state":"failed","turn":null,"sourceCommandId":null,"startSeq":0,"summarySeq":null,"replacementSeq":null,"endSeq":1,"shadowedRange":null,"shadowedSeqs":[],"shadowedTokenCount":null,"error":null}`},
		},
		{
			name: "failed: success end without a checkpoint",
			log: []string{
				userAppend,
				`compaction/start {"compactionId":"f","turn":null}`,
				summary("f", 0, 0, "0", 4),
				`compaction/end {"compactionId":"f","turn":null}`,
			},
			want: []string{`{"compactionId":"f","state":"failed","turn":null,"sourceCommandId":null,"startSeq":1,"summarySeq":2,"replacementSeq":null,"endSeq":3,"shadowedRange":{"start":0,"end":0},"shadowedSeqs":[0],"shadowedTokenCount":4,"error":null}`},
		},
		{
			name: "open: unmatched start, no later end-seed",
			log: []string{
				endSeed, turn1, userAppend,
				`compaction/start {"compactionId":"o","turn":1}`,
				`tool/call {"turn":1,"step":1,"callId":"x","name":"n","arguments":"{}"}`,
			},
			want:   []string{`{"compactionId":"o","state":"open","turn":1,"sourceCommandId":null,"startSeq":3,"summarySeq":null,"replacementSeq":null,"endSeq":null,"shadowedRange":null,"shadowedSeqs":[],"shadowedTokenCount":null,"error":null}`},
			active: "o",
		},
		{
			// The blocking orphan the harness leaves when the success end append throws.
			name: "open: summary and checkpoint landed, end missing",
			log: []string{
				userAppend,
				`compaction/start {"compactionId":"o","turn":null}`,
				summary("o", 0, 0, "0", 4),
				checkpoint(0, 0, "1,2,0"),
			},
			fold:   &surface.Result{Replacements: []surface.Replacement{{Seq: 3, Start: 0, End: 0, ShadowedSeqs: []int64{0}}}},
			want:   []string{`{"compactionId":"o","state":"open","turn":null,"sourceCommandId":null,"startSeq":1,"summarySeq":2,"replacementSeq":3,"endSeq":null,"shadowedRange":{"start":0,"end":0},"shadowedSeqs":[0],"shadowedTokenCount":4,"error":null}`},
			active: "o",
		},
		{
			name: "stale: later end-seed",
			log: []string{
				turn1,
				`compaction/start {"compactionId":"s","turn":1}`,
				`turn/end {"turn":1,"reason":{"kind":"interrupted"}}`,
				endSeed,
			},
			want: []string{`{"compactionId":"s","state":"stale","turn":1,"sourceCommandId":null,"startSeq":1,"summarySeq":null,"replacementSeq":null,"endSeq":null,"shadowedRange":null,"shadowedSeqs":[],"shadowedTokenCount":null,"error":null}`},
		},
		{
			// The harness's backward scan stops at the newest marker (b's end), so a's start holds no lock.
			name: "stale: hidden by a later marker of another id",
			log: []string{
				`compaction/start {"compactionId":"a","turn":null}`,
				`compaction/start {"compactionId":"b","turn":null}`,
				`compaction/end {"compactionId":"b","turn":null,"error":"x"}`,
			},
			want: []string{
				`{"compactionId":"a","state":"stale","turn":null,"sourceCommandId":null,"startSeq":0,"summarySeq":null,"replacementSeq":null,"endSeq":null,"shadowedRange":null,"shadowedSeqs":[],"shadowedTokenCount":null,"error":null}`,
				`{"compactionId":"b","state":"failed","turn":null,"sourceCommandId":null,"startSeq":1,"summarySeq":null,"replacementSeq":null,"endSeq":2,"shadowedRange":null,"shadowedSeqs":[],"shadowedTokenCount":null,"error":"x"}`,
			},
		},
		{
			// A stale start does not block a later bracket, which opens normally.
			name: "stale then open",
			log: []string{
				`compaction/start {"compactionId":"a","turn":null}`,
				endSeed,
				`compaction/start {"compactionId":"b","turn":null}`,
			},
			want: []string{
				`{"compactionId":"a","state":"stale","turn":null,"sourceCommandId":null,"startSeq":0,"summarySeq":null,"replacementSeq":null,"endSeq":null,"shadowedRange":null,"shadowedSeqs":[],"shadowedTokenCount":null,"error":null}`,
				`{"compactionId":"b","state":"open","turn":null,"sourceCommandId":null,"startSeq":2,"summarySeq":null,"replacementSeq":null,"endSeq":null,"shadowedRange":null,"shadowedSeqs":[],"shadowedTokenCount":null,"error":null}`,
			},
			active: "b",
		},
		{
			name: "end without start",
			log: []string{
				turn1,
				`compaction/end {"compactionId":"e","sourceCommandId":"cmd","turn":1,"error":"lost"}`,
			},
			want: []string{`{"compactionId":"e","state":"failed","turn":1,"sourceCommandId":"cmd","startSeq":null,"summarySeq":null,"replacementSeq":null,"endSeq":1,"shadowedRange":null,"shadowedSeqs":[],"shadowedTokenCount":null,"error":"lost"}`},
		},
		{
			name: "summary without start",
			log:  []string{userAppend, summary("z", 0, 0, "0", 1)},
			want: []string{`{"compactionId":"z","state":"failed","turn":null,"sourceCommandId":null,"startSeq":null,"summarySeq":1,"replacementSeq":null,"endSeq":null,"shadowedRange":{"start":0,"end":0},"shadowedSeqs":[0],"shadowedTokenCount":1,"error":null}`},
		},
		{
			// An end before its own start does not close it: the backward scan sees the start unmatched.
			name: "end before its start",
			log: []string{
				`compaction/end {"compactionId":"r","turn":null}`,
				`compaction/start {"compactionId":"r","turn":null}`,
			},
			want:   []string{`{"compactionId":"r","state":"open","turn":null,"sourceCommandId":null,"startSeq":1,"summarySeq":null,"replacementSeq":null,"endSeq":0,"shadowedRange":null,"shadowedSeqs":[],"shadowedTokenCount":null,"error":null}`},
			active: "r",
		},
		{
			name: "sourceCommandId prefers the start",
			log: []string{
				`compaction/start {"compactionId":"p","sourceCommandId":"s1","turn":null}`,
				`compaction/end {"compactionId":"p","sourceCommandId":"s2","turn":null,"error":"e"}`,
			},
			want: []string{`{"compactionId":"p","state":"failed","turn":null,"sourceCommandId":"s1","startSeq":0,"summarySeq":null,"replacementSeq":null,"endSeq":1,"shadowedRange":null,"shadowedSeqs":[],"shadowedTokenCount":null,"error":"e"}`},
		},
		{
			name: "no compaction events", log: []string{turn1, userAppend, turn1End}, want: []string{},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			events := eventtest.Log(t, c.log...)
			recs, err := Records(events, c.fold)
			if err != nil {
				t.Fatal(err)
			}
			if c.fold != nil && c.name == "complete turn-owned" {
				// The hand-written fold is the one surface.Fold computes for this log.
				folded, err := surface.Fold(events)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(folded.Replacements, c.fold.Replacements) {
					t.Fatalf("surface.Fold = %+v", folded.Replacements)
				}
			}
			eventtest.SameLines(t, jsonLines(recs), c.want)
			for _, line := range jsonLines(recs) {
				if !json.Valid([]byte(line)) || !event.IsCanonical([]byte(line)) {
					t.Errorf("not canonical JSON: %s", line)
				}
			}
			a := Active(recs)
			switch {
			case c.active == "" && a != nil:
				t.Errorf("Active = %s, want nil", a.JSON())
			case c.active != "" && (a == nil || a.CompactionID != c.active || a.State != Open):
				t.Errorf("Active = %v, want %q", a, c.active)
			}
			checkCoverage(t, events, recs, nil)
		})
	}
}

func TestRecordsErrors(t *testing.T) {
	cases := []struct {
		name string
		log  []string
		want string
	}{
		{"repeated start", []string{
			`compaction/start {"compactionId":"d","turn":null}`,
			`compaction/start {"compactionId":"d","turn":null}`,
		}, `compaction: compaction/start at seq 1 repeats compactionId "d" (first at seq 0)`},
		{"repeated end", []string{
			`compaction/start {"compactionId":"d","turn":null}`,
			`compaction/end {"compactionId":"d","turn":null,"error":"a"}`,
			`compaction/end {"compactionId":"d","turn":null,"error":"b"}`,
		}, `compaction: compaction/end at seq 2 repeats compactionId "d" (first at seq 1)`},
		{"repeated summary", []string{
			userAppend,
			`compaction/start {"compactionId":"d","turn":null}`,
			summary("d", 0, 0, "0", 1), summary("d", 0, 0, "0", 1),
		}, `compaction: compaction/summary at seq 3 repeats compactionId "d" (first at seq 2)`},
		{"numeric id", []string{`compaction/start {"compactionId":5,"turn":null}`},
			`compaction: compaction/start at seq 0 has no string data.compactionId`},
		{"missing id", []string{`compaction/end {"turn":null}`},
			`compaction: compaction/end at seq 0 has no string data.compactionId`},
		{"data not an object", []string{`compaction/summary null`},
			`compaction: compaction/summary at seq 0 has no string data.compactionId`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Records(eventtest.Log(t, c.log...), nil)
			if err == nil || err.Error() != c.want {
				t.Fatalf("err = %v, want %s", err, c.want)
			}
		})
	}
}

func TestPrunes(t *testing.T) {
	toolResult := func(op string) string {
		return `tool/result {"turn":1,"step":1,"message":{"id":"r","role":"user","source":{"kind":"tool","callId":"c"},"content":[{"type":"tool-result","toolCallId":"c","content":[]}]}} + "surfaceOp":` + op
	}
	events := eventtest.Log(t,
		turn1,
		toolResult(`"append"`), // 1
		`compaction/prune {"shadowedRange":{"start":1,"end":1},"shadowedSeqs":[1],"shadowedTokenCount":2500}`,
		toolResult(`{"op":"replace","start":1,"end":1}`), // 3
		// A prune not followed by its replacement (hand-made): still listed, replacementSeq null.
		`compaction/prune {"shadowedRange":{"start":3,"end":3},"shadowedSeqs":[3],"shadowedTokenCount":9}`,
		toolResult(`"append"`),
		// Missing fields print null.
		`compaction/prune {}`,
		turn1End,
	)
	fold := &surface.Result{Replacements: []surface.Replacement{{Seq: 3, Start: 1, End: 1, ShadowedSeqs: []int64{1}}}}
	want := []string{
		`{"seq":2,"replacementSeq":3,"shadowedRange":{"start":1,"end":1},"shadowedSeqs":[1],"shadowedTokenCount":2500}`,
		`{"seq":4,"replacementSeq":null,"shadowedRange":{"start":3,"end":3},"shadowedSeqs":[3],"shadowedTokenCount":9}`,
		`{"seq":6,"replacementSeq":null,"shadowedRange":null,"shadowedSeqs":null,"shadowedTokenCount":null}`,
	}
	for _, f := range []*surface.Result{fold, nil} {
		ps, err := Prunes(events, f)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]string, len(ps))
		for i, p := range ps {
			got[i] = string(p.JSON())
		}
		eventtest.SameLines(t, got, want)
		recs, err := Records(events, f)
		if err != nil || len(recs) != 0 {
			t.Fatalf("Records = %v, %v; want none", recs, err)
		}
		checkCoverage(t, events, recs, ps)
	}

	// The fold's replacement wins over the prune's own claim.
	ps, err := Prunes(events, &surface.Result{Replacements: []surface.Replacement{{Seq: 3, Start: 1, End: 1, ShadowedSeqs: []int64{1}}, {Seq: 9, Start: 0, End: 0, ShadowedSeqs: []int64{0}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(ps[0].JSON()); got != want[0] {
		t.Fatalf("got %s", got)
	}
	mismatch := &surface.Result{Replacements: []surface.Replacement{{Seq: 3, Start: 0, End: 1, ShadowedSeqs: []int64{0, 1}}}}
	ps, err = Prunes(events, mismatch)
	if err != nil {
		t.Fatal(err)
	}
	if got, w := string(ps[0].JSON()), `{"seq":2,"replacementSeq":3,"shadowedRange":{"start":0,"end":1},"shadowedSeqs":[0,1],"shadowedTokenCount":2500}`; got != w {
		t.Fatalf("got %s\nwant %s", got, w)
	}
}

// checkCoverage asserts that every compaction/* event of the log is findable in a record or a prune.
func checkCoverage(t *testing.T, events []event.Event, recs []Record, prunes []Prune) {
	t.Helper()
	found := map[int64]bool{}
	for _, r := range recs {
		for _, s := range []int64{r.StartSeq, r.SummarySeq, r.EndSeq} {
			found[s] = true
		}
	}
	for _, p := range prunes {
		found[p.Seq] = true
	}
	for _, e := range events {
		switch e.Type {
		case TypeStart, TypeSummary, TypeEnd:
		case TypePrune:
			if prunes == nil {
				continue
			}
		default:
			continue
		}
		if !found[e.Seq] {
			t.Errorf("%s at seq %d is in no record or prune", e.Type, e.Seq)
		}
	}
}

// goldenFold reads the harness's own foldSurface answer (surface.json) for a golden session.
func goldenFold(t *testing.T, dir string) *surface.Result {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "surface.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Nodes        []int64
		Replacements []struct {
			Seq, Start, End int64
			ShadowedSeqs    []int64
		}
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	res := &surface.Result{Nodes: s.Nodes, Generation: len(s.Replacements)}
	for _, r := range s.Replacements {
		res.Replacements = append(res.Replacements, surface.Replacement{Seq: r.Seq, Start: r.Start, End: r.End, ShadowedSeqs: r.ShadowedSeqs})
	}
	return res
}

func TestRecordsGoldenCompactionSession(t *testing.T) {
	dir := fixtures.Path(t, "golden", "generated-raw", "main-session-39ade10b-6855-483e-897d-dd835505a4e6")
	events := eventtest.ReadFile(t, filepath.Join(dir, "events.jsonl"))
	want := []string{
		// Automatic, owned by turn 3, no command.
		`{"compactionId":"a82a05e7-faea-4a14-815d-359b999fb132","state":"complete","turn":3,"sourceCommandId":null,"startSeq":71,"summarySeq":72,"replacementSeq":73,"endSeq":74,"shadowedRange":{"start":2,"end":33},"shadowedSeqs":[2,21,23,33],"shadowedTokenCount":386,"error":null}`,
		// Manual /compact between turns: standalone (turn null), its range starts at the earlier
		// checkpoint (73) and so is numerically reversed.
		`{"compactionId":"db62fb45-bfb8-407e-85da-bbfdb46fe650","state":"complete","turn":null,"sourceCommandId":"cmd-04dc5b21-1","startSeq":109,"summarySeq":110,"replacementSeq":111,"endSeq":112,"shadowedRange":{"start":73,"end":67},"shadowedSeqs":[73,38,50,52,67],"shadowedTokenCount":582,"error":null}`,
	}
	// The harness's own fold, ours (what the views use), and none: all three give the same records.
	ours, err := surface.Fold(events)
	if err != nil {
		t.Fatal(err)
	}
	for _, fold := range []*surface.Result{goldenFold(t, dir), ours, nil} {
		recs, err := Records(events, fold)
		if err != nil {
			t.Fatal(err)
		}
		eventtest.SameLines(t, jsonLines(recs), want)
		if a := Active(recs); a != nil {
			t.Errorf("Active = %s, want nil", a.JSON())
		}
		checkCoverage(t, events, recs, nil)
	}
	// The manual transaction's sourceCommandId is the /compact command/run that drove it (seq 108), and
	// command/done cites the summary.
	run, _ := event.Lookup(events[108].Raw, "data", "commandId")
	name, _ := event.Lookup(events[108].Raw, "data", "name")
	cited, _ := event.Lookup(events[113].Raw, "data", "sourceEventSeq")
	if events[108].Type != "command/run" || string(run) != `"cmd-04dc5b21-1"` || string(name) != `"compact"` || string(cited) != "110" {
		t.Fatalf("fixture changed: %s / %s", events[108].Raw, events[113].Raw)
	}
	ps, err := Prunes(events, goldenFold(t, dir))
	if err != nil || len(ps) != 0 {
		t.Fatalf("Prunes = %v, %v; want none", ps, err)
	}
}

// Every golden session must classify without error, account for every compaction/* event, and agree
// with the harness's fold on every compaction checkpoint.
func TestRecordsAllGoldenSessions(t *testing.T) {
	sets, err := filepath.Glob(filepath.Join(fixtures.Path(t, "golden"), "*", "*", "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) < 100 {
		t.Fatalf("only %d golden sessions found", len(sets))
	}
	withCompaction := 0
	for _, path := range sets {
		dir := filepath.Dir(path)
		events := eventtest.ReadFile(t, path)
		fold := goldenFold(t, dir)
		recs, err := Records(events, fold)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		ps, err := Prunes(events, fold)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		checkCoverage(t, events, recs, ps)
		if len(recs) > 0 {
			withCompaction++
		}
		inFold := map[int64]bool{}
		for _, r := range fold.Replacements {
			inFold[r.Seq] = true
		}
		for _, r := range recs {
			if r.State != Complete || !inFold[r.ReplacementSeq] {
				t.Errorf("%s: %s", dir, r.JSON())
			}
		}
	}
	// generated-raw and generated-zstd both hold the compaction session.
	if withCompaction < 2 {
		t.Fatalf("only %d golden sessions with compactions", withCompaction)
	}
}
