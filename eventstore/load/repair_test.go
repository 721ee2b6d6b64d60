package load

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/internal/eventtest"
	"github.com/dshfs/dshfs/internal/fixtures"

	"github.com/dshfs/dshfs/eventstore/event"
)

// vSharedDir returns the shared/ directory; tests that need it fail, never skip, without it.
func vSharedDir(t *testing.T) string { return fixtures.Shared(t) }

// vReadLines reads a JSONL file's lines (without LF).
func vReadLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	if len(b) == 0 {
		return nil
	}
	return strings.Split(string(b), "\n")
}

const (
	amCall1 = `{"type":"assistant/message","seq":2,"time":2,"data":{"turn":2,"step":1,"message":{"id":"a1","role":"assistant","content":[{"type":"text","text":"calling a tool"},{"type":"tool-call","id":"call-1","name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"mock","model":"mock"}}},"surfaceOp":"append"}`
)

func TestClosers(t *testing.T) {
	notStarted := `The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed.`
	unknown := `The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.`
	cases := []struct {
		name string
		log  []string
		want []string
	}{
		{"empty log", nil, nil},
		{"balanced", []string{
			`{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}`,
			`{"type":"turn/end","seq":1,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
		}, nil},
		{"open turn without step", []string{
			`{"type":"turn/start","seq":0,"time":7,"data":{"turn":1}}`,
		}, []string{
			`{"type":"turn/end","seq":1,"time":7,"data":{"turn":1,"reason":{"kind":"interrupted"}}}`,
		}},
		{"open step", []string{
			`{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}`,
			`{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}`,
		}, []string{
			`{"type":"step/end","seq":2,"time":1,"data":{"turn":1,"step":1}}`,
			`{"type":"turn/end","seq":3,"time":1,"data":{"turn":1,"reason":{"kind":"interrupted"}}}`,
		}},
		// repair.spec.ts:50
		{"tool request with no recorded call is not started", []string{
			`{"type":"turn/start","seq":0,"time":0,"data":{"turn":2}}`,
			`{"type":"step/start","seq":1,"time":1,"data":{"turn":2,"step":1}}`,
			amCall1,
		}, []string{
			`{"type":"tool/result","seq":3,"time":2,"data":{"turn":2,"step":1,"message":{"id":"interrupted-tool-result-call-1-3","role":"user","source":{"kind":"tool","callId":"call-1"},"content":[{"type":"tool-result","toolCallId":"call-1","isError":true,"content":[{"type":"text","text":"` + notStarted + `"}]}]},"error":{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}},"surfaceOp":"append"}`,
			`{"type":"step/end","seq":4,"time":2,"data":{"turn":2,"step":1}}`,
			`{"type":"turn/end","seq":5,"time":2,"data":{"turn":2,"reason":{"kind":"interrupted"}}}`,
		}},
		{"answered call", []string{
			`{"type":"turn/start","seq":0,"time":0,"data":{"turn":2}}`,
			`{"type":"step/start","seq":1,"time":1,"data":{"turn":2,"step":1}}`,
			amCall1,
			`{"type":"tool/result","seq":3,"time":3,"data":{"turn":2,"step":1,"message":{"id":"t1","role":"user","source":{"kind":"tool","callId":"call-1"},"content":[{"type":"tool-result","toolCallId":"call-1","content":[],"isError":false}]}},"surfaceOp":"append"}`,
		}, []string{
			`{"type":"step/end","seq":4,"time":3,"data":{"turn":2,"step":1}}`,
			`{"type":"turn/end","seq":5,"time":3,"data":{"turn":2,"reason":{"kind":"interrupted"}}}`,
		}},
		// repair.spec.ts:119
		{"owning step already closed", []string{
			`{"type":"turn/start","seq":0,"time":0,"data":{"turn":2}}`,
			`{"type":"step/start","seq":1,"time":1,"data":{"turn":2,"step":1}}`,
			amCall1,
			`{"type":"step/end","seq":3,"time":3,"data":{"turn":2,"step":1}}`,
		}, []string{
			`{"type":"turn/end","seq":4,"time":3,"data":{"turn":2,"reason":{"kind":"interrupted"}}}`,
		}},
		// repair.spec.ts:144
		{"only the still-open turn", []string{
			`{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}`,
			`{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}`,
			`{"type":"assistant/message","seq":2,"time":2,"data":{"turn":1,"step":1,"message":{"id":"a0","role":"assistant","content":[{"type":"tool-call","id":"old-call","name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"mock","model":"mock"}}},"surfaceOp":"append"}`,
			`{"type":"turn/end","seq":3,"time":3,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
			`{"type":"turn/start","seq":4,"time":4,"data":{"turn":2}}`,
			`{"type":"step/start","seq":5,"time":5,"data":{"turn":2,"step":1}}`,
			`{"type":"assistant/message","seq":6,"time":6,"data":{"turn":2,"step":1,"message":{"id":"a1","role":"assistant","content":[{"type":"tool-call","id":"new-call","name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"mock","model":"mock"}}},"surfaceOp":"append"}`,
		}, []string{
			`{"type":"tool/result","seq":7,"time":6,"data":{"turn":2,"step":1,"message":{"id":"interrupted-tool-result-new-call-7","role":"user","source":{"kind":"tool","callId":"new-call"},"content":[{"type":"tool-result","toolCallId":"new-call","isError":true,"content":[{"type":"text","text":"` + notStarted + `"}]}]},"error":{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}},"surfaceOp":"append"}`,
			`{"type":"step/end","seq":8,"time":6,"data":{"turn":2,"step":1}}`,
			`{"type":"turn/end","seq":9,"time":6,"data":{"turn":2,"reason":{"kind":"interrupted"}}}`,
		}},
		// repair.spec.ts:229
		{"recorded call has unknown outcome", []string{
			`{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}`,
			`{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}`,
			`{"type":"assistant/message","seq":2,"time":2,"data":{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","content":[{"type":"tool-call","id":"call-1","name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"mock","model":"mock"}}},"surfaceOp":"append"}`,
			`{"type":"tool/call","seq":3,"time":3,"data":{"turn":1,"step":1,"callId":"call-1","name":"bash","arguments":"{}"}}`,
		}, []string{
			`{"type":"tool/result","seq":4,"time":3,"data":{"turn":1,"step":1,"message":{"id":"interrupted-tool-result-call-1-4","role":"user","source":{"kind":"tool","callId":"call-1"},"content":[{"type":"tool-result","toolCallId":"call-1","isError":true,"content":[{"type":"text","text":"` + unknown + `"}]}]},"error":{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}},"surfaceOp":"append","sourceEventSeqs":[3]}`,
			`{"type":"step/end","seq":5,"time":3,"data":{"turn":1,"step":1}}`,
			`{"type":"turn/end","seq":6,"time":3,"data":{"turn":1,"reason":{"kind":"interrupted"}}}`,
		}},
		// repair.spec.ts:263
		{"orphan tool/call", []string{
			`{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}`,
			`{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}`,
			`{"type":"tool/call","seq":2,"time":2,"data":{"turn":1,"step":1,"callId":"orphan","name":"bash","arguments":"{}"}}`,
		}, []string{
			`{"type":"step/end","seq":3,"time":2,"data":{"turn":1,"step":1}}`,
			`{"type":"turn/end","seq":4,"time":2,"data":{"turn":1,"reason":{"kind":"interrupted"}}}`,
		}},
		{"multiple unanswered calls in call order", []string{
			`{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}`,
			`{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}`,
			`{"type":"assistant/message","seq":2,"time":2,"data":{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","content":[{"type":"tool-call","id":"call-a","name":"bash","arguments":"{}"},{"type":"tool-call","id":"call-b","name":"bash","arguments":"{}"},{"type":"tool-call","id":"call-c","name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"mock","model":"mock"}}},"surfaceOp":"append"}`,
			`{"type":"tool/call","seq":3,"time":3,"data":{"turn":1,"step":1,"callId":"call-c","name":"bash","arguments":"{}"}}`,
			`{"type":"tool/call","seq":4,"time":4,"data":{"turn":1,"step":1,"callId":"call-a","name":"bash","arguments":"{}"}}`,
			`{"type":"tool/result","seq":5,"time":5,"data":{"turn":1,"step":1,"message":{"id":"t1","role":"user","source":{"kind":"tool","callId":"call-a"},"content":[{"type":"tool-result","toolCallId":"call-a","content":[],"isError":false}]}},"surfaceOp":"append","sourceEventSeqs":[4]}`,
		}, []string{
			`{"type":"tool/result","seq":6,"time":5,"data":{"turn":1,"step":1,"message":{"id":"interrupted-tool-result-call-b-6","role":"user","source":{"kind":"tool","callId":"call-b"},"content":[{"type":"tool-result","toolCallId":"call-b","isError":true,"content":[{"type":"text","text":"` + notStarted + `"}]}]},"error":{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}},"surfaceOp":"append"}`,
			`{"type":"tool/result","seq":7,"time":5,"data":{"turn":1,"step":1,"message":{"id":"interrupted-tool-result-call-c-7","role":"user","source":{"kind":"tool","callId":"call-c"},"content":[{"type":"tool-result","toolCallId":"call-c","isError":true,"content":[{"type":"text","text":"` + unknown + `"}]}]},"error":{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}},"surfaceOp":"append","sourceEventSeqs":[3]}`,
			`{"type":"step/end","seq":8,"time":5,"data":{"turn":1,"step":1}}`,
			`{"type":"turn/end","seq":9,"time":5,"data":{"turn":1,"reason":{"kind":"interrupted"}}}`,
		}},
		{"re-registered call keeps its place and forgets its tool/call", []string{
			`{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}`,
			`{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}`,
			`{"type":"assistant/message","seq":2,"time":2,"data":{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","content":[{"type":"tool-call","id":"x","name":"n","arguments":"{}"},{"type":"tool-call","id":"y","name":"n","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}`,
			`{"type":"tool/call","seq":3,"time":3,"data":{"turn":1,"step":1,"callId":"x","name":"n","arguments":"{}"}}`,
			`{"type":"assistant/message","seq":4,"time":4,"data":{"turn":1,"step":1,"message":{"id":"a2","role":"assistant","content":[{"type":"tool-call","id":"x","name":"n","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}`,
		}, []string{
			`{"type":"tool/result","seq":5,"time":4,"data":{"turn":1,"step":1,"message":{"id":"interrupted-tool-result-x-5","role":"user","source":{"kind":"tool","callId":"x"},"content":[{"type":"tool-result","toolCallId":"x","isError":true,"content":[{"type":"text","text":"` + notStarted + `"}]}]},"error":{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}},"surfaceOp":"append"}`,
			`{"type":"tool/result","seq":6,"time":4,"data":{"turn":1,"step":1,"message":{"id":"interrupted-tool-result-y-6","role":"user","source":{"kind":"tool","callId":"y"},"content":[{"type":"tool-result","toolCallId":"y","isError":true,"content":[{"type":"text","text":"` + notStarted + `"}]}]},"error":{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}},"surfaceOp":"append"}`,
			`{"type":"step/end","seq":7,"time":4,"data":{"turn":1,"step":1}}`,
			`{"type":"turn/end","seq":8,"time":4,"data":{"turn":1,"reason":{"kind":"interrupted"}}}`,
		}},
		{"turn/start whose turn is null leaves the log balanced", []string{
			`{"type":"turn/start","seq":0,"time":0,"data":{"turn":null}}`,
		}, nil},
		{"turn/start without a turn closes a turn without one", []string{
			`{"type":"turn/start","seq":0,"time":0,"data":{}}`,
		}, []string{
			`{"type":"turn/end","seq":1,"time":0,"data":{"reason":{"kind":"interrupted"}}}`,
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			events := vEvents(t, c.log...)
			got := Closers(events)
			eventtest.SameLines(t, vLines(got), c.want)
			if Balanced(events) != (len(c.want) == 0) {
				t.Fatalf("Balanced = %v with %d closers", Balanced(events), len(c.want))
			}
			if len(c.want) > 0 {
				// The closers must pass the harness's own seed checks (no surface checker here).
				if _, cl, err := inspectWith("s", vHeader("s"), events, "", nil); err != nil || len(cl) != len(c.want) {
					t.Fatalf("Inspect: %v (%d closers)", err, len(cl))
				}
			}
		})
	}
}

func TestOpenTurn(t *testing.T) {
	cases := []struct {
		log  []string
		turn int64
		open bool
	}{
		{nil, 0, false},
		{[]string{`{"type":"turn/start","seq":0,"time":0,"data":{"turn":3}}`}, 3, true},
		{[]string{`{"type":"turn/start","seq":0,"time":0,"data":{"turn":3}}`, `{"type":"turn/end","seq":1,"time":0,"data":{"turn":3,"reason":{"kind":"completed"}}}`}, 0, false},
		{[]string{`{"type":"turn/start","seq":0,"time":0,"data":{"turn":"x"}}`}, -1, true},
	}
	for i, c := range cases {
		turn, open := OpenTurn(vEvents(t, c.log...))
		if turn != c.turn || open != c.open {
			t.Errorf("case %d: got (%d, %v), want (%d, %v)", i, turn, open, c.turn, c.open)
		}
	}
}

func TestClosersTypeErrors(t *testing.T) {
	cases := []struct {
		name string
		log  []string
		want string
	}{
		{"turn/start null data", []string{`{"type":"turn/start","seq":0,"time":0,"data":null}`},
			"Cannot read properties of null (reading 'turn')"},
		{"step/start without data", []string{`{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}`, `{"type":"step/start","seq":1,"time":0}`},
			"Cannot read properties of undefined (reading 'step')"},
		{"tool/call null data", []string{`{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}`, `{"type":"tool/call","seq":1,"time":0,"data":null}`},
			"Cannot read properties of null (reading 'callId')"},
		{"null content block", []string{`{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}`,
			`{"type":"assistant/message","seq":1,"time":1,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[null],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}`},
			"Cannot read properties of null (reading 'type')"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			events := vEvents(t, c.log...)
			if _, err := PlanClosers(events); err == nil || err.Error() != c.want {
				t.Fatalf("PlanClosers: got %v, want %q", err, c.want)
			}
			if Closers(events) != nil {
				t.Fatal("Closers must yield nothing for an unplannable log")
			}
			var te *TypeError
			_, _, err := inspectWith("s", vHeader("s"), events, "", nil)
			if ce, ok := err.(*CorruptionError); !ok || !asTypeError(ce.Cause, &te) || te.Message != c.want {
				t.Fatalf("Inspect: got %v", err)
			}
		})
	}
}

func asTypeError(err error, te **TypeError) bool {
	t, ok := err.(*TypeError)
	*te = t
	return ok
}

func TestClosersWithNonStringCallIDFailShapeCheck(t *testing.T) {
	log := vEvents(t,
		`{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}`,
		`{"type":"step/start","seq":1,"time":0,"data":{"turn":1,"step":1}}`,
		`{"type":"assistant/message","seq":2,"time":1,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"tool-call","id":7}],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}`,
	)
	_, _, err := inspectWith("s", vHeader("s"), log, "", nil)
	want := `stored session "s" failed validation: Error: session event at seq 3 message must have tool source`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

// TestClosersGolden checks the planner against the harness's own repaired logs: for every golden session,
// Inspect over stored.jsonl must reproduce events.jsonl byte for byte (closers included), and ReadStored
// must reproduce stored.jsonl.
func TestClosersGolden(t *testing.T) {
	root := filepath.Join(vSharedDir(t), "fixtures", "golden")
	sets, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	total, repaired := 0, 0
	for _, set := range sets {
		if !set.IsDir() {
			continue
		}
		dirs, err := os.ReadDir(filepath.Join(root, set.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dirs {
			dir := filepath.Join(root, set.Name(), d.Name())
			if !d.IsDir() {
				continue
			}
			total++
			hb, err := os.ReadFile(filepath.Join(dir, "header.json"))
			if err != nil {
				t.Fatal(err)
			}
			meta := bytes.TrimSpace(hb)
			noDepth := !bytes.Contains(meta, []byte(`"delegationDepth":`))
			if noDepth {
				// a SQLite provider's top-level session (delegation_depth NULL): a header line needs one
				meta = append(meta[:len(meta)-1:len(meta)-1], `,"delegationDepth":0}`...)
			}
			h, err := event.ParseHeaderLine(append([]byte(`{"type":"session",`+string(meta[1:])), '\n'))
			if err != nil {
				t.Fatalf("%s: header: %v", dir, err)
			}
			h.NoDelegationDepth = noDepth
			storedLines := vReadLines(t, filepath.Join(dir, "stored.jsonl"))
			wantAll := vReadLines(t, filepath.Join(dir, "events.jsonl"))
			got, err := readStored(h.ID, h, vEvents(t, storedLines...), "")
			if err != nil {
				t.Fatalf("%s: ReadStored: %v", dir, err)
			}
			eventtest.SameLines(t, vLines(got), storedLines)
			events, closers, err := inspectWith(h.ID, h, vEvents(t, storedLines...), "", nil)
			if err != nil {
				t.Fatalf("%s: Inspect: %v", dir, err)
			}
			if len(closers) > 0 {
				repaired++
			}
			eventtest.SameLines(t, append(vLines(events), vLines(closers)...), wantAll)
			if Balanced(events) != (len(closers) == 0) {
				t.Fatalf("%s: Balanced disagrees with %d closers", dir, len(closers))
			}
		}
	}
	if total < 100 || repaired < 2 {
		t.Fatalf("golden sets too small: %d sessions, %d repaired", total, repaired)
	}
}

func TestClosersGoldenCrash(t *testing.T) {
	// The crash session of the generated set: the last three lines of events.jsonl are the closers.
	dir := filepath.Join(vSharedDir(t), "fixtures", "golden", "generated-raw", "main-session-30628611-e45f-4f98-9688-010e1428e585")
	stored := vReadLines(t, filepath.Join(dir, "stored.jsonl"))
	all := vReadLines(t, filepath.Join(dir, "events.jsonl"))
	got := Closers(vEvents(t, stored...))
	eventtest.SameLines(t, vLines(got), all[len(stored):])
	if len(got) != 3 || got[0].Type != "tool/result" {
		t.Fatalf("want tool/result, step/end, turn/end; got %v", vLines(got))
	}
}
