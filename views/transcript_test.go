package views_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/demo"
	"github.com/dshfs/dshfs/internal/fixtures"
	"github.com/dshfs/dshfs/views"
)

var updateTranscripts = flag.Bool("update-transcripts", false, "rewrite testdata/transcript from the current renderer")

// transcriptStores are the stores whose every session has a pinned transcript: the harness's generated
// sessions (clean, crash, torn crash, two compactions, fork) and the demo store (unknown outcome, spill
// locator, fork boundary).
func transcriptStores(t *testing.T) (stores map[string]*eventstore.Store, demoDir string) {
	open := func(root string) *eventstore.Store {
		b, err := jsonl.Open(root, "")
		if err != nil {
			t.Fatal(err)
		}
		return eventstore.New(b)
	}
	dir := t.TempDir()
	if err := demo.Write(dir); err != nil {
		t.Fatal(err)
	}
	return map[string]*eventstore.Store{
		"generated": open(fixtures.CopyTree(t, fixtures.Path(t, "generated", "zstd"))),
		"demo":      open(filepath.Join(dir, "sessions")),
	}, dir
}

// TestTranscriptGolden pins transcript.md of every session of transcriptStores (reviewed by reading them),
// renders each twice to show it deterministic, and checks its structure with a CommonMark parser.
func TestTranscriptGolden(t *testing.T) {
	ctx := context.Background()
	stores, demoDir := transcriptStores(t)
	for name, st := range stores {
		l, err := st.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Entries) == 0 {
			t.Fatalf("%s: no sessions", name)
		}
		for _, e := range l.Entries {
			s, err := views.Load(ctx, st, e.ID, views.Options{})
			if err != nil || s.Refusal != nil {
				t.Fatalf("%s/%s: %v %v", name, e.ID, err, s.Refusal)
			}
			got, err := s.Render(ctx, views.Transcript)
			if err != nil {
				t.Fatalf("%s/%s: %v", name, e.ID, err)
			}
			again, _ := s.Render(ctx, views.Transcript)
			if !bytes.Equal(got, again) {
				t.Errorf("%s/%s: two renderings differ", name, e.ID)
			}
			checkMarkdown(t, e.ID, got, s)
			page, err := s.Render(ctx, views.TranscriptHTML)
			if err != nil {
				t.Fatalf("%s/%s: %v", name, e.ID, err)
			}
			checkHTML(t, e.ID, page, got, len(s.Events()))
			// the demo's spill file lies in the test's own directory, which its locator names
			for ext, b := range map[string][]byte{".md": got, ".html": page} {
				b = bytes.ReplaceAll(b, []byte(demoDir), []byte("DEMO"))
				path := filepath.Join("testdata", "transcript", name, e.ID+ext)
				if *updateTranscripts {
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, b, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test ./views -run TestTranscriptGolden -update-transcripts, then read the files)", err)
				}
				if !bytes.Equal(b, want) {
					t.Errorf("%s/%s: transcript differs from %s", name, e.ID, path)
				}
			}
		}
	}
}

// checkMarkdown parses a transcript as CommonMark and checks what a reader navigates by: one level-2
// heading "Turn N" per turn/start in order, level-3 step headings only below them, and no raw HTML but
// the transcript's own folded reasoning.
func checkMarkdown(t *testing.T, id string, md []byte, s *views.Session) {
	t.Helper()
	if !strings.HasSuffix(string(md), "\n") || strings.Contains(string(md), "\r") {
		t.Errorf("%s: not LF-terminated lines", id)
	}
	doc := goldmark.New().Parser().Parse(text.NewReader(md))
	var turns []string
	err := ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Heading:
			title := string(n.Lines().Value(md))
			if n.Level == 2 && strings.HasPrefix(title, "Turn ") {
				turns = append(turns, title)
			}
		case *ast.HTMLBlock:
			var b strings.Builder
			for i := 0; i < n.Lines().Len(); i++ {
				seg := n.Lines().At(i)
				b.Write(seg.Value(md))
			}
			if html := strings.TrimSpace(b.String()); html != "<details><summary>Reasoning</summary>" && html != "</details>" {
				t.Errorf("%s: raw HTML block %q", id, html)
			}
		case *ast.RawHTML:
			seg := n.Segments.At(0)
			t.Errorf("%s: inline raw HTML at %q", id, seg.Value(md))
		}
		return ast.WalkContinue, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range s.Events() {
		if e.Type == "turn/start" {
			m := regexp.MustCompile(`"turn":(\d+)`).FindSubmatch(e.Raw)
			want = append(want, "Turn "+string(m[1]))
		}
	}
	if strings.Join(turns, ",") != strings.Join(want, ",") {
		t.Errorf("%s: turn headings %q, want %q", id, turns, want)
	}
}

