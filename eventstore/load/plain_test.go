package load

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/eventtest"
	"github.com/dshfs/dshfs/internal/fixtures"
)

// TestPlainEnvelopeAgreesWithCheckEnvelope guards the unparsed fast path: whenever plainEnvelope accepts an
// event, the full CheckEnvelope must accept it too (a rejection only sends the event down the full path).
func TestPlainEnvelopeAgreesWithCheckEnvelope(t *testing.T) {
	members := []string{
		`"type":"assistant/chunk"`, `"type":"x/y"`, `"type":""`, `"type":5`,
		`"seq":0`, `"seq":-1`, `"seq":1.5`, `"seq":9007199254740992`, `"seq":"0"`,
		`"time":1`, `"time":-5`, `"time":1.5`, `"time":9007199254740991`, `"time":9007199254740992`, `"time":"1"`,
		`"data":{}`, `"data":null`, `"data":{"message":{"id":"m"}}`,
		`"ignorable":true`, `"ignorable":false`, `"ignorable":1`,
		`"surfaceOp":"append"`, `"sourceEventSeqs":[]`, `"extra":1`, `"t\u0079pe":"x"`,
	}
	n := 0
	// every combination of up to 5 members drawn in order keeps this exhaustive but small
	var walk func(start int, chosen []string)
	walk = func(start int, chosen []string) {
		if len(chosen) > 0 {
			line := "{"
			for i, m := range chosen {
				if i > 0 {
					line += ","
				}
				line += m
			}
			line += "}"
			e, err := event.ParseEvent([]byte(line))
			if err == nil && plainEnvelope(e) {
				n++
				rec, _ := e.Record()
				if err := CheckEnvelope(rec, int(e.Seq)); err != nil {
					t.Errorf("%s: fast path accepted what CheckEnvelope rejects: %v", line, err)
				}
			}
		}
		if len(chosen) == 5 {
			return
		}
		for i := start; i < len(members); i++ {
			walk(i+1, append(chosen, members[i]))
		}
	}
	walk(0, nil)
	if n == 0 {
		t.Fatal("fast path never taken")
	}
}

