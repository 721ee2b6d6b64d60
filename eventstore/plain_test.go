package eventstore

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/fixtures"
)

// TestPlainEnvelopeAgreesWithCheckEnvelope guards the unparsed fast path: whenever plainEnvelope accepts an
// event, the full checkEnvelope must accept it too (a rejection only sends the event down the full path).
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
				if err := checkEnvelope(rec, int(e.Seq)); err != nil {
					t.Errorf("%s: fast path accepted what checkEnvelope rejects: %v", line, err)
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
		}
	}
	if members < 100 || unsafe != 1 {
		t.Fatalf("%d members checked, %d with an unsafe seq", members, unsafe)
	}
}
