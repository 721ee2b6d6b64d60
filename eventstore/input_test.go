package eventstore

import (
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
)

func TestParseInput(t *testing.T) {
	for _, c := range []struct {
		line string
		want string // the event's bytes, or "!" + a fragment of the error
	}{
		{`{"type":"plugin/x","data":{"a":1},"ignorable":true}`, `{"type":"plugin/x","seq":7,"time":99,"data":{"a":1},"ignorable":true}`},
		{`{ "data" : [1, 2.50, 1e3], "type" : "t" }`, `{"type":"t","seq":7,"time":99,"data":[1,2.5,1000]}`},
		{`{"surfaceOp":"append","sourceEventSeqs":[1],"data":{},"type":"user/message","time":5,"seq":7}`,
			`{"type":"user/message","seq":7,"time":5,"data":{},"sourceEventSeqs":[1],"surfaceOp":"append"}`},
		{`{"type":"t","data":"\u2028\ud800"}`, "{\"type\":\"t\",\"seq\":7,\"time\":99,\"data\":\"\u2028\\ud800\"}"},
		{`{"type":"t","data":null}`, `{"type":"t","seq":7,"time":99,"data":null}`},
		{`{"type":"t"}`, `!"data" is required`},
		{`{"data":{}}`, `!"type" must be a non-empty string`},
		{`{"type":"","data":{}}`, `!"type" must be a non-empty string`},
		{`{"type":"t","data":{},"seq":6}`, `!stale or wrong seq 6: the next seq is 7`},
		{`{"type":"t","data":{},"seq":"7"}`, `!stale or wrong seq "7"`},
		{`{"type":"t","data":{},"time":1.5}`, `!"time" must be a safe integer`},
		{`{"type":"t","data":{},"ignorable":false}`, `!"ignorable" may only be true`},
		{`{"type":"t","data":{},"extra":1}`, `!unknown key "extra"`},
		{`{"type":"t","data":{"n":-0}}`, `!negative zero`},
		{`{"type":"t","data":1e999}`, `!non-finite`},
		{`{"type":"t","data":{},"data":{}}`, `!duplicate key "data"`},
		{"{\"type\":\"t\",\"data\":\"\xc3\"}", `!invalid UTF-8`},
		{`[1]`, `!must be a JSON object`},
		// lines already in the stored form are kept as they are; any other order or spelling is re-encoded
		{`{"type":"t","seq":7,"time":5,"data":{"a":1}}`, `{"type":"t","seq":7,"time":5,"data":{"a":1}}`},
		{`{"type":"user/message","seq":7,"time":5,"data":{},"sourceEventSeqs":[1],"surfaceOp":"append"}`,
			`{"type":"user/message","seq":7,"time":5,"data":{},"sourceEventSeqs":[1],"surfaceOp":"append"}`},
		{`{"type":"plugin/x","seq":7,"time":5,"data":{},"ignorable":true,"surfaceOp":"append"}`,
			`{"type":"plugin/x","seq":7,"time":5,"data":{},"ignorable":true,"surfaceOp":"append"}`},
		{`{"type":"t","seq":7,"time":5,"data":{},"surfaceOp":"append","sourceEventSeqs":[1]}`,
			`{"type":"t","seq":7,"time":5,"data":{},"sourceEventSeqs":[1],"surfaceOp":"append"}`},
		{`{"seq":7,"type":"t","time":5,"data":{}}`, `{"type":"t","seq":7,"time":5,"data":{}}`},
		{`{"type":"t","seq":7,"time":5,"data":{"a":1.0}}`, `{"type":"t","seq":7,"time":5,"data":{"a":1}}`},
		{`{"type":"t","seq":7,"time":5,"data":{},"ignorable":false}`, `!"ignorable" may only be true`},
		{`{"type":"t","seq":7,"data":{}}`, `{"type":"t","seq":7,"time":99,"data":{}}`},
		{`{"type":"t","seq":7,"time":5,"data":{},"seq":7}`, `!duplicate key "seq"`},
		{`{"type":"t","data":{}} x`, `!not lossless JSON`},
	} {
		line := []byte(c.line)
		e, err := ParseInput(line, 7, 99)
		copy(line, make([]byte, len(line))) // the event keeps none of the caller's buffer
		if strings.HasPrefix(c.want, "!") {
			if err == nil || !strings.Contains(err.Error(), c.want[1:]) {
				t.Errorf("%s: error %v, want %q", c.line, err, c.want[1:])
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.line, err)
			continue
		}
		if string(e.Raw) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.line, e.Raw, c.want)
		}
		if !event.IsCanonical(e.Raw) || e.Seq != 7 {
			t.Errorf("%s: not a canonical event at seq 7: %s", c.line, e.Raw)
		}
	}
}

func TestCompactionLocked(t *testing.T) {
	for _, c := range []struct {
		types []string
		want  bool
	}{
		{nil, false},
		{[]string{`compaction/start {"compactionId":"a"}`}, true},
		{[]string{`compaction/start {"compactionId":"a"}`, `compaction/end {"compactionId":"a"}`}, false},
		// the harness's backward scan stops at the newest marker whatever its id: an end hides the start
		{[]string{`compaction/start {"compactionId":"a"}`, `compaction/end {"compactionId":"b"}`}, false},
		{[]string{`compaction/end {"compactionId":"a"}`, `compaction/start {"compactionId":"b"}`}, true},
		{[]string{`compaction/start {"compactionId":"a"}`, `session/end-seed`}, false},
		{[]string{`compaction/start {"compactionId":"a"}`, `session/end-seed`, `compaction/start {"compactionId":"b"}`}, true},
		{[]string{`compaction/start {}`}, true},
	} {
		var lines []string
		for i, s := range c.types {
			typ, data, _ := strings.Cut(s, " ")
			if data == "" {
				data = "{}"
			}
			lines = append(lines, `{"type":"`+typ+`","seq":`+string(rune('0'+i))+`,"time":1,"data":`+data+`}`)
		}
		var evs []event.Event
		for _, l := range lines {
			e, err := event.ParseEvent([]byte(l))
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, e)
		}
		if got := CompactionLocked(evs); got != c.want {
			t.Errorf("%v: %v, want %v", c.types, got, c.want)
		}
	}
}

func TestResultJSON(t *testing.T) {
	ok := Result{Command: "flush", Message: "done"}
	if got := string(ok.JSON()); got != `{"command":"flush","errno":null,"code":null,"message":"done","line":null}`+"\n" {
		t.Errorf("success: %s", got)
	}
	bad := Result{Command: "append", Err: &CommandError{Failure: Invalid, Code: CodeBadInput, Message: "m", Line: 3}}
	if got := string(bad.JSON()); got != `{"command":"append","errno":"EINVAL","code":"BAD_INPUT","message":"m","line":3}`+"\n" {
		t.Errorf("failure: %s", got)
	}
}
