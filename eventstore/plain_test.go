package eventstore

import (
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
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
