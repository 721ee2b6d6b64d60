package compaction

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/dshfs/dshfs/config"
	"github.com/dshfs/dshfs/eventstore/event"
)

// Input is what a summarizer condenses, as the harness builds it (spec §A.6): the system prompt and
// tool schemas of the latest logged request/header, verbatim (nil when that header has none), and the
// messages the shadowed nodes derive, in surface order (nodes deriving none are skipped).
type Input struct {
	System, Tools []byte // raw JSON values, nil when absent
	Messages      [][]byte
}

// JSON is the input as the command summarizer receives it on stdin: {"system","tools","messages"}, the
// first two only when present, as the harness's SummarizationInput spreads them.
func (in Input) JSON() []byte {
	n := 32 + len(in.System) + len(in.Tools)
	for _, m := range in.Messages {
		n += len(m) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	if in.System != nil {
		b = append(b, `"system":`...)
		b = append(b, in.System...)
		b = append(b, ',')
	}
	if in.Tools != nil {
		b = append(b, `"tools":`...)
		b = append(b, in.Tools...)
		b = append(b, ',')
	}
	b = append(b, `"messages":[`...)
	for i, m := range in.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m...)
	}
	return append(b, "]}"...)
}

// Summary is a summarizer's answer: the summary text blocks (unframed) and the names recorded in
// compaction/summary.
type Summary struct {
	Text      []string
	Provider  string
	Model     string
	MaxTokens int // 0: not recorded
}

// Summarizer condenses the shadowed span of a compaction. An error fails the transaction (EIO), recorded
// as its compaction/end error.
type Summarizer interface {
	Summarize(ctx context.Context, in Input) (Summary, error)
}

// NewSummarizer returns the summarizer cfg configures.
func NewSummarizer(cfg config.Compaction) Summarizer {
	if cfg.Summarizer == config.SummarizerCommand {
		return &Command{Argv: cfg.Command, Timeout: cfg.Timeout, Provider: cfg.Provider, Model: cfg.Model, MaxTokens: cfg.MaxTokens}
	}
	return &Extractive{Provider: cfg.Provider, Model: cfg.Model, MaxTokens: cfg.MaxTokens}
}

// errNoText is the harness's text for a summary that is blank.
var errNoText = errors.New("summarization produced no text summary content")

// maxCommandOutput bounds what a summarizer program may print: a summary is meant to be small, and an
// endless writer must not exhaust memory.
const maxCommandOutput = 16 << 20

// Command runs a program as the summarizer: the Input as JSON on stdin, the summary text on stdout. A
// non-zero exit, a timeout, output that is blank, not UTF-8 or larger than 16 MiB fails the summary;
// the error quotes the end of what the program wrote to stderr.
type Command struct {
	Argv            []string
	Timeout         time.Duration // 0: no limit beyond the caller's context
	Provider, Model string
	MaxTokens       int
}

// Summarize implements Summarizer.
func (c *Command) Summarize(ctx context.Context, in Input) (Summary, error) {
	if len(c.Argv) == 0 {
		return Summary{}, errors.New("summarizer command: no program configured ([compaction] command)")
	}
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	cmd.Stdin = bytes.NewReader(in.JSON())
	var stdout limitedBuffer
	stdout.max = maxCommandOutput
	var stderr tailBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The program runs in its own process group, so a timeout kills what it started too (a shell
	// script's children), and the output pipes close; it is killed if dshfs dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	name := fmt.Sprintf("summarizer command %q", c.Argv[0])
	switch {
	case ctx.Err() == context.DeadlineExceeded && c.Timeout > 0:
		return Summary{}, fmt.Errorf("%s timed out after %s%s", name, c.Timeout, stderr.suffix())
	case ctx.Err() != nil:
		return Summary{}, fmt.Errorf("%s: %w", name, ctx.Err())
	case err != nil:
		return Summary{}, fmt.Errorf("%s failed: %v%s", name, err, stderr.suffix())
	case stdout.over:
		return Summary{}, fmt.Errorf("%s printed more than %d bytes; a summary must be smaller than what it replaces", name, maxCommandOutput)
	}
	out := stdout.String()
	if !utf8.ValidString(out) {
		return Summary{}, fmt.Errorf("%s printed bytes that are not UTF-8", name)
	}
	out = strings.TrimRight(out, "\n") // the newline a program ends its output with is not summary text
	if strings.TrimSpace(out) == "" {
		return Summary{}, errNoText
	}
	return Summary{Text: []string{out}, Provider: c.Provider, Model: c.Model, MaxTokens: c.MaxTokens}, nil
}

// limitedBuffer keeps at most max bytes and notes that more came.
type limitedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); len(p) > room {
		b.over = true
		b.Buffer.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// tailBuffer keeps the last 2 KiB written: enough of stderr to say why a program failed.
type tailBuffer struct{ b []byte }

const tailMax = 2 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > tailMax {
		t.b = append(t.b[:0], t.b[len(t.b)-tailMax:]...)
	}
	return len(p), nil
}

// suffix is ": <stderr>" (one line, trimmed), or "" when the program wrote nothing there.
func (t *tailBuffer) suffix() string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(t.b), "\uFFFD"))
	if s == "" {
		return ""
	}
	return ": " + strings.Join(strings.Fields(s), " ")
}

var _ io.Writer = (*limitedBuffer)(nil)
var _ Summarizer = (*Command)(nil)
var _ Summarizer = (*Extractive)(nil)

// summaryBlocks is the summary as content blocks: [{"type":"text","text":...}...].
func summaryBlocks(text []string) event.Value {
	blocks := make([]event.Value, len(text))
	for i, t := range text {
		blocks[i] = textBlock(t)
	}
	return event.Array(blocks...)
}

func textBlock(t string) event.Value {
	return event.Object(event.Member{Key: "type", Value: event.String("text")}, event.Member{Key: "text", Value: event.String(t)})
}
