package load

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
)

// TestBlockedChecksMatchWholeLogPasses runs the load's checks block by block, with blocks down to one
// event, over logs holding defects of every pass at random places, and compares error text, error type,
// normalized events and closers with the passes run over the whole log one after another (the way the
// harness runs them, and the way this package ran them before; oracleInspect below).
func TestBlockedChecksMatchWholeLogPasses(t *testing.T) {
	defer func(n int) { checkBlock = n }(checkBlock)
	rng := rand.New(rand.NewPCG(12, 1))
	errorsSeen := map[string]bool{}
	for round := range 400 {
		lines := randomLog(rng)
		stored := vEvents(t, lines...)
		failAt := int64(-1)
		if rng.IntN(4) == 0 {
			failAt = int64(rng.IntN(len(lines) + 2))
		}
		newSC := func() Surface { return failingSurface{at: failAt} }
		wantEv, wantCl, wantErr := oracleInspect("s", vHeader("s"), stored, "/p", newSC())
		wantRead, wantReadErr := oracleReadStored("s", vHeader("s"), stored, "/p")
		for _, block := range []int{1, 2, 3, 5, 8, 16384} {
			checkBlock = block
			ev, cl, err := inspectWith("s", vHeader("s"), stored, "/p", newSC())
			where := fmt.Sprintf("round %d, block %d, log:\n%s", round, block, strings.Join(lines, "\n"))
			sameResult(t, "Inspect", where, ev, cl, err, wantEv, wantCl, wantErr)
			read, err := readStored("s", vHeader("s"), stored, "/p")
			sameResult(t, "ReadStored", where, read, nil, err, wantRead, nil, wantReadErr)
		}
		if wantErr != nil {
			errorsSeen[digits.ReplaceAllString(wantErr.Error(), "N")] = true
		}
	}
	// the generator must reach many kinds of failure, or the comparison proves little
	if len(errorsSeen) < 12 {
		t.Fatalf("only %d kinds of error generated: %v", len(errorsSeen), errorsSeen)
	}
	t.Logf("%d kinds of error", len(errorsSeen))
}

func sameResult(t *testing.T, what, where string, ev, cl []event.Event, err error, wantEv, wantCl []event.Event, wantErr error) {
	t.Helper()
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("%s: error %v, want %v (%s)", what, err, wantErr, where)
	}
	var u, wu *UnsupportedError
	if errors.As(err, &u) != errors.As(wantErr, &wu) {
		t.Fatalf("%s: error type %T, want %T (%s)", what, err, wantErr, where)
	}
	if strings.Join(vLines(ev), "\n") != strings.Join(vLines(wantEv), "\n") || strings.Join(vLines(cl), "\n") != strings.Join(vLines(wantCl), "\n") {
		t.Fatalf("%s: events differ (%s)\ngot  %q %q\nwant %q %q", what, where, vLines(ev), vLines(cl), vLines(wantEv), vLines(wantCl))
	}
}

var digits = regexp.MustCompile(`[0-9]+`)

// failingSurface fails at the event with seq at (none when at is -1), and counts nothing else.
type failingSurface struct{ at int64 }

func (f failingSurface) Push(e event.Event) error {
	if e.Seq == f.at {
		return errors.New("surface says no")
	}
	return nil
}

// randomLog is a log of a few turns, with a few events replaced by ones that fail one pass or another
// (or by legacy shapes an upgrade rewrites), and sometimes cut inside a turn.
func randomLog(rng *rand.Rand) []string { return randomTurns(rng, 1+rng.IntN(3)) }

