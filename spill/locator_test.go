package spill

import (
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/eventtest"
	"github.com/dshfs/dshfs/internal/fixtures"
)

// notice builds the harness's notice text exactly as spill-policy's spillNotice composes it.
func notice(omitted int, locator, hint string) string {
	return "(Omitted " + strconv.Itoa(omitted) + " bytes. Full formatted result stored at: " + locator + ". " + hint + ")"
}

func TestLocators(t *testing.T) {
	const p = "/tmp/dsh-spill-AbC123/session-5e53dc8acfe4/2ce9d7a31a38-bash.txt"
	cases := []struct {
		name string
		text string
		want []string
	}{
		{"notice only (no preview)", notice(1417, p, LocalRetrievalHint), []string{p}},
		{"preview then notice", "head\nxxxx\n...tail\n\n" + notice(5, p, LocalRetrievalHint), []string{p}},
		{"two notices", notice(1, p, LocalRetrievalHint) + "\n\n" + notice(2, "/r/b.txt", LocalRetrievalHint), []string{p, "/r/b.txt"}},
		{"same path twice kept by Locators", notice(1, p, LocalRetrievalHint) + " " + notice(1, p, LocalRetrievalHint), []string{p, p}},
		{"spaces in path", notice(3, "/tmp/my spill/a b.txt", LocalRetrievalHint), []string{"/tmp/my spill/a b.txt"}},
		{"parenthesis in path", notice(3, "/tmp/dir (1)/x).txt", LocalRetrievalHint), []string{"/tmp/dir (1)/x).txt"}},
		{"dot-space in path with the local hint", notice(3, "/tmp/a. b/c.txt", LocalRetrievalHint), []string{"/tmp/a. b/c.txt"}},
		{"another backend's hint", notice(3, "s3://bucket/k.txt", "Fetch it with the s3 tool."), []string{"s3://bucket/k.txt"}},
		{"empty hint", "(Omitted 3 bytes. Full formatted result stored at: /r/x.txt. )", []string{"/r/x.txt"}},
		{"no hint, closing parenthesis", "(Omitted 3 bytes. Full formatted result stored at: /r/x.txt)", []string{"/r/x.txt"}},
		{"truncated notice", "(Omitted 3 bytes. Full formatted result stored at: /r/x.t", nil},
		{"line break before any terminator", "Full formatted result stored at: /r/x\n. Use read)", nil},
		{"empty locator", "(Full formatted result stored at: . hint)", nil},
		{"no marker", "Full formatted result stored at:/no/space.txt. hint)", nil},
		{"marker quoted in prose then a real notice", "the phrase Full formatted result stored at: is odd\n" + notice(9, p, LocalRetrievalHint), []string{p}},
		{"non-ASCII path", notice(9, "/tmp/dsh-spill-x/é/ü.txt", LocalRetrievalHint), []string{"/tmp/dsh-spill-x/é/ü.txt"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Locators(c.text); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Locators(%q)\n got %q\nwant %q", c.text, got, c.want)
			}
		})
	}
}

// jsonText quotes s as a JSON string for building test events.
func jsonText(s string) string { return string(event.AppendQuote(nil, s)) }

func toolResult(seq int, callID string, texts ...string) string {
	blocks := make([]string, len(texts))
	for i, s := range texts {
		blocks[i] = `{"type":"text","text":` + jsonText(s) + `}`
	}
	return `{"type":"tool/result","seq":` + strconv.Itoa(seq) + `,"time":1,"data":{"turn":1,"step":1,"message":{"source":{"kind":"tool","callId":` +
		jsonText(callID) + `},"content":[{"type":"tool-result","toolCallId":` + jsonText(callID) + `,"content":[` +
		strings.Join(blocks, ",") + `],"isError":false}],"role":"user","id":"m` + strconv.Itoa(seq) + `"}},"surfaceOp":"append"}`
}

func codeDispatch(seq int, subCallID string, texts ...string) string {
	blocks := make([]string, len(texts))
	for i, s := range texts {
		blocks[i] = `{"type":"text","text":` + jsonText(s) + `}`
	}
	return `{"type":"tool/code-dispatch","seq":` + strconv.Itoa(seq) + `,"time":1,"data":{"rootCallId":"call_run","parentCallId":"call_run","subCallId":` +
		jsonText(subCallID) + `,"name":"read","arguments":{"path":"/x"},"isError":false,"content":[` + strings.Join(blocks, ",") + `]}}`
}

