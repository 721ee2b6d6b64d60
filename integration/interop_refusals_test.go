package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/harness"
)

// Lines reused by the constructed sessions below.
const (
	hdr     = `{"type":"session","version":0,"id":"ID","createdAt":1000,"cwd":"/home/dev/p","delegationDepth":0}`
	tStart  = `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`
	uMsg    = `{"type":"user/message","seq":1,"time":2,"data":{"id":"u1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}`
	tEnd    = `{"type":"turn/end","seq":2,"time":3,"data":{"turn":1,"reason":{"kind":"completed"}}}`
	tStart2 = `{"type":"turn/start","seq":3,"time":4,"data":{"turn":2}}`
)

// TestHarnessAgreesOnConstructedSessions writes sessions with one defect or legacy shape each into a raw
// root, and requires dshfs's inspect() and readFrom() to give what the harness's own packages give: the
// same events, or the same error text (raw-log paths included).
func TestHarnessAgreesOnConstructedSessions(t *testing.T) {
	h := harness.Get(t)
	cases := map[string][]string{
		"clean":                {hdr, tStart, uMsg, tEnd},
		"torn-line":            {hdr, tStart, uMsg, tEnd, `{"type":"turn/start","seq":3,"ti`},
		"corrupt-before-end":   {hdr, tStart, `{"type":`, tEnd},
		"corrupt-after-end":    {hdr, tStart, uMsg, tEnd, `{"type":`},
		"seq-gap-before-end":   {hdr, tStart, `{"type":"user/message","seq":5,"time":2,"data":{}}`, tEnd},
		"version-1":            {strings.Replace(hdr, `"version":0`, `"version":1`, 1), tStart},
		"version-minus-1":      {strings.Replace(hdr, `"version":0`, `"version":-1`, 1), tStart},
		"no-delegation-depth":  {strings.Replace(hdr, `,"delegationDepth":0`, ``, 1), tStart},
		"retired-sandbox-mode": {strings.Replace(hdr, `"delegationDepth":0`, `"delegationDepth":0,"sandboxMode":"x"`, 1), tStart},
		"relative-cwd":         {strings.Replace(hdr, `"/home/dev/p"`, `"rel/p"`, 1), tStart},
		"unknown-type":         {hdr, tStart, `{"type":"plugin/new","seq":1,"time":2,"data":null}`},
		"ignorable-type":       {hdr, tStart, `{"type":"plugin/new","seq":1,"time":2,"data":null,"ignorable":true}`, `{"type":"turn/end","seq":2,"time":3,"data":{"turn":1,"reason":{"kind":"completed"}}}`},
		"header-delta":         {hdr, tStart, `{"type":"request/header-delta","seq":1,"time":2,"data":{}}`},
		"mode-set-ignorable":   {hdr, tStart, `{"type":"mode/set","seq":1,"time":2,"data":{},"ignorable":true}`},
		"fallback-reason":      {hdr, tStart, `{"type":"request/header","seq":1,"time":2,"data":{"header":{"config":{"provider":"p","model":"m"}},"reason":"fallback"}}`},
		"legacy-trigger":       {hdr, `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":"user"}}}`, tEnd[:0] + `{"type":"turn/end","seq":1,"time":3,"data":{"turn":1,"reason":{"kind":"disposed"}}}`},
		"legacy-error-reason":  {hdr, tStart, `{"type":"turn/end","seq":1,"time":3,"data":{"turn":1,"reason":{"kind":"error","step":1,"message":"boom"}}}`},
		"legacy-steering":      {hdr, tStart, `{"type":"steering/message","seq":1,"time":2,"data":{"turn":1,"content":[{"type":"text","text":"x"}],"source":{"kind":"user"}},"surfaceOp":"append"}`, tEnd},
		"legacy-user-message":  {hdr, tStart, `{"type":"user/message","seq":1,"time":2,"data":{"content":[{"type":"text","text":"x"}],"source":{"kind":"user"}},"surfaceOp":"append"}`, tEnd},
		"extra-envelope-key":   {hdr, tStart, `{"type":"turn/end","seq":1,"time":3,"data":{"turn":1,"reason":{"kind":"completed"}},"extra":1}`},
		"no-surface-op":        {hdr, tStart, `{"type":"user/message","seq":1,"time":2,"data":{"id":"u1","role":"user","content":[],"source":{"kind":"user"}}}`},
		"bad-replace":          {hdr, tStart, uMsg, `{"type":"user/message","seq":2,"time":3,"data":{"id":"u2","role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":{"op":"replace","start":9,"end":9},"sourceEventSeqs":[1]}`},
		"open-turn-tool-call": {hdr, tStart,
			`{"type":"step/start","seq":1,"time":2,"data":{"turn":1,"step":1}}`,
			`{"type":"assistant/message","seq":2,"time":3,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"bash","arguments":"{}"},{"type":"tool-call","id":"c2","name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}}},"sourceEventSeqs":[],"surfaceOp":"append"}`,
			`{"type":"tool/call","seq":3,"time":4,"data":{"turn":1,"step":1,"callId":"c1","name":"bash","arguments":"{}"}}`},
		"message-without-id": {hdr, tStart, `{"type":"user/message","seq":1,"time":2,"data":{"id":"","role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}`},
		"lone-surrogate":     {hdr, tStart, `{"type":"user/message","seq":1,"time":2,"data":{"id":"u\ud800","role":"user","content":[{"type":"text","text":"\udc00 \u2028 <&>"}],"source":{"kind":"user"}},"surfaceOp":"append"}`, tEnd},
		"non-canonical":      {hdr, tStart, `{ "type" : "turn/end", "data":{"reason":{"kind":"completed"},"turn":1.0,"2":0,"1":1}, "seq":1, "time":3e0 }`},
	}
	root := t.TempDir()
	var ids []string
	for id, lines := range cases {
		dir := filepath.Join(root, "--home-dev-p--", id)
		if strings.Contains(lines[0], `"rel/p"`) {
			dir = filepath.Join(root, "--rel-p--", id)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		lines = append([]string(nil), lines...)
		lines[0] = strings.Replace(lines[0], `"ID"`, `"`+id+`"`, 1)
		content := strings.Join(lines, "\n") + "\n"
		if strings.HasPrefix(id, "torn") {
			content = strings.TrimSuffix(content, "\n")
		}
		if err := os.WriteFile(filepath.Join(dir, "session.jsonl"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	answers, err := h.Dump(root, ids...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := jsonl.Open(root, jsonl.None)
	if err != nil {
		t.Fatal(err)
	}
	st := eventstore.New(b)
	ctx := context.Background()
	refused := 0
	for i, a := range answers {
		id := ids[i]
		ins, err := st.Inspect(ctx, id)
		switch {
		case a.Error != "":
			refused++
			if err == nil || err.Error() != a.Error {
				t.Errorf("%s inspect: dshfs %v\nharness %s", id, err, a.Error)
			}
		case err != nil:
			t.Errorf("%s: dshfs refuses (%v), the harness's inspect reads it", id, err)
		default:
			if d := diff(lineStrings(ins.Events), a.Events); d != "" {
				t.Errorf("%s inspect: %s", id, d)
			}
		}
		stored, err := st.ReadFrom(ctx, id, 0)
		switch {
		case a.StoredError != "":
			if err == nil || err.Error() != a.StoredError {
				t.Errorf("%s readFrom: dshfs %v\nharness %s", id, err, a.StoredError)
			}
		case err != nil:
			t.Errorf("%s: dshfs readFrom refuses (%v), the harness reads it", id, err)
		default:
			if d := diff(lineStrings(stored.Events), a.Stored); d != "" {
				t.Errorf("%s readFrom: %s", id, d)
			}
		}
	}
	if refused < 10 || refused == len(ids) {
		t.Fatalf("%d of %d constructed sessions refused: the cases no longer cover both sides", refused, len(ids))
	}
}
