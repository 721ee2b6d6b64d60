package compaction

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/config"
	"github.com/dshfs/dshfs/eventstore/event"
)

var sampleInput = Input{
	System: []byte(`"You are a coding agent."`),
	Messages: [][]byte{
		[]byte(`{"content":[{"type":"text","text":"Fix the login bug in src/auth.ts"}],"source":{"kind":"user"},"role":"user","id":"u1"}`),
		[]byte(`{"role":"assistant","content":[{"type":"text","text":"Reading the file."},{"type":"tool-call","id":"c1","name":"read","arguments":"{\"file_path\":\"src/auth.ts\"}"}],"source":{"kind":"model"},"id":"a1"}`),
		[]byte(`{"source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"ENOENT: no such file"}],"isError":true}],"role":"user","id":"r1"}`),
		[]byte(`{"role":"assistant","content":[{"type":"text","text":"The file moved; I will use lib/auth.ts."},{"type":"tool-call","id":"c2","name":"bash","arguments":"{\"command\":\"npm test\"}"}],"source":{"kind":"model"},"id":"a2"}`),
		[]byte(`{"source":{"kind":"tool","callId":"c2"},"content":[{"type":"tool-result","toolCallId":"c2","content":[{"type":"text","text":"ok\nTest failed: login\n"}],"isError":false}],"role":"user","id":"r2"}`),
	},
}

func TestInputJSON(t *testing.T) {
	got := string(sampleInput.JSON())
	if !strings.HasPrefix(got, `{"system":"You are a coding agent.","messages":[{"content":`) {
		t.Fatalf("input JSON %s", got)
	}
	if _, err := event.ParseStrict([]byte(got)); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if got := string(Input{}.JSON()); got != `{"messages":[]}` {
		t.Fatalf("empty input %s", got)
	}
}

func TestExtractive(t *testing.T) {
	x := &Extractive{Provider: "dshfs", Model: "extractive", MaxTokens: 8192}
	a, err := x.Summarize(context.Background(), sampleInput)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := x.Summarize(context.Background(), sampleInput)
	if a.Text[0] != b.Text[0] {
		t.Fatal("the extractive summary is not deterministic")
	}
	text := a.Text[0]
	at := -1
	for _, h := range sectionHeadings {
		i := strings.Index(text, h+"\n")
		if i <= at {
			t.Fatalf("section %q missing or out of order in\n%s", h, text)
		}
		at = i
	}
	for _, want := range []string{
		"- Fix the login bug in src/auth.ts",
		"- tools used: read ×1, bash ×1",
		"- `src/auth.ts` (read)",
		"- `$ npm test`",
		"- read: ENOENT: no such file",
		"- bash: Test failed: login",
		"## Current Work\n- The file moved; I will use lib/auth.ts.",
		"## Critical Context\n- Reading the file.",
		"## Pending Jobs\n- (none)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("summary lacks %q:\n%s", want, text)
		}
	}
	// A prior checkpoint in the span is merged section by section, not nested.
	prior := checkpointMessage("c0", []string{"## Primary Request and Intent\n- Ship v2\n\n## Pending Jobs\n- migrate the DB\n\n## Next Step\n- deploy"}, 0)
	in := sampleInput
	in.Messages = append([][]byte{prior}, in.Messages...)
	m, err := x.Summarize(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if s := m.Text[0]; !strings.Contains(s, "## Primary Request and Intent\n- Ship v2\n- Fix the login") ||
		!strings.Contains(s, "## Pending Jobs\n- migrate the DB") || strings.Contains(s, "deploy") || strings.Contains(s, summaryOpen) {
		t.Errorf("merged summary:\n%s", s)
	}
	// The cap cuts at a line.
	small := &Extractive{MaxTokens: 20}
	c, _ := small.Summarize(context.Background(), sampleInput)
	if len(c.Text[0]) > 80 || strings.HasSuffix(c.Text[0], "\n") {
		t.Errorf("capped summary %q", c.Text[0])
	}
	// An empty span still yields the eight headings: not blank.
	if _, err := x.Summarize(context.Background(), Input{}); err != nil {
		t.Errorf("empty input: %v", err)
	}
}

func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "summarize")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCommandSummarizer(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	seen := filepath.Join(dir, "stdin.json")
	ok := &Command{Argv: []string{script(t, `cat > "$1"; echo "summary of the span"`), seen}, Timeout: 10 * time.Second, Provider: "dshfs", Model: "mine"}
	s, err := ok.Summarize(ctx, sampleInput)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Text) != 1 || s.Text[0] != "summary of the span" || s.Model != "mine" {
		t.Fatalf("summary %+v", s)
	}
	if got, _ := os.ReadFile(seen); string(got) != string(sampleInput.JSON()) {
		t.Fatalf("stdin was %s", got)
	}
	cases := []struct {
		name string
		c    *Command
		want string
	}{
		{"exit status", &Command{Argv: []string{script(t, `echo "model unavailable" >&2; exit 3`)}}, `failed: exit status 3: model unavailable`},
		{"timeout", &Command{Argv: []string{script(t, `sleep 30 & wait`)}, Timeout: 200 * time.Millisecond}, `timed out after 200ms`},
		{"blank", &Command{Argv: []string{script(t, `printf '  \n\n'`)}}, errNoText.Error()},
		{"not UTF-8", &Command{Argv: []string{script(t, `printf '\377'`)}}, "not UTF-8"},
		{"missing program", &Command{Argv: []string{filepath.Join(dir, "nope")}}, "no such file"},
	}
	for _, tc := range cases {
		start := time.Now()
		_, err := tc.c.Summarize(ctx, sampleInput)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if time.Since(start) > 10*time.Second {
			t.Errorf("%s: took %v", tc.name, time.Since(start))
		}
	}
	_, err = (&Command{}).Summarize(ctx, sampleInput)
	if err == nil {
		t.Error("no program: no error")
	}
}

func TestNewSummarizer(t *testing.T) {
	cfg := config.Default().Compaction
	if _, ok := NewSummarizer(cfg).(*Extractive); !ok {
		t.Error("default is not extractive")
	}
	cfg.Summarizer, cfg.Command = config.SummarizerCommand, []string{"x"}
	if c, ok := NewSummarizer(cfg).(*Command); !ok || c.Argv[0] != "x" {
		t.Error("command not configured")
	}
}
