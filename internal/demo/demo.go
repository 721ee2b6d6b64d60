// Package demo writes the demo store of `dshfs demo DIR` and `dshfs mount --demo`: hand-built event logs,
// written through dshfs's own writer, that show each thing the mount explains — a clean session, one that
// crashed mid-turn with an unknown tool outcome, one with a compaction, a fork pair, and one citing a
// spilled tool result. DIR is laid out as a dsh home: the store in DIR/sessions, and the spill file in the
// home's spill directory, DIR/spill (outside the store root, where the harness's discovery would trip over
// it), so that every command serves it without configuration (spill.HomeRoot).
package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
)

// Session ids of the demo store.
const (
	Clean      = "demo-clean"
	Crashed    = "demo-crashed"
	Compacted  = "demo-compacted"
	ForkParent = "demo-fork-parent"
	ForkChild  = "demo-fork-child"
	Spilled    = "demo-spilled"
)

const cwd = "/home/dev/demo-project"

// Write creates DIR/sessions (a zstd JSONL store) and DIR/spill; DIR must not already hold a store.
func Write(dir string) error {
	root := filepath.Join(dir, "sessions")
	spillDir := filepath.Join(dir, "spill")
	if err := os.MkdirAll(spillDir, 0o755); err != nil {
		return err
	}
	b, err := jsonl.Open(root, jsonl.Zstd)
	if err != nil {
		return err
	}
	st := eventstore.New(b)
	if err := write(st, spillDir); err != nil {
		st.Close(context.Background())
		return err
	}
	// Closing releases every session's writer lock now: the mount that serves the demo next runs in this
	// same process, and a lock left to the garbage collector would refuse its writes as another writer's.
	return st.Close(context.Background())
}

