package compaction

import (
	"context"
	"fmt"
	"strings"

	"github.com/dshfs/dshfs/eventstore/event"
)

// Extractive is the built-in summarizer: deterministic and offline, it fills the harness's eight
// checkpoint sections (COMPACTION_INSTRUCTION) with what the shadowed messages say, quoted rather than
// paraphrased — the user's requests, the tools used, the files touched and commands run, the errors seen,
// the assistant's statements (its decisions) and the work in progress. A prior checkpoint in the span is
// merged section by section, not copied whole, as the harness's instruction asks of a model.
type Extractive struct {
	Provider, Model string
	MaxTokens       int // the summary is cut to about this many estimated tokens (0: no cap)
}

// The harness's eight section headings, in order (CB/summarizer.ts COMPACTION_INSTRUCTION).
var sectionHeadings = [...]string{
	"## Primary Request and Intent",
	"## Key Technical Concepts",
	"## Files and Code",
	"## Errors and Fixes",
	"## Pending Jobs",
	"## Current Work",
	"## Next Step",
	"## Critical Context",
}

const (
	secRequest = iota
	secConcepts
	secFiles
	secErrors
	secPending
	secCurrent
	secNext
	secContext
)

// Bullet budgets: a checkpoint is a digest, so each section keeps a few of its most telling items.
const (
	clipRequest   = 300
	clipStatement = 200
	clipCurrent   = 400
	keepRequests  = 6
	keepFiles     = 20
	keepCommands  = 10
	keepErrors    = 8
	keepContext   = 6
)

// pathKeys are the tool-call argument names that name a file in the harness's and common tool sets.
var pathKeys = []string{"path", "file_path", "filePath", "file", "filename", "notebook_path"}

// Summarize implements Summarizer.
func (x *Extractive) Summarize(ctx context.Context, in Input) (Summary, error) {
	var d digest
	for _, raw := range in.Messages {
		if err := ctx.Err(); err != nil {
			return Summary{}, err
		}
		m, err := event.Parse(raw)
		if err != nil {
			return Summary{}, fmt.Errorf("extractive summarizer: %w", err)
		}
		d.add(m)
	}
	text := d.render()
	if x.MaxTokens > 0 {
		text = clipLines(text, x.MaxTokens*4)
	}
	if strings.TrimSpace(text) == "" {
		return Summary{}, errNoText
	}
	return Summary{Text: []string{text}, Provider: x.Provider, Model: x.Model, MaxTokens: x.MaxTokens}, nil
}

// digest collects the bullets of each section in log order.
type digest struct {
	prior      [len(sectionHeadings)][]string // bullets of merged prior checkpoints
	requests   []string
	tools      []string
	toolUses   map[string]int
	files      []string
	fileSeen   map[string]bool
	commands   []string
	callNames  map[string]string // callId → tool name
	errors     []string
	statements []string // assistant texts, the last of which is the current work
}

func (d *digest) add(m event.Value) {
	role := str(m, "role")
	source, _ := m.Get("source")
	content, _ := m.Get("content")
	switch {
	case role == "assistant":
		var said []string
		for _, b := range content.Arr {
			switch str(b, "type") {
			case "text":
				said = append(said, str(b, "text"))
			case "tool-call":
				d.toolCall(b)
			}
		}
		if t := oneLine(strings.Join(said, " ")); t != "" {
			d.statements = append(d.statements, t)
		}
	case str(source, "kind") == "tool":
		for _, b := range content.Arr {
			if str(b, "type") == "tool-result" {
				d.toolResult(b)
			}
		}
	case str(source, "kind") == "plugin" && str(source, "plugin") == "compact":
		d.mergeCheckpoint(content)
	default:
		if t := oneLine(texts(content)); t != "" {
			d.requests = append(d.requests, clip(t, clipRequest))
		}
	}
}

func (d *digest) toolCall(b event.Value) {
	name := str(b, "name")
	if d.toolUses == nil {
		d.toolUses, d.fileSeen, d.callNames = map[string]int{}, map[string]bool{}, map[string]string{}
	}
	if d.toolUses[name] == 0 {
		d.tools = append(d.tools, name)
	}
	d.toolUses[name]++
	d.callNames[str(b, "id")] = name
	args, err := event.Parse([]byte(str(b, "arguments")))
	if err != nil || args.Kind != event.KindObject {
		return
	}
	for _, k := range pathKeys {
		if p := str(args, k); p != "" && !d.fileSeen[p] {
			d.fileSeen[p] = true
			d.files = append(d.files, "`"+clip(oneLine(p), clipStatement)+"` ("+name+")")
		}
	}
	if c := oneLine(str(args, "command")); c != "" {
		d.commands = append(d.commands, "`$ "+clip(c, clipStatement)+"`")
	}
}