// checkHTML checks the page as a browser needs it: one document whose elements all close, a table of
// contents entry and a heading per turn section, every mark of the Markdown transcript, an anchor per
// event, and nothing fetched or run (no script, no absolute URL).
func checkHTML(t *testing.T, id string, page, md []byte, events int) {
	t.Helper()
	p := string(page)
	if !strings.HasPrefix(p, "<!DOCTYPE html>\n") || !strings.HasSuffix(p, "</html>\n") {
		t.Errorf("%s: not one HTML document", id)
	}
	for _, bad := range []string{"<script", "http://", "https://", "src=", "@import", "url("} {
		if strings.Contains(p, bad) {
			t.Errorf("%s: the page holds %q", id, bad)
		}
	}
	// every element opened is closed, in order (the page uses no void element but meta)
	var stack []string
	for _, m := range regexp.MustCompile(`<(/?)([a-z0-9]+)[^>]*>`).FindAllStringSubmatch(p, -1) {
		switch name := m[2]; {
		case name == "meta":
		case m[1] == "":
			stack = append(stack, name)
		case len(stack) == 0 || stack[len(stack)-1] != name:
			t.Fatalf("%s: </%s> closes %v", id, name, stack)
		default:
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) != 0 {
		t.Errorf("%s: unclosed %v", id, stack)
	}
	if got, want := strings.Count(p, "<strong>[!] "), strings.Count(string(md), "> **[!] "); got != want {
		t.Errorf("%s: %d marks in the page, %d in the Markdown", id, got, want)
	}
	for _, h := range regexp.MustCompile(`(?m)^## (.*)$`).FindAllStringSubmatch(string(md), -1) {
		anchor := strings.ToLower(strings.ReplaceAll(h[1], " ", "-"))
		if !strings.Contains(p, `<h2 id="`+anchor+`">`+h[1]+`</h2>`) || !strings.Contains(p, `<a href="#`+anchor+`">`+h[1]+`</a>`) {
			t.Errorf("%s: section %q has no heading or no entry in the contents", id, h[1])
		}
	}
	if n := strings.Count(p, `<a id="seq-`); n != events {
		t.Errorf("%s: %d anchors for %d events", id, n, events)
	}
}

// TestTranscriptMarks shows each mark the pinned sessions lack, on logs made for it.
func TestTranscriptMarks(t *testing.T) {
	const (
		turn1   = `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`
		step1   = `{"type":"step/start","seq":1,"time":2,"data":{"turn":1,"step":1}}`
		user    = `{"type":"user/message","seq":2,"time":3,"data":{"id":"u","role":"user","content":[{"type":"text","text":"<b>hi</b> & bye"}],"source":{"kind":"user"}},"surfaceOp":"append"}`
		asst    = `{"type":"assistant/message","seq":3,"time":4,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"bash","arguments":"{\"command\":\"ls\"}"}],"source":{"kind":"model","provider":"p","model":"m"}}},"sourceEventSeqs":[],"surfaceOp":"append"}`
		call    = `{"type":"tool/call","seq":4,"time":5,"data":{"turn":1,"step":1,"callId":"c1","name":"bash","arguments":"{\"command\":\"ls\"}"}}`
		unknown = `{"type":"tool/result","seq":5,"time":6,"data":{"turn":1,"step":1,"message":{"id":"r","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"TOOL_OUTCOME_UNKNOWN"}],"isError":true}],"source":{"kind":"tool","callId":"c1"}},"error":{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}},"sourceEventSeqs":[4],"surfaceOp":"append"}`
	)
	tests := []struct {
		name  string
		lines []string
		want  []string
	}{
		{"repaired crash", []string{turn1, step1, user, asst, call, unknown,
			`{"type":"step/end","seq":6,"time":7,"data":{"turn":1,"step":1}}`,
			`{"type":"turn/end","seq":7,"time":8,"data":{"turn":1,"reason":{"kind":"interrupted"}}}`,
			`{"type":"session/end-seed","seq":8,"time":9,"data":{}}`},
			[]string{"> **[!] Unknown outcome** (seq 4): the session crashed before a result was recorded; the repair at seq 5",
				"> **[!] Crash repair** (seq 7): turn 1 was closed as `interrupted`",
				"> **[!] Resume boundary** (seq 8)",
				"> &lt;b&gt;hi&lt;/b&gt; &amp; bye",
				"**Tool result (error)** (seq 5, call `c1`)"}},
		{"prune", []string{turn1, step1, user, asst, call,
			`{"type":"tool/result","seq":5,"time":6,"data":{"turn":1,"step":1,"message":{"id":"r","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"a long listing"}],"isError":false}],"source":{"kind":"tool","callId":"c1"}}},"sourceEventSeqs":[4],"surfaceOp":"append"}`,
			`{"type":"compaction/prune","seq":6,"time":7,"data":{"shadowedRange":{"start":5,"end":5},"shadowedSeqs":[5],"shadowedTokenCount":100}}`,
			`{"type":"tool/result","seq":7,"time":7,"data":{"turn":1,"step":1,"message":{"id":"r","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"[pruned]"}],"isError":false}],"source":{"kind":"tool","callId":"c1"}}},"sourceEventSeqs":[4,5],"surfaceOp":{"op":"replace","start":5,"end":5}}`,
			`{"type":"step/end","seq":8,"time":8,"data":{"turn":1,"step":1}}`,
			`{"type":"turn/end","seq":9,"time":9,"data":{"turn":1,"reason":{"kind":"completed"}}}`},
			[]string{"> **[!] Pruned** (seq 6): event seq 5 replaced by the shorter result at seq 7; the originals are in [shadowed/](shadowed/).",
				"> **[!] Shadowed** (seq 5): a compaction or prune replaced this"}},
		{"failed compaction", []string{user,
			`{"type":"compaction/start","seq":1,"time":6,"data":{"compactionId":"c","turn":null}}`,
			`{"type":"compaction/end","seq":2,"time":7,"data":{"compactionId":"c","turn":null,"error":"summary unavailable"}}`},
			[]string{"> **[!] Failed compaction** (seq 1, [compactions/c.json](compactions/c.json)): summary unavailable; nothing was replaced."}},
		{"stale compaction", []string{turn1,
			`{"type":"compaction/start","seq":1,"time":6,"data":{"compactionId":"s","turn":1}}`,
			`{"type":"turn/end","seq":2,"time":7,"data":{"turn":1,"reason":{"kind":"interrupted"}}}`,
			`{"type":"session/end-seed","seq":3,"time":8,"data":{}}`},
			[]string{"> **[!] Stale compaction** (seq 1, [compactions/s.json](compactions/s.json))"}},
		{"open compaction", []string{user, `{"type":"compaction/start","seq":1,"time":6,"data":{"compactionId":"o","turn":null}}`},
			[]string{"> **[!] Compaction in progress** (seq 1"}},
		{"open turn", []string{turn1, step1, user, asst, call},
			[]string{"> **[!] Unknown outcome** (seq 4): no result was recorded for this call.",
				"## Open turn", "A `resume` would close it with"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := load(t, renumber(tt.lines)...)
			b, err := s.Render(context.Background(), views.Transcript)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("transcript lacks %q:\n%s", w, b)
				}
			}
			checkMarkdown(t, tt.name, b, s)
		})
	}
}