// randomTurns is randomLog with turns turns.
func randomTurns(rng *rand.Rand, turns int) []string {
	var tmpl []string
	for turn := 1; turn <= turns; turn++ {
		tmpl = append(tmpl,
			`{"type":"turn/start","seq":@,"time":1,"data":{"turn":`+strconv.Itoa(turn)+`}}`,
			`{"type":"user/message","seq":@,"time":2,"data":{"id":"u`+strconv.Itoa(turn)+`","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
			`{"type":"step/start","seq":@,"time":3,"data":{"turn":`+strconv.Itoa(turn)+`,"step":1}}`,
			`{"type":"assistant/chunk","seq":@,"time":3,"data":{"turn":1,"step":1,"text":"a"}}`,
			`{"type":"assistant/message","seq":@,"time":4,"data":{"turn":`+strconv.Itoa(turn)+`,"step":1,"message":{"id":"a`+strconv.Itoa(turn)+`","role":"assistant","content":[{"type":"tool-call","id":"call-`+strconv.Itoa(turn)+`","name":"read","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}`,
			`{"type":"tool/call","seq":@,"time":5,"data":{"turn":`+strconv.Itoa(turn)+`,"step":1,"callId":"call-`+strconv.Itoa(turn)+`","name":"read","arguments":"{}"}}`,
			`{"type":"tool/result","seq":@,"time":6,"data":{"turn":`+strconv.Itoa(turn)+`,"step":1,"message":{"id":"r`+strconv.Itoa(turn)+`","role":"user","content":[{"type":"tool-result","toolCallId":"call-`+strconv.Itoa(turn)+`","content":[{"type":"text","text":"ok"}],"isError":false}],"source":{"kind":"tool","callId":"call-`+strconv.Itoa(turn)+`"}}},"sourceEventSeqs":[@-1],"surfaceOp":"append"}`,
			`{"type":"step/end","seq":@,"time":7,"data":{"turn":`+strconv.Itoa(turn)+`,"step":1}}`,
			`{"type":"turn/end","seq":@,"time":8,"data":{"turn":`+strconv.Itoa(turn)+`,"reason":{"kind":"completed"}}}`,
		)
	}
	if rng.IntN(2) == 0 {
		tmpl = tmpl[:1+rng.IntN(len(tmpl))] // a crash inside a turn: closers
	}
	defects := []string{
		`{"type":"request/header-delta","seq":@,"time":1,"data":{}}`,
		`{"type":"mode/set","seq":@,"time":1,"data":{"mode":"plan"}}`,
		`{"type":"request/header","seq":@,"time":1,"data":{"header":{},"reason":"fallback"}}`,
		`{"type":"request/header","seq":@,"time":1,"data":null}`,
		`{"type":"user/message","seq":@,"time":2,"data":{"id":"x","role":"user","source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"user/message","seq":@,"time":2,"data":{"content":[{"type":"text","text":"old"}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"steering/message","seq":@,"time":4,"data":{"turn":1,"content":[],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"future/thing","seq":@,"time":1,"data":{}}`,
		`{"type":"future/thing","seq":@,"time":1,"data":{},"ignorable":true}`,
		`{"type":"turn/start","seq":@,"time":1,"data":null}`,
		`{"type":"step/start","seq":@,"time":3,"data":null}`,
		`{"type":"step/end","seq":@,"data":{"turn":1,"step":1}}`,
		`{"type":"assistant/message","seq":@,"time":4,"data":{"turn":1,"step":1,"message":{"id":"m","role":"assistant","content":"text","source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}`,
		`{"type":"tool/result","seq":@,"time":6,"data":{"turn":1,"step":1,"message":null}}`,
		`{"type":"assistant/chunk","seq":@,"time":3,"data":{"turn":1,"step":1,"text":"a"},"extra":1}`,
		`{"type":"assistant/chunk","seq":@,"time":1.5,"data":{"turn":1,"step":1,"text":"a"}}`,
		`{"type":"assistant/chunk","seq":@@,"time":3,"data":{"turn":1,"step":1,"text":"a"}}`,
		`{"type":"step/end","seq":@@,"time":7,"data":{"turn":1,"step":1}}`,
		// brackets a step away from the layout bracketEvent reads without parsing
		`{"type":"turn/end","seq":@,"time":8,"data":{"turn":0,"reason":{"kind":"completed"}}}`,
		`{"type":"turn/end","seq":@,"time":8,"data":{"turn":1,"reason":{"kind":"aborted"}}}`,
		`{"type":"turn/end","seq":@,"time":8,"data":{"turn":1,"reason":{"kind":"disposed"}}}`,
		`{"type":"turn/end","seq":@,"time":8,"data":{"turn":1,"reason":{"kind":"completed","x":1}}}`,
		`{"type":"turn/start","seq":@,"time":1,"data":{"turn":1,"trigger":{"kind":"user"}}}`,
		`{"type":"turn/start","seq":@,"time":1,"data":{"turn":1.5}}`,
		`{"type":"turn/start","seq":@,"time":1,"data":{"turn":9007199254740993}}`,
		`{"type":"step/start","seq":@,"time":3,"data":{"turn":1,"step":"1"}}`,
		`{"type":"step/start","seq":@,"time":3,"data":{"turn":1,"step":1},"ignorable":true}`,
		`{"type":"step/end","seq":@,"time":-7,"data":{"turn":1,"step":1}}`,
		`{"type":"step/end","seq":@,"time":9007199254740993,"data":{"turn":1,"step":1}}`,
	}
	for range rng.IntN(4) {
		d := defects[rng.IntN(len(defects))]
		at := rng.IntN(len(tmpl) + 1)
		if rng.IntN(2) == 0 && at < len(tmpl) {
			tmpl[at] = d
		} else {
			tmpl = append(tmpl[:at], append([]string{d}, tmpl[at:]...)...)
		}
	}
	out := make([]string, len(tmpl))
	for i, l := range tmpl {
		l = strings.ReplaceAll(l, "@@", strconv.Itoa(i+7)) // a seq out of place
		l = strings.ReplaceAll(l, "@-1", strconv.Itoa(max(i-1, 0)))
		out[i] = strings.ReplaceAll(l, "@", strconv.Itoa(i))
	}
	return out
}

// The whole-log passes, as this package ran them before the blocked checks (kept as the test's oracle).

type oracleParsed struct {
	recs  []event.Value
	plain []bool
}

func oracleNormalize(stored []event.Event, id string) ([]event.Event, *oracleParsed, error) {
	recs := make([]event.Value, len(stored))
	plain := make([]bool, len(stored))
	for i, e := range stored {
		if plainEnvelope(e) {
			plain[i] = true
			continue
		}
		rec, err := loadRecord(e)
		if err != nil {
			return nil, nil, err
		}
		recs[i] = rec
	}
	if err := CheckSupportedEvents(stored, recs, id); err != nil {
		return nil, nil, err
	}
	messageIDs := make(map[float64]string)
	out := make([]event.Event, len(stored))
	for i, rec := range recs {
		if plain[i] {
			out[i] = stored[i]
			continue
		}
		rec, changed, err := MigrateEvent(rec, id, messageIDs)
		if err != nil {
			return nil, nil, err
		}
		if changed {
			full, err := stored[i].Record()
			if err != nil {
				return nil, nil, err
			}
			if rec, _, err = MigrateEvent(full, id, messageIDs); err != nil {
				return nil, nil, err
			}
		}
		seq, seqOK := rec.Get("seq")
		if err := CheckMessageEventShape(rec, func() string { return "session event at seq " + JSString(seq, seqOK) }); err != nil {
			return nil, nil, err
		}
		if mid, ok := eventMessageID(rec); ok && seqOK && seq.Kind == event.KindNumber {
			messageIDs[seq.Num] = mid
		}
		recs[i] = rec
		if !changed {
			out[i] = stored[i]
			continue
		}
		e, err := event.NewEvent(event.Stringify(rec))
		if err != nil {
			return nil, nil, err
		}
		out[i] = e
	}
	return out, &oracleParsed{recs: recs, plain: plain}, nil
}

func oracleReadStored(id string, h event.Header, stored []event.Event, path string) ([]event.Event, error) {
	events, _, err := oracleRead(id, h, stored, path)
	return events, err
}

func oracleRead(id string, h event.Header, stored []event.Event, path string) ([]event.Event, *oracleParsed, error) {
	if err := checkStoredID(id, h); err != nil {
		return nil, nil, err
	}
	if err := checkVersion(h, path); err != nil {
		return nil, nil, err
	}
	events, parsed, err := oracleNormalize(stored, id)
	if err != nil {
		return nil, nil, err
	}
	if err := checkVocabulary(h, events, path); err != nil {
		return nil, nil, err
	}
	return events, parsed, nil
}

func oracleInspect(id string, h event.Header, stored []event.Event, path string, sc Surface) ([]event.Event, []event.Event, error) {
	events, closers, err := oracleInspectRaw(id, h, stored, path, sc)
	if err != nil {
		return nil, nil, inspectError(id, err)
	}
	return events, closers, nil
}

func oracleInspectRaw(id string, h event.Header, stored []event.Event, path string, sc Surface) ([]event.Event, []event.Event, error) {
	events, parsed, err := oracleRead(id, h, stored, path)
	if err != nil {
		return nil, nil, err
	}
	recs := parsed.recs
	closers, err := planClosers(events, recs)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range closers {
		rec, err := c.Record()
		if err != nil {
			return nil, nil, err
		}
		seq, seqOK := rec.Get("seq")
		if err := CheckMessageEventShape(rec, func() string { return "session event at seq " + JSString(seq, seqOK) }); err != nil {
			return nil, nil, err
		}
	}
	if err := checkRestoredHeader(id, h); err != nil {
		return nil, nil, err
	}
	all := append(append([]event.Event{}, events...), closers...)
	for index, e := range all {
		if index < len(recs) && parsed.plain[index] {
			if e.Seq != int64(index) {
				return nil, nil, errors.New("seed event at index " + strconv.Itoa(index) + " has seq " + e.SeqText() + " (expected " + strconv.Itoa(index) + "); seed must be contiguous from 0")
			}
			if sc != nil {
				if err := sc.Push(e); err != nil {
					return nil, nil, errors.New("invalid seed event at index " + strconv.Itoa(index) + ": " + err.Error())
				}
			}
			continue
		}
		var rec event.Value
		if index < len(recs) {
			rec = recs[index]
		} else if rec, err = e.Record(); err != nil {
			return nil, nil, err
		}
		if err := CheckEnvelope(rec, index); err != nil {
			return nil, nil, err
		}
		at := "seed event at index " + strconv.Itoa(index)
		if err := CheckSupportedRequestHeader(rec, func() string { return at }); err != nil {
			return nil, nil, err
		}
		if seq, _ := rec.Get("seq"); seq.Num != float64(index) {
			return nil, nil, errors.New(at + " has seq " + event.FormatNumber(seq.Num) + " (expected " + strconv.Itoa(index) + "); seed must be contiguous from 0")
		}
		if sc != nil {
			if err := sc.Push(e); err != nil {
				return nil, nil, errors.New("invalid " + at + ": " + err.Error())
			}
		}
	}
	return events, closers, nil
}

// TestFinishedBlocksOnce: a run's block arrays go to the next load once each, though the last block's are
// both the current ones and spare, so that two loads never parse into the same arrays.
func TestFinishedBlocksOnce(t *testing.T) {
	c := newLogCheck("s", vHeader("s"), nil, "/p", passCount, nil)
	a := parsedBlock{recs: make([]event.Value, 3), kind: make([]recKind, 3), quick: make([]quickMessage, 3)}
	b := parsedBlock{recs: make([]event.Value, 2), kind: make([]recKind, 2), quick: make([]quickMessage, 2)}
	c.recs, c.kind, c.quick = a.recs, a.kind, a.quick
	c.spare <- b
	c.spare <- a
	got := c.finishedBlocks()
	if len(got) != 2 || &got[0].recs[0] != &a.recs[0] || &got[1].recs[0] != &b.recs[0] {
		t.Fatalf("finished blocks %d, want the current block's arrays and the other spare's, once each", len(got))
	}
	if c.recs != nil || len(c.spare) != 0 {
		t.Fatalf("the run still holds arrays after handing them on")
	}
	if again := c.finishedBlocks(); len(again) != 0 {
		t.Fatalf("a second release hands on %d blocks", len(again))
	}
}

// TestBlockCap: arrays are made with room for a small load of another length, never below what is asked.
func TestBlockCap(t *testing.T) {
	for _, tc := range []struct{ n, want int }{{0, 128}, {93, 128}, {128, 128}, {129, 256}, {5000, 8192}, {16384, 16384}} {
		if got := blockCap(tc.n); got != tc.want {
			t.Errorf("blockCap(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
	defer func(n int) { checkBlock = n }(checkBlock)
	checkBlock = 3
	if got := blockCap(5); got != 5 {
		t.Errorf("blockCap(5) with blocks of 3 = %d, want 5", got)
	}
}