func (d *digest) toolResult(b event.Value) {
	body, _ := b.Get("content")
	text := texts(body)
	isErr, _ := b.Get("isError")
	line := ""
	if isErr.Kind == event.KindBool && isErr.Bool {
		line = firstLine(text)
	} else {
		line = errorLine(text)
	}
	if line == "" {
		return
	}
	who := d.callNames[str(b, "toolCallId")]
	if who == "" {
		who = "tool"
	}
	d.errors = append(d.errors, who+": "+clip(line, clipStatement))
}

// mergeCheckpoint takes the bullets of a prior checkpoint's sections, so that the new checkpoint
// carries them forward instead of nesting the old one.
func (d *digest) mergeCheckpoint(content event.Value) {
	text := texts(content)
	text = strings.TrimPrefix(text, CheckpointPreamble+"\n\n"+summaryOpen+"\n")
	text = strings.TrimSuffix(text, "\n"+summaryClose)
	if !strings.Contains(text, "\n## ") && !strings.HasPrefix(text, "## ") {
		// A checkpoint written by another summarizer, in its own words: keep them whole.
		if t := oneLine(text); t != "" {
			d.prior[secContext] = append(d.prior[secContext], "earlier checkpoint: "+clip(t, clipCurrent))
		}
		return
	}
	sec := -1
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "## ") {
			sec = -1
			for i, h := range sectionHeadings {
				if line == h {
					sec = i
				}
			}
			continue
		}
		if sec < 0 || sec == secNext || !strings.HasPrefix(line, "- ") || line == "- (none)" {
			continue
		}
		d.prior[sec] = append(d.prior[sec], strings.TrimPrefix(line, "- "))
	}
}

func (d *digest) render() string {
	var sec [len(sectionHeadings)][]string
	sec[secRequest] = headTail(d.requests, keepRequests)
	if len(d.tools) > 0 {
		uses := make([]string, len(d.tools))
		for i, t := range d.tools {
			uses[i] = fmt.Sprintf("%s ×%d", t, d.toolUses[t])
		}
		sec[secConcepts] = []string{"tools used: " + strings.Join(uses, ", ")}
	}
	sec[secFiles] = append(last(d.files, keepFiles), last(d.commands, keepCommands)...)
	sec[secErrors] = last(d.errors, keepErrors)
	if n := len(d.statements); n > 0 {
		sec[secCurrent] = []string{clip(d.statements[n-1], clipCurrent)}
		ctx := d.statements[:n-1]
		for i := range ctx {
			ctx[i] = clip(ctx[i], clipStatement)
		}
		sec[secContext] = last(ctx, keepContext)
	}
	var b strings.Builder
	for i, h := range sectionHeadings {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(h)
		items := dedupe(append(append([]string(nil), d.prior[i]...), sec[i]...))
		if len(items) == 0 {
			b.WriteString("\n- (none)")
		}
		for _, it := range items {
			b.WriteString("\n- ")
			b.WriteString(it)
		}
	}
	return b.String()
}

func str(v event.Value, key string) string {
	s, ok := v.Get(key)
	if !ok || s.Kind != event.KindString {
		return ""
	}
	return s.Str
}

// texts joins the text of a content array's text blocks.
func texts(content event.Value) string {
	var parts []string
	for _, b := range content.Arr {
		if str(b, "type") == "text" {
			parts = append(parts, str(b, "text"))
		}
	}
	return strings.Join(parts, "\n")
}

// oneLine collapses whitespace, so a bullet stays one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = oneLine(l); l != "" {
			return l
		}
	}
	return ""
}

// errorWords mark a line of a successful tool result that reports a failure (a failing test run, a
// compiler error): such results are not flagged isError, yet they are what "Errors and Fixes" is for.
var errorWords = []string{"error", "failed", "failure", "exception", "panic", "fatal", "traceback"}

func errorLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		low := strings.ToLower(l)
		for _, w := range errorWords {
			if strings.Contains(low, w) {
				return oneLine(l)
			}
		}
	}
	return ""
}

// clip shortens s to at most n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// clipLines cuts text to about n characters at a line boundary.
func clipLines(text string, n int) string {
	if len(text) <= n {
		return text
	}
	cut := strings.LastIndexByte(text[:n], '\n')
	if cut <= 0 {
		return clip(text, n)
	}
	return strings.TrimRight(text[:cut], "\n")
}

func last(items []string, n int) []string {
	if len(items) > n {
		return items[len(items)-n:]
	}
	return items
}

// headTail keeps the first item (the original request) and the newest n-1.
func headTail(items []string, n int) []string {
	if len(items) <= n {
		return items
	}
	return append([]string{items[0]}, items[len(items)-n+1:]...)
}

func dedupe(items []string) []string {
	seen := make(map[string]bool, len(items))
	out := items[:0]
	for _, it := range items {
		if !seen[it] {
			seen[it] = true
			out = append(out, it)
		}
	}
	return out
}