func TestExtract(t *testing.T) {
	a, b := "/spill/a.txt", "/spill/b.txt"
	events := eventtest.Events(t,
		`{"type":"session/start","seq":0,"time":1,"data":{}}`,
		// prose quoting a notice in a model message is not a citation
		`{"type":"assistant/message","seq":1,"time":1,"data":{"text":`+jsonText(notice(1, "/spill/ignored.txt", LocalRetrievalHint))+`}}`,
		toolResult(2, "call_1", "preview\n\n"+notice(10, a, LocalRetrievalHint)),
		// the same path twice in one text, and again in a second block: one locator; then a second path
		toolResult(3, "call_2", notice(1, a, LocalRetrievalHint)+notice(1, a, LocalRetrievalHint), notice(2, a, LocalRetrievalHint), notice(3, b, LocalRetrievalHint)),
		codeDispatch(4, "call_run:code:0", "head\n\n"+notice(7, b, LocalRetrievalHint)),
		// a non-text block is not read even if it carries a "text" member
		`{"type":"tool/result","seq":5,"time":1,"data":{"turn":1,"step":1,"message":{"source":{"kind":"tool","callId":"call_3"},"content":[{"type":"tool-result","toolCallId":"call_3","content":[{"type":"image","attachment":"x","text":`+jsonText(notice(1, "/spill/img.txt", LocalRetrievalHint))+`}],"isError":false}],"role":"user","id":"m5"}}}`,
		// a pruned replacement of seq 2 cites the same path again under its own seq
		toolResult(6, "call_1", "prev\n\n[... tool result middle pruned ...]\n\n"+notice(10, a, LocalRetrievalHint)),
		// a code-dispatch with no subCallId still yields its locator, with an empty call id
		`{"type":"tool/code-dispatch","seq":7,"time":1,"data":{"content":[{"type":"text","text":`+jsonText(notice(1, "/spill/c.txt", "hint"))+`}]}}`,
	)
	want := []Locator{
		{Seq: 2, CallID: "call_1", Path: a},
		{Seq: 3, CallID: "call_2", Path: a},
		{Seq: 3, CallID: "call_2", Path: b},
		{Seq: 4, CallID: "call_run:code:0", Path: b},
		{Seq: 6, CallID: "call_1", Path: a},
		{Seq: 7, CallID: "", Path: "/spill/c.txt"},
	}
	if got := Extract(events); !reflect.DeepEqual(got, want) {
		t.Fatalf("Extract\n got %+v\nwant %+v", got, want)
	}
	if got := Extract(nil); got != nil {
		t.Fatalf("Extract(nil) = %+v", got)
	}
}

// TestExtractFixtures runs over every golden session: only the two recorded spill sessions cite
// locators, and those point at the recording machine's temp paths, outside any root here.
func TestExtractFixtures(t *testing.T) {
	t.Setenv("DSH_HOME", t.TempDir())
	want := map[string][]Locator{
		"colliders/acp__bash-spill__session": {{Seq: 16, CallID: "call_spill",
			Path: "/tmp/dsh-acp-snap-ee77dff02/session-5e53dc8acfe4/2ce9d7a31a38-bash.txt"}},
		"colliders/acp__session-query-spill__session": {{Seq: 16, CallID: "call_session_query_spill",
			Path: "/tmp/dsh-acp-snap-035d1d054/session-aa56455bb13a/dfff8c2b8a66-session_event_read.txt"}},
	}
	files, err := filepath.Glob(filepath.Join(fixtures.Path(t, "golden"), "*", "*", "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("found only %d golden sessions", len(files))
	}
	found := 0
	roots := NewRoots(nil)
	for _, f := range files {
		rel, _ := filepath.Rel(fixtures.Path(t, "golden"), filepath.Dir(f))
		got := Extract(eventtest.ReadFile(t, f))
		if !reflect.DeepEqual(got, want[rel]) {
			t.Errorf("%s: Extract = %+v, want %+v", rel, got, want[rel])
		}
		if len(got) > 0 {
			found++
			rows := Index(got, roots, nil)
			if len(rows) != 1 || rows[0].Status != OutsideRoots || rows[0].File != "" {
				t.Errorf("%s: rows %+v, want one outside-roots row", rel, rows)
			}
		}
	}
	if found != len(want) {
		t.Fatalf("found locators in %d sessions, want %d", found, len(want))
	}
}
