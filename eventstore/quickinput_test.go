package eventstore

import (
	"fmt"
	"reflect"
	"regexp"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/eventtest"
	"github.com/dshfs/dshfs/internal/fixtures"
)

// TestQuickInputAgrees guards the append path's unparsed reading: whenever quickInput takes a line, the
// parsed path (parseLine, then prepare) accepts the same event with the same packing and time, and the
// live trace, in each of several states, decides and moves exactly as it does on the whole record. Its
// inputs are every chunk and bracket in the fixtures, edge cases, and each of those with one byte changed.
func TestQuickInputAgrees(t *testing.T) {
	lines := []string{
		`{"type":"assistant/chunk","seq":4,"time":1778573701015,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"session "}}}`,
		`{"type":"assistant/chunk","seq":4,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":0,"id":"c-1","name":"bash","argumentsDelta":"{\"co"}}}`,
		`{"type":"assistant/chunk","seq":4,"time":1,"data":{"turn":2,"step":1,"chunk":{"type":"usage","usage":{"inputTokens":1}}}}`,
		`{"type":"assistant/chunk","seq":4,"time":1,"data":{"turn":1,"step":3,"chunk":{"type":"finish"}}}`,
		`{"type":"turn/start","seq":4,"time":1,"data":{"turn":2}}`,
		`{"type":"turn/start","seq":4,"time":1,"data":{"turn":1}}`,
		`{"type":"step/start","seq":4,"time":1,"data":{"turn":1,"step":1}}`,
		`{"type":"step/start","seq":4,"time":1,"data":{"turn":1,"step":2}}`,
		`{"type":"step/end","seq":4,"time":1,"data":{"turn":1,"step":1}}`,
		`{"type":"turn/end","seq":4,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
		`{"type":"turn/end","seq":4,"time":1,"data":{"turn":2,"reason":{"kind":"aborted"}}}`,
	}
	fromFixtures := eventtest.FixtureLines(t, []string{"assistant/chunk", "turn/start", "turn/end", "step/start", "step/end"},
		fixtures.Path(t, "upstream", "raw"))
	edges := len(lines)
	lines = append(lines, fromFixtures...)
	base := len(lines)
	// every edge case mutated, and one fixture line in 50 (each yields some 1,500 lines)
	for i := 0; i < base; i++ {
		if i >= edges && (i-edges)%50 != 0 {
			continue
		}
		lines = append(lines, eventtest.OneByteMutations(lines[i], []byte{'0', '1', '9', '-', '.', '}', ',', '"', 'x'})...)
	}
	// and each of them in the append syntax without seq and time
	stored := regexp.MustCompile(`^(\{"type":"[^"]*",)"seq":[0-9]+,"time":[0-9]+,`)
	for _, l := range lines[:len(lines):len(lines)] {
		if short := stored.ReplaceAllString(l, "$1"); short != l {
			lines = append(lines, short)
		}
	}
	const now = 1778573709999
	// the trace states: nothing open; turn 1 open; turn 1 step 1 open; turn 1 step 1 open with a compaction
	states := []*liveTrace{newLiveTrace()}
	for _, typ := range []string{"turn/start", "step/start", "compaction/start"} {
		next := states[len(states)-1].clone()
		rec, err := event.Parse([]byte(`{"data":{"turn":1,"step":1,"compactionId":"k"}}`))
		if err != nil {
			t.Fatal(err)
		}
		next.apply(typ, jsv{rec, true})
		states = append(states, next)
	}
	w := &Session{id: "s"}
	taken, fixturesTaken, refused := 0, 0, 0
	for i, l := range lines {
		seq := int64(4)
		if e, err := event.ParseEvent([]byte(l)); err == nil && e.Seq >= 0 {
			seq = e.Seq
		}
		q, ok := quickInput([]byte(l), seq, now)
		if !ok {
			refused++
			continue
		}
		taken++
		if i >= edges && i < base {
			fixturesTaken++
		}
		if _, ok := quickInput([]byte(l), seq+1, now); ok && stored.MatchString(l) {
			t.Errorf("%s: taken at seq %d and %d", l, seq, seq+1)
		}
		full, ok := parsedAlike(t, w, l, q, seq, now)
		if !ok {
			continue
		}
		for i, st := range states {
			quick, whole := st.clone(), st.clone()
			qin := q
			qerr, werr := quick.acceptInput(&qin), whole.accept(full.ev.Type, full.rec)
			if fmt.Sprint(qerr) != fmt.Sprint(werr) || !reflect.DeepEqual(quick, whole) {
				t.Errorf("%s in trace state %d: vetoed %v and left %+v, parsed: %v and %+v", l, i, qerr, quick, werr, whole)
			}
		}
	}
	if fixturesTaken*10 < len(fromFixtures)*9 || refused < 1000 {
		t.Fatalf("%d taken (%d of the fixtures' %d lines), %d refused: the test exercises too little",
			taken, fixturesTaken, len(fromFixtures), refused)
	}
	t.Logf("%d taken (%d of the fixtures' %d lines), %d refused", taken, fixturesTaken, len(fromFixtures), refused)
}

// parsedAlike parses line l at seq as parseLine and prepare do and reports whether the event q, which
// quickInput took without parsing, is what that path makes of it: the same event, packing and time, every
// check passed. It fails t (Errorf) otherwise, and returns the parsed input for the trace's comparison.
func parsedAlike(t *testing.T, w *Session, l string, q input, seq, now int64) (input, bool) {
	t.Helper()
	full, ce := parseLine([]byte(l), seq, now)
	if ce != nil {
		t.Errorf("%s: taken without parsing, but parseLine refuses it: %v", l, ce)
		return input{}, false
	}
	w.prepare(&full)
	if full.invalid != nil {
		t.Errorf("%s: taken without parsing, but its checks fail: %v", l, full.invalid)
		return input{}, false
	}
	if string(q.ev.Raw) != string(full.ev.Raw) || q.ev.Type != full.ev.Type || q.ev.Seq != full.ev.Seq ||
		!reflect.DeepEqual(q.packing, full.packing) || q.millis != full.millis || q.timed != full.timed {
		t.Errorf("%s: read as %+v (packing %v), parsed as %+v (packing %v)", l, q.ev, q.packing, full.ev, full.packing)
	}
	return full, true
}

// TestSeedSkipsOnlyUntracedTypes: seedLiveTrace parses only the types in tracedTypes, so apply must leave
// the trace as it is for every other type, whatever its record holds.
func TestSeedSkipsOnlyUntracedTypes(t *testing.T) {
	rec, err := event.Parse([]byte(`{"type":"x","data":{"turn":5,"step":5,"callId":"c","compactionId":"k",` +
		`"message":{"source":{"callId":"c"}}},"surfaceOp":"append"}`))
	if err != nil {
		t.Fatal(err)
	}
	open := newLiveTrace()
	open.apply("turn/start", jsv{rec, true})
	open.apply("step/start", jsv{rec, true})
	open.apply("tool/call", jsv{rec, true})
	applied := 0
	for _, typ := range append(append([]string{}, event.KnownTypes...), "plugin/x") {
		for _, st := range []*liveTrace{newLiveTrace(), open} {
			after := st.clone()
			after.apply(typ, jsv{rec, true})
			changed := !reflect.DeepEqual(after, st)
			if changed && !tracedTypes[typ] {
				t.Errorf("apply of %s changes the trace, but seedLiveTrace skips it", typ)
			}
			if changed {
				applied++
			}
		}
	}
	if applied < 6 {
		t.Fatalf("only %d of the traced types changed a trace: the test exercises too little", applied)
	}
}