// write creates the demo's sessions through st.
func write(st *eventstore.Store, spillDir string) error {
	spillFile := filepath.Join(spillDir, "session-demo", "3f9a1c0b2d4e-bash.txt")
	if err := os.MkdirAll(filepath.Dir(spillFile), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(spillFile, []byte(spilledOutput()), 0o644); err != nil {
		return err
	}
	for _, s := range []struct {
		id, parent string
		seed       int
		log        *builder
	}{
		{Clean, "", 0, cleanLog()},
		{Crashed, "", 0, crashedLog()},
		{Compacted, "", 0, compactedLog()},
		{ForkParent, "", 0, cleanLog()},
		{ForkChild, ForkParent, forkSeed, forkChildLog()},
		{Spilled, "", 0, spilledLog(spillFile)},
	} {
		c := event.String(cwd)
		h := event.Header{ID: s.id, CreatedAt: 1778573701000, Cwd: &c}
		if s.parent != "" {
			p, n := event.String(s.parent), event.Number(float64(s.seed))
			h.ParentSession, h.SeedLength = &p, &n
		}
		if err := st.Create(context.Background(), h); err != nil {
			return fmt.Errorf("demo %s: %w", s.id, err)
		}
		for _, batch := range s.log.batches() {
			if err := st.Append(context.Background(), s.id, batch); err != nil {
				return fmt.Errorf("demo %s: %w", s.id, err)
			}
		}
	}
	return nil
}

// forkSeed is how many of the parent's events the fork child starts with: its whole first turn.
const forkSeed = 12

// builder accumulates a log with contiguous seqs and the harness's batch boundaries, and keeps the token
// account a provider would report: the model context each request sends grows with every message.
type builder struct {
	events  []event.Event
	time    int64
	context int // tokens of the model context the next request sends
	cached  int // tokens of it the provider's prefix cache holds from the previous request
}

// systemTokens is the context of a first request: the system prompt and the tools' definitions.
const systemTokens = 420

func newBuilder() *builder { return &builder{time: 1778573701000, context: systemTokens} }

// tokens is a rough token count of a text, as the usage views need no more than a plausible figure.
func tokens(s string) int { return len(s)/4 + 4 }

// heard adds a message the model will see (a user's question, a tool's result) to the context.
func (b *builder) heard(text string) { b.context += tokens(text) }

// usage is the TokenUsage a provider reports for the next request answered with output tokens: the whole
// context as input, the part its prefix cache held, and the answer (which joins the context).
func (b *builder) usage(output int) string {
	u := fmt.Sprintf(`{"inputTokens":%d,"outputTokens":%d,"cacheReadTokens":%d}`, b.context, output, b.cached)
	b.cached = b.context / 64 * 64
	b.context += output
	return u
}

// add appends one event; extra is the JSON of envelope members after data (e.g. `"surfaceOp":"append"`).
func (b *builder) add(typ, data string, extra ...string) int64 {
	seq := int64(len(b.events))
	b.time += 250
	line := fmt.Sprintf(`{"type":%q,"seq":%d,"time":%d,"data":%s`, typ, seq, b.time, data)
	for _, x := range extra {
		line += "," + x
	}
	e, err := event.ParseEvent([]byte(line + "}"))
	if err != nil {
		panic(fmt.Sprintf("demo event %s: %v", line, err))
	}
	b.events = append(b.events, e)
	return seq
}

// batches splits the log where the harness's writer ends a durable batch.
func (b *builder) batches() [][]event.Event {
	var out [][]event.Event
	start := 0
	for i, e := range b.events {
		if e.Type == "step/end" || e.Type == "turn/end" || e.Type == "session/end-seed" {
			out = append(out, b.events[start:i+1])
			start = i + 1
		}
	}
	if start < len(b.events) {
		out = append(out, b.events[start:])
	}
	return out
}

func quote(s string) string { return string(event.Stringify(event.String(s))) }

func user(id, text string) string {
	return fmt.Sprintf(`{"id":%q,"role":"user","content":[{"type":"text","text":%s}],"source":{"kind":"user"}}`, id, quote(text))
}

// assistant is an assistant/message's data with the step's usage (the committed-step account, as a
// provider that streams no usage chunks leaves it).
func (b *builder) assistant(turn, step int, id, content string) string {
	return fmt.Sprintf(`{"turn":%d,"step":%d,"message":{"id":%q,"role":"assistant","content":%s,"source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-flash"}},"usage":%s}`,
		turn, step, id, content, b.usage(tokens(content)+12))
}

func toolResult(turn, step int, id, callID, text string) string {
	return fmt.Sprintf(`{"turn":%d,"step":%d,"message":{"id":%q,"role":"user","content":[{"type":"tool-result","toolCallId":%q,"content":[{"type":"text","text":%s}],"isError":false}],"source":{"kind":"tool","callId":%q}}}`,
		turn, step, id, callID, quote(text), callID)
}

const appendOp = `"surfaceOp":"append"`

// toolTurn appends one complete turn: a question, a tool call with its result, and an answer.
func (b *builder) toolTurn(turn int, question, command, output, answer string) {
	b.add("turn/start", fmt.Sprintf(`{"turn":%d}`, turn))
	b.add("step/start", fmt.Sprintf(`{"turn":%d,"step":1}`, turn))
	b.add("user/message", user(fmt.Sprintf("u%d", turn), question), appendOp)
	b.heard(question)
	if turn == 1 {
		b.add("request/header", `{"header":{"config":{"provider":"deepseek-official","model":"deepseek-v4-flash"},"system":"You are a coding agent."},"reason":"initial"}`)
	}
	call := fmt.Sprintf("call-%d", turn)
	args := quote(fmt.Sprintf(`{"command":%s}`, quote(command)))
	b.add("assistant/message", b.assistant(turn, 1, fmt.Sprintf("a%d-1", turn),
		fmt.Sprintf(`[{"type":"tool-call","id":%q,"name":"bash","arguments":%s}]`, call, args)), `"sourceEventSeqs":[]`, appendOp)
	callSeq := b.add("tool/call", fmt.Sprintf(`{"turn":%d,"step":1,"callId":%q,"name":"bash","arguments":%s}`, turn, call, args))
	b.add("tool/result", toolResult(turn, 1, fmt.Sprintf("t%d", turn), call, output), fmt.Sprintf(`"sourceEventSeqs":[%d]`, callSeq), appendOp)
	b.heard(output)
	b.add("step/end", fmt.Sprintf(`{"turn":%d,"step":1}`, turn))
	b.add("step/start", fmt.Sprintf(`{"turn":%d,"step":2}`, turn))
	b.add("assistant/message", b.assistant(turn, 2, fmt.Sprintf("a%d-2", turn), fmt.Sprintf(`[{"type":"text","text":%s}]`, quote(answer))), `"sourceEventSeqs":[]`, appendOp)
	b.add("step/end", fmt.Sprintf(`{"turn":%d,"step":2}`, turn))
	b.add("turn/end", fmt.Sprintf(`{"turn":%d,"reason":{"kind":"completed"}}`, turn))
}

func cleanLog() *builder {
	b := cleanFirstTurn()
	b.toolTurn(2, "Why does it fail?", "go test -run TestParse -v ./pkg/parse", "parse_test.go:12: want 3, got 4", "It expects 3 tokens and the parser returns 4.")
	return b
}

// cleanFirstTurn is the clean session's first turn: forkSeed events.
func cleanFirstTurn() *builder {
	b := newBuilder()
	b.toolTurn(1, "Which tests fail?", "go test ./...", "--- FAIL: TestParse (0.00s)\nFAIL\tpkg/parse", "TestParse in pkg/parse fails.")
	return b
}

// crashedLog ends inside turn 2 after a durable tool/call with no result: the tool's outcome is unknown.
func crashedLog() *builder {
	b := newBuilder()
	b.toolTurn(1, "Run the migration dry-run.", "make migrate-dry", "2 migrations pending", "Two migrations are pending.")
	b.add("turn/start", `{"turn":2}`)
	b.add("step/start", `{"turn":2,"step":1}`)
	b.add("user/message", user("u2", "Apply them."), appendOp)
	b.heard("Apply them.")
	args := quote(`{"command":"make migrate"}`)
	b.add("assistant/message", b.assistant(2, 1, "a2-1", fmt.Sprintf(`[{"type":"tool-call","id":"call-migrate","name":"bash","arguments":%s}]`, args)), `"sourceEventSeqs":[]`, appendOp)
	b.add("tool/call", fmt.Sprintf(`{"turn":2,"step":1,"callId":"call-migrate","name":"bash","arguments":%s}`, args))
	return b
}

// compactedLog has three turns, then a manual compaction that replaces the first two turns' messages
// with a summary checkpoint, then a fourth turn whose requests send the smaller context.
func compactedLog() *builder {
	b := cleanLog()
	twoTurns := b.context
	b.toolTurn(3, "Fix it.", "sed -i s/4/3/ pkg/parse/parse.go && go test ./pkg/parse", "ok\tpkg/parse", "Fixed; the tests pass.")
	// surface nodes before compaction, in order: u1 a1-1 t1 a1-2 u2 a2-1 t2 a2-2 u3 ...
	var nodes []int64
	for _, e := range b.events {
		if event.IsSurfaceType(e.Type) {
			nodes = append(nodes, e.Seq)
		}
	}
	shadowed := nodes[:8] // turns 1 and 2
	seqs := make([]string, len(shadowed))
	for i, s := range shadowed {
		seqs[i] = fmt.Sprint(s)
	}
	list := strings.Join(seqs, ",")
	start := b.add("compaction/start", `{"compactionId":"cmp-demo-1","turn":null}`)
	summary := "Earlier: TestParse in pkg/parse failed because the parser returned 4 tokens where 3 were expected."
	sum := b.add("compaction/summary", fmt.Sprintf(`{"compactionId":"cmp-demo-1","summary":[{"type":"text","text":%s}],"shadowedRange":{"start":%d,"end":%d},"shadowedSeqs":[%s],"shadowedTokenCount":420,"provider":"deepseek-official","model":"deepseek-v4-flash"}`,
		quote(summary), shadowed[0], shadowed[len(shadowed)-1], list))
	checkpoint := fmt.Sprintf(`{"id":"checkpoint-cmp-demo-1","role":"user","content":[{"type":"text","text":"<compacted-summary>"},{"type":"text","text":%s},{"type":"text","text":"</compacted-summary>"}],"source":{"kind":"plugin","plugin":"compact","compactionId":"cmp-demo-1"}}`, quote(summary))
	b.add("user/message", checkpoint, fmt.Sprintf(`"surfaceOp":{"op":"replace","start":%d,"end":%d}`, shadowed[0], shadowed[len(shadowed)-1]),
		fmt.Sprintf(`"sourceEventSeqs":[%d,%d,%s]`, start, sum, list))
	b.add("compaction/end", `{"compactionId":"cmp-demo-1","turn":null}`)
	// the context now holds the checkpoint instead of the first two turns, and no cached prefix survives
	b.context, b.cached = systemTokens+tokens(summary)+(b.context-twoTurns), 0
	b.toolTurn(4, "Commit the fix.", "git commit -am 'parse: return 3 tokens'", "[main 4e1f2a9] parse: return 3 tokens\n 1 file changed, 1 insertion(+), 1 deletion(-)", "Committed as 4e1f2a9.")
	return b
}

// forkChildLog is the parent's first turn (seqs 0..11: a fork is refused inside an open turn) plus the
// end-seed a fork appends.
func forkChildLog() *builder {
	b := cleanFirstTurn()
	b.time = cleanLog().time // the fork is made after the parent's last event
	b.add("session/end-seed", `{}`)
	b.toolTurn(2, "Try a different fix.", "git stash && go test ./pkg/parse", "ok\tpkg/parse", "With the change stashed the tests pass.")
	return b
}

func spilledOutput() string {
	var sb strings.Builder
	for i := 1; i <= 400; i++ {
		fmt.Fprintf(&sb, "build step %03d: compiling pkg/module%03d ... ok\n", i, i)
	}
	return sb.String()
}

// spilledLog cites a spilled tool result in the harness's notice form.
func spilledLog(path string) *builder {
	b := newBuilder()
	out := spilledOutput()
	notice := fmt.Sprintf("build step 001: compiling pkg/module001 ... ok\n\n(Omitted %d bytes. Full formatted result stored at: %s. Use read with offset/limit, or grep this path to search within it.)", len(out), path)
	b.toolTurn(1, "Build everything and tell me if it passes.", "make all", notice, "All 400 build steps passed; the full log is in the spill file.")
	return b
}