// TestRowMembersArePlain: a member of a chunk row with a safe seq (what Prefix.RowMembers marks, and the
// load checks then do not scan) is an event plainEnvelope accepts — for every row the harness wrote in the
// fixtures and for rows at the edges of what the codec accepts.
func TestRowMembersArePlain(t *testing.T) {
	lines := []string{
		`{"type":"tool-call-chunks","seq0":0,"time0":-9007199254740991,"data":{"turn":1,"step":2,"index":0,"dt":[9007199254740991],"id":"c","name":"n","args":["{","}"]}}`,
		`{"type":"tool-call-chunks","seq0":3,"time0":0,"data":{"turn":1,"step":2,"index":1,"dt":[],"id":"c","args":["{\"message\":1}"]}}`,
		`{"type":"reasoning-chunks","seq0":7,"time0":-5,"data":{"turn":2.5,"step":-1,"index":3,"dt":[-1],"texts":["message","data"]}}`,
		`{"data":{"texts":["x","y"],"dt":[1],"index":1.5,"step":2,"turn":3},"time0":1,"seq0":0,"type":"text-chunks"}`,
		// JS rounding: the harness accepts this row, and its second member's seq is not safe
		`{"type":"text-chunks","seq0":9007199254740991,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[1],"texts":["a","b"]}}`,
	}
	err := filepath.WalkDir(fixtures.Path(t, "upstream", "raw"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".jsonl") {
			return err
		}
		data, err := os.ReadFile(path)
		for _, l := range strings.Split(string(data), "\n") {
			if strings.Contains(l, `-chunks","seq0":`) {
				lines = append(lines, l)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	members, unsafe := 0, 0
	for _, l := range lines {
		raw, err := event.Canonical([]byte(l))
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		evs, row, err := event.DecodeStored(raw)
		if err != nil || !row {
			t.Fatalf("%s: row %v, %v", l, row, err)
		}
		for _, e := range evs {
			if e.Seq < 0 { // not marked: the scanner's seq check refuses it first
				unsafe++
				continue
			}
			members++
			if !plainEnvelope(e) {
				t.Errorf("a row member the load checks would skip is not plain: %s", e.Raw)
			}
			if why := memberCheckFailure(e); why != "" {
				t.Errorf("a row member the passes skip %s: %s", why, e.Raw)
			}
		}
	}
	if members < 100 || unsafe != 1 {
		t.Fatalf("%d members checked, %d with an unsafe seq", members, unsafe)
	}
}

// TestBracketEventsPassEveryCheck guards bracketEvent, the load checks' unparsed path for turn and step
// brackets: whatever it accepts, parsed and run through every check the load makes of an event, passes
// each one and is not upgraded, and the number it returns is the one the repair planner reads. Its inputs
// are every bracket in the fixtures, edge cases, and each of those with one byte changed.
func TestBracketEventsPassEveryCheck(t *testing.T) {
	lines := []string{
		`{"type":"turn/start","seq":0,"time":0,"data":{"turn":0}}`,
		`{"type":"turn/start","seq":9007199254740991,"time":9007199254740991,"data":{"turn":9007199254740991}}`,
		`{"type":"turn/end","seq":3,"time":1,"data":{"turn":1,"reason":{"kind":"blocked"}}}`,
		`{"type":"turn/end","seq":3,"time":1,"data":{"turn":1,"reason":{"kind":"max-tokens"}}}`,
		`{"type":"turn/end","seq":3,"time":1,"data":{"turn":1,"reason":{"kind":"interrupted"}}}`,
		`{"type":"turn/end","seq":3,"time":1,"data":{"turn":2,"reason":{"kind":"aborted"}}}`,
		`{"type":"turn/end","seq":3,"time":1,"data":{"turn":2,"reason":{"kind":"disposed"}}}`,
		`{"type":"turn/end","seq":3,"time":1,"data":{"turn":2,"reason":{"kind":"error"}}}`,
		`{"type":"turn/end","seq":3,"time":1,"data":{"turn":0,"reason":{"kind":"completed"}}}`,
		`{"type":"step/start","seq":12,"time":1,"data":{"turn":1,"step":0}}`,
		`{"type":"step/end","seq":12,"time":1,"data":{"turn":1,"step":70}}`,
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":"user"}}}`,
	}
	fromFixtures := eventtest.FixtureLines(t, []string{"turn/start", "turn/end", "step/start", "step/end"}, fixtures.Path(t, "upstream", "raw"))
	fixtureBrackets := len(fromFixtures)
	lines = append(lines, fromFixtures...)
	base := len(lines)
	for i := range base {
		lines = append(lines, eventtest.OneByteMutations(lines[i], []byte{'0', '1', '9', '-', '.', 'e', '}', ',', '"', 'x'})...)
	}
	accepted, fixturesAccepted, refused := 0, 0, 0
	for i, l := range lines {
		e, err := event.ParseEvent([]byte(l))
		if err != nil {
			continue
		}
		n, ok := bracketEvent(e)
		if !ok {
			refused++
			continue
		}
		accepted++
		if i < base && i >= base-fixtureBrackets {
			fixturesAccepted++
		}
		if why := bracketCheckFailure(e, n); why != "" {
			t.Errorf("%s: accepted without parsing, but %s", l, why)
		}
	}
	if fixtureBrackets == 0 || fixturesAccepted*10 < fixtureBrackets*9 || refused < 100 || accepted < base {
		t.Fatalf("%d accepted (%d of the fixtures' %d brackets), %d refused: the test exercises too little",
			accepted, fixturesAccepted, fixtureBrackets, refused)
	}
	t.Logf("%d accepted (%d of the fixtures' %d brackets), %d refused", accepted, fixturesAccepted, fixtureBrackets, refused)
}

// bracketCheckFailure runs the load's checks of one event on its parsed record and says which one the
// event fails or what differs from the unparsed path's reading, "" when none.
func bracketCheckFailure(e event.Event, n float64) string {
	rec, why := recordCheckFailure(e)
	if why != "" {
		return why
	}
	if _, ok := eventMessageID(rec); ok {
		return "it carries a message id"
	}
	if e.Seq < 0 {
		return "its seq is not safe"
	}
	if markers(e) {
		return "it carries a surface marker"
	}
	parsed, fast := newTurnScan(), newTurnScan()
	for _, s := range []*turnScan{parsed, fast} { // a state every bracket changes
		s.openTurn, s.openStep = slotOf(event.Number(7), true), slotOf(event.Number(8), true)
		s.pending.set(s.pending.key(event.String("c"), true), &pendingCall{id: event.String("c"), idOK: true})
	}
	if err := parsed.step(e, &rec); err != nil {
		return "the planner fails: " + err.Error()
	}
	fast.stepBracket(e, n)
	if !reflect.DeepEqual(parsed, fast) {
		return fmt.Sprintf("the planner's state differs: parsed %+v, unparsed %+v", *parsed, *fast)
	}
	return ""
}

// recordCheckFailure parses e as the load checks do and runs on its record the checks every event goes
// through: the retired vocabulary, the upgrade (which must change nothing), the message shape, the known
// types, the envelope and the request header. It says which one fails, "" when none.
func recordCheckFailure(e event.Event) (event.Value, string) {
	rec, err := loadRecord(e)
	if err != nil {
		return rec, "it does not parse: " + err.Error()
	}
	for _, check := range retiredChecks {
		if err := check(e, rec, "s"); err != nil {
			return rec, "a retired-vocabulary check fails: " + err.Error()
		}
	}
	if _, changed, err := MigrateEvent(rec, "s", map[float64]string{}); err != nil || changed {
		return rec, fmt.Sprintf("the upgrade says changed %v, %v", changed, err)
	}
	if err := CheckMessageEventShape(rec, func() string { return "event" }); err != nil {
		return rec, "the message shape check fails: " + err.Error()
	}
	if !event.IsKnownType(e.Type) {
		return rec, "its type is unknown"
	}
	if e.Seq >= 0 {
		if err := CheckEnvelope(rec, int(e.Seq)); err != nil {
			return rec, "the envelope check fails: " + err.Error()
		}
	}
	if err := CheckSupportedRequestHeader(rec, func() string { return "event" }); err != nil {
		return rec, "the request header check fails: " + err.Error()
	}
	return rec, ""
}

// markers reports whether e has a surfaceOp or sourceEventSeqs member at its top level.
func markers(e event.Event) bool {
	found := false
	event.EachMember(e.Raw, func(name, _ []byte) bool {
		found = found || string(name) == "surfaceOp" || string(name) == "sourceEventSeqs"
		return true
	})
	return found
}

// memberCheckFailure says what of the passes the load skips for a row member (recMember) the member
// would not pass, "" when nothing: every pass but the seed check of its position must have nothing to say.
func memberCheckFailure(e event.Event) string {
	if e.Type != "assistant/chunk" {
		return "is of type " + e.Type
	}
	if markers(e) {
		return "carries a surface marker"
	}
	rec, err := e.Record()
	if err != nil {
		return "does not parse: " + err.Error()
	}
	for _, check := range retiredChecks {
		if err := check(e, rec, "s"); err != nil {
			return "fails a retired-vocabulary check: " + err.Error()
		}
	}
	if err := checkKnownType(vHeader("s"), e, "/p"); err != nil {
		return "fails the vocabulary check: " + err.Error()
	}
	s := newTurnScan()
	s.openTurn, s.openStep = slotOf(event.Number(7), true), slotOf(event.Number(8), true)
	before := *s
	if err := s.step(e, &rec); err != nil || !reflect.DeepEqual(before, *s) {
		return fmt.Sprintf("moves the repair planner (%v)", err)
	}
	return ""
}