// A refused session has no transcript: rendering it is the refusal.
func TestTranscriptOfRefusedSession(t *testing.T) {
	st := store(t, `{"type":"plugin/unknown","seq":0,"time":6,"data":null}`)
	s, err := views.Load(context.Background(), st, "s", views.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Render(context.Background(), views.Transcript); err == nil || err != s.Refusal {
		t.Fatalf("transcript of a refused session: %v (refusal %v)", err, s.Refusal)
	}
}

// renumber gives the lines seqs 0, 1, 2, … in order, so a case can reuse a line at another position.
func renumber(lines []string) []string {
	seq := regexp.MustCompile(`"seq":\d+`)
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = seq.ReplaceAllString(l, `"seq":`+strconv.Itoa(i))
	}
	return out
}

// TestUsageGolden pins usage.jsonl of the transcript stores' sessions and checks usage.svg as a viewer needs
// it: well-formed XML, no script, a labelled element per marker the log's compactions, prunes, repairs and
// boundaries give, and the context line through every step that recorded usage.
func TestUsageGolden(t *testing.T) {
	ctx := context.Background()
	stores, _ := transcriptStores(t)
	for name, st := range stores {
		l, err := st.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range l.Entries {
			s, err := views.Load(ctx, st, e.ID, views.Options{})
			if err != nil || s.Refusal != nil {
				t.Fatalf("%s/%s: %v %v", name, e.ID, err, s.Refusal)
			}
			got, err := s.Render(ctx, views.Usage)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "usage", name, e.ID+".jsonl")
			if *updateTranscripts {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			} else if want, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s/%s: usage.jsonl differs from %s (%v)", name, e.ID, path, err)
			}
			steps, markers, err := s.Usage()
			if err != nil {
				t.Fatal(err)
			}
			svg, err := s.Render(ctx, views.UsageSVG)
			if err != nil {
				t.Fatal(err)
			}
			d := xml.NewDecoder(bytes.NewReader(svg))
			for {
				if _, err := d.Token(); err == io.EOF {
					break
				} else if err != nil {
					t.Fatalf("%s/%s: usage.svg is not well-formed: %v", name, e.ID, err)
				}
			}
			if strings.Contains(string(svg), "<script") {
				t.Errorf("%s/%s: usage.svg holds a script", name, e.ID)
			}
			if n := strings.Count(string(svg), `<g class="marker">`); n != len(markers) {
				t.Errorf("%s/%s: %d markers drawn, %d in the log", name, e.ID, n, len(markers))
			}
			for _, m := range markers {
				if !strings.Contains(string(svg), ">"+m.Label+" "+strconv.FormatInt(m.Seq, 10)+"</text>") {
					t.Errorf("%s/%s: marker %s at %d not labelled", name, e.ID, m.Label, m.Seq)
				}
			}
			used := 0
			for _, st := range steps {
				if st.From != "none" {
					used++
				}
			}
			if strings.Count(string(svg), "<circle ") != used {
				t.Errorf("%s/%s: %d points for %d steps with usage", name, e.ID, strings.Count(string(svg), "<circle "), used)
			}
		}
	}
}

// TestUsageAccounting: a step's usage chunks are its account, all of them (a failed attempt's too), and the
// committed message's usage counts only for a step that streamed none.
func TestUsageAccounting(t *testing.T) {
	msg := func(usage string) string {
		return `{"type":"assistant/message","seq":0,"time":4,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"text","text":"x"}],"source":{"kind":"model","provider":"p","model":"m"}},"usage":` + usage + `},"sourceEventSeqs":[],"surfaceOp":"append"}`
	}
	chunk := func(usage string) string {
		return `{"type":"assistant/chunk","seq":0,"time":3,"data":{"turn":1,"step":1,"chunk":{"type":"usage","usage":` + usage + `}}}`
	}
	lines := renumber([]string{
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
		`{"type":"step/start","seq":0,"time":2,"data":{"turn":1,"step":1}}`,
		`{"type":"user/message","seq":0,"time":3,"data":{"id":"u","role":"user","content":[{"type":"text","text":"q"}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"request/context","seq":0,"time":3,"data":{"provider":"p","model":"m","contextWindow":1000}}`,
		msg(`{"inputTokens":10,"outputTokens":2}`),
		`{"type":"step/end","seq":0,"time":5,"data":{"turn":1,"step":1}}`,
		`{"type":"step/start","seq":0,"time":6,"data":{"turn":1,"step":2}}`,
		chunk(`{"inputTokens":30,"outputTokens":0}`), // a failed attempt keeps its chunk
		chunk(`{"inputTokens":31,"outputTokens":5,"reasoningTokens":3}`),
		strings.Replace(msg(`{"inputTokens":99,"outputTokens":99}`), `"step":1`, `"step":2`, 1),
		`{"type":"step/end","seq":0,"time":8,"data":{"turn":1,"step":2}}`,
		`{"type":"turn/end","seq":0,"time":9,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
	})
	s := load(t, lines...)
	got, err := s.Render(context.Background(), views.Usage)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"turn":1,"step":1,"seq":1,"endSeq":5,"inputTokens":10,"outputTokens":2,"cacheReadTokens":0,"cacheWriteTokens":0,"reasoningTokens":0,"from":"message","contextWindow":1000}
{"turn":1,"step":2,"seq":6,"endSeq":10,"inputTokens":61,"outputTokens":5,"cacheReadTokens":0,"cacheWriteTokens":0,"reasoningTokens":3,"from":"chunks","contextWindow":1000}
`
	if string(got) != want {
		t.Fatalf("usage.jsonl:\n%s\nwant\n%s", got, want)
	}
}
