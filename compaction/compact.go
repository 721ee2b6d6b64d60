package compaction

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
	"github.com/dshfs/dshfs/eventstore/load"
	"github.com/dshfs/dshfs/surface"
)

// CheckpointPreamble is the harness's CHECKPOINT_PREAMBLE: the framing that makes the replacement user
// message established context.
const CheckpointPreamble = "This is an automatically generated checkpoint condensing an earlier span of the conversation to free up context. Treat the captured context as established background and build on it without restating it. Continue the task directly from the messages that follow, without acknowledging this checkpoint."

// The harness's summary tags.
const (
	summaryOpen  = "<compacted-summary>"
	summaryClose = "</compacted-summary>"
)

// Failure codes of a compaction, as status.json's lastError names them (with the errno of their
// eventstore.Failure), in the harness's style of eventstore's codes (OPEN_TURN, CONFLICT). A compaction that
// cannot start because a turn is open or a compaction lock is live says eventstore.CodeOpenTurn or
// eventstore.CodeCompactionLock (EBUSY).
const (
	CodeNoOpenTurn    = "NO_OPEN_TURN"       // EBUSY: prune needs a turn this mount holds open
	CodeInvalid       = "INVALID_RANGE"      // EINVAL: the range is not a replacement target
	CodeSummaryFailed = "SUMMARY_FAILED"     // EIO: the summarizer failed
	CodeNotSmaller    = "NOT_SMALLER"        // EIO: the framed summary does not shrink the span
	CodeChanged       = "CHANGED"            // EAGAIN: the span changed during summarization
	CodeCancelled     = "CANCELLED"          // EIO: the caller gave up (an interrupted ctl write) while the summary was made
	CodeCommit        = "COMMIT_FAILED"      // EIO: the transaction could not be closed cleanly
	CodePersistence   = "PERSISTENCE_FAILED" // EIO: closed cleanly, but the flush failed
)

// Request is one manual compaction.
type Request struct {
	// Range, when set, is the explicit surface range [START, END] (seqs, surface order) to replace;
	// otherwise the harness's compactNow span: everything but the newest node, rounded to a balanced cut.
	Range      *[2]int64
	Summarizer Summarizer
}

// Outcome is what a compaction did. Nothing is true when there was no compactable history (no event
// was written).
type Outcome struct {
	Nothing                      bool
	CompactionID                 string
	StartSeq, SummarySeq, EndSeq int64
	Shadowed                     []int64
	ShadowedTokens               int
}

// Message is the outcome in the harness's /compact words.
func (o Outcome) Message() string {
	if o.Nothing {
		return "No compactable history yet."
	}
	return fmt.Sprintf("Compacted %d history items (~%d tokens).", len(o.Shadowed), o.ShadowedTokens)
}

// Compact runs one manual compaction transaction on a live session, as the harness's compactNow does
// (docs/harness.md#compaction-transactions), with selected-span stability:
//
//  1. Refuse (EBUSY, nothing written) while the compaction lock is live or a turn is open; select the
//     span (or validate Request.Range: EINVAL with the harness's text, nothing written). No span: no
//     events, Outcome.Nothing.
//  2. Append compaction/start {compactionId, turn: null} and flush it, so a crash during summarization
//     leaves a durable unmatched start (the lock a resume ends).
//  3. Price the span, summarize it, frame the summary and require it to be smaller than the span.
//  4. Re-check the span and, in one atomic step with that check, append compaction/summary, the
//     checkpoint user/message replacing the span, and compaction/end; then flush.
//
// Any failure after step 2 appends exactly one compaction/end carrying the error text (the surface is
// unchanged) and is returned as an *eventstore.CommandError whose Code is one of the Code constants.
func Compact(ctx context.Context, w *eventstore.Session, req Request) (Outcome, error) {
	var sel span
	var out Outcome
	gen := 0 // the log's format generation, which the events' shapes follow (docs/formats.md#v4)
	// The summarizer alone is cancelled by the caller giving up (an interrupted `echo compact > ctl`) or
	// by the session being closed under it; once compaction/start is accepted the transaction is closed
	// and made durable whatever happens (see below).
	summarizeCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Tracked before the start is accepted, so that a Close at any moment after it ends the transaction
	// (eventstore/inflight.go): Close never waits for the summarizer.
	t := transaction{w: w}
	t.inflight = w.Track(func(next int64, cause error) event.Event {
		return newEvent("compaction/end", next, lifecycle(t.id, cause))
	}, cancel)
	defer t.inflight.Done()
	started, err := w.Transact(func(v eventstore.View) ([]event.Event, error) {
		if closed := t.inflight.Ended(); closed != nil {
			return nil, closed // a Close came between the tracking and now: open nothing
		}
		if eventstore.CompactionLocked(v.Events) {
			return nil, busy(eventstore.CodeCompactionLock, "compaction: compaction already in progress; the session compaction lock is already active")
		}
		if _, open := load.OpenTurn(v.Events); open {
			return nil, busy(eventstore.CodeOpenTurn, "manual compaction: the session already has an open turn")
		}
		balance, err := surface.Balance(v.Events, v.Fold)
		if err != nil {
			return nil, invalid(err)
		}
		// a v4 log's protected system head stays: the relationships refuse a compaction that shadows it
		head := protectedHead(v)
		if req.Range != nil {
			if sel, err = validateRegion(v.Fold.Nodes, balance, req.Range[0], req.Range[1]); err != nil {
				return nil, invalid(err)
			}
			if head && sel.startIdx == 0 {
				return nil, invalid(errorf("compactRegion: start seq %d is the protected system head, which compaction cannot shadow", req.Range[0]))
			}
		} else if s, ok := headSpan(v.Fold.Nodes, balance, head); ok {
			sel = s
		} else {
			return nil, nil
		}
		gen = v.Generation
		out.CompactionID = eventstore.NewSessionID()
		t.id = out.CompactionID // read by the tracked end under the engine's lock, as this is written
		return []event.Event{newEvent("compaction/start", v.Next(), lifecycle(out.CompactionID, nil))}, nil
	})
	if err != nil {
		return out, err
	}
	if len(started) == 0 {
		return Outcome{Nothing: true}, nil
	}
	out.StartSeq = started[0].Seq
	ctx = context.WithoutCancel(ctx)
	// Every flush of the transaction waits out a quiesce (it must not write meanwhile, and failing the
	// compaction for it would leave a summary paid for unused).
	if err := w.FlushWhenWritable(ctx); err != nil {
		return out, t.fail(ctx, CodePersistence, err)
	}
	snap := w.Snapshot()
	if gen == 4 && snap.Fold == nil {
		// a v4 engine keeps no fold: the surface view's, as the transaction above read it
		var ferr error
		if snap.Fold, ferr = generation.FoldSurface(4, snap.Events); ferr != nil {
			return out, t.fail(ctx, CodeChanged, ferr)
		}
	}
	prep, err := prepare(snap, sel)
	if err != nil {
		return out, t.fail(ctx, CodeChanged, err)
	}
	out.Shadowed, out.ShadowedTokens = sel.seqs, prep.tokens
	sum, err := req.Summarizer.Summarize(summarizeCtx, prep.input)
	if err != nil {
		if summarizeCtx.Err() != nil {
			return out, t.fail(ctx, CodeCancelled, err)
		}
		return out, t.fail(ctx, CodeSummaryFailed, err)
	}
	checkpoint := checkpointMessage(out.CompactionID, sum.Text, gen)
	if framed := EstimateMessage(checkpoint); framed >= prep.tokens {
		return out, t.fail(ctx, CodeNotSmaller, fmt.Errorf("summary is not smaller than the shadowed content (%d estimated framed tokens >= %d)", framed, prep.tokens))
	}
	var changed error
	body, err := w.Transact(func(v eventstore.View) ([]event.Event, error) {
		if closed := t.inflight.Ended(); closed != nil {
			return nil, closed // Close ended the transaction: its end is in the log, nothing may follow it
		}
		balance, err := surface.Balance(v.Events, v.Fold)
		if err == nil {
			err = stable(v.Events, v.Fold.Nodes, balance, sel, prep.prices)
		}
		if err != nil {
			changed = err
			return []event.Event{newEvent("compaction/end", v.Next(), lifecycle(out.CompactionID, err))}, nil
		}
		next := v.Next()
		summary := newEvent("compaction/summary", next, summaryData(out.CompactionID, sum, sel, prep.tokens))
		replace := newEvent("user/message", next+1, checkpoint,
			event.Member{Key: "sourceEventSeqs", Value: seqList(append([]int64{out.StartSeq, next}, sel.seqs...))},
			event.Member{Key: "surfaceOp", Value: replaceOp(sel.start(), sel.end(), gen)})
		end := newEvent("compaction/end", next+2, lifecycle(out.CompactionID, nil))
		return []event.Event{summary, replace, end}, nil
	})
	if err != nil {
		if closed := t.inflight.Ended(); closed != nil {
			return out, failure(CodeCancelled, closed) // Close recorded the end already
		}
		// The closing events could not be accepted: the start stays unmatched, as the harness leaves it
		// when its close fails (a deliberate orphan that a resume ends).
		return out, failure(CodeCommit, err)
	}
	if changed != nil {
		out.EndSeq = body[0].Seq
		t.flushQuietly(ctx)
		return out, failure(CodeChanged, changed)
	}
	out.SummarySeq, out.EndSeq = body[0].Seq, body[2].Seq
	if err := w.FlushWhenWritable(ctx); err != nil {
		return out, failure(CodePersistence, err)
	}
	return out, nil
}

// transaction closes a failed compaction.
type transaction struct {
	w        *eventstore.Session
	id       string
	inflight *eventstore.Inflight
}

// fail appends the one compaction/end carrying err, flushes it and returns the classified failure. A
// transaction the session's Close already ended (and recorded) writes nothing more.
func (t *transaction) fail(ctx context.Context, code string, err error) error {
	if closed := t.inflight.Ended(); closed != nil {
		return failure(CodeCancelled, closed)
	}
	_, cerr := t.w.Transact(func(v eventstore.View) ([]event.Event, error) {
		if closed := t.inflight.Ended(); closed != nil {
			return nil, closed
		}
		return []event.Event{newEvent("compaction/end", v.Next(), lifecycle(t.id, err))}, nil
	})
	if closed := t.inflight.Ended(); cerr != nil && closed != nil {
		return failure(CodeCancelled, closed)
	}
	if cerr != nil {
		return failure(CodeCommit, fmt.Errorf("%v; closing it failed: %w", err, cerr))
	}
	t.flushQuietly(ctx)
	return failure(code, err)
}

// flushQuietly makes the recorded failure durable; if that fails too the events stay pending in the
// engine (a later flush retries them) and the original failure is what the caller reports.
func (t *transaction) flushQuietly(ctx context.Context) { _ = t.w.FlushWhenWritable(ctx) }

// failure is a classified compaction failure: the harness's manual message, then the cause as its
// errorChain renders one level.
func failure(code string, cause error) *eventstore.CommandError {
	f := eventstore.Failed
	if code == CodeChanged {
		f = eventstore.Again
	}
	var ce *eventstore.CommandError
	if errors.As(cause, &ce) && code == CodeCommit && ce.Failure == eventstore.Busy {
		f = eventstore.Busy // the engine refused (released, conflict): say so, not EIO
	}
	return &eventstore.CommandError{Failure: f, Code: code, Message: chain(manualMessages[code], cause), Err: cause}
}

// manualMessages are the harness's ManualCompactionError messages of the failures after compaction/start
// (its summary class covers both of ours, summary-failed and not-smaller), and ours for a cancellation.
var manualMessages = map[string]string{
	CodeSummaryFailed: "manual compaction could not produce a smaller summary",
	CodeNotSmaller:    "manual compaction could not produce a smaller summary",
	CodeChanged:       "the compacted history changed during manual compaction",
	CodeCommit:        "manual compaction did not commit cleanly",
	CodePersistence:   "manual compaction durability checkpoint failed",
	CodeCancelled:     "manual compaction was cancelled",
}

func busy(code, msg string) error {
	return &eventstore.CommandError{Failure: eventstore.Busy, Code: code, Message: msg}
}

func invalid(err error) error {
	return &eventstore.CommandError{Failure: eventstore.Invalid, Code: CodeInvalid, Message: err.Error(), Err: err}
}

// prepared is the span's prices and the summarizer's input, taken from one snapshot after the start.
type prepared struct {
	prices []int
	tokens int
	input  Input
}

// prepare is the harness's preparation: the span must still sit at the positions it was selected at.
func prepare(s eventstore.Snapshot, sel span) (prepared, error) {
	nodes := s.Fold.Nodes
	if sel.endIdx >= len(nodes) || !slices.Equal(nodes[sel.startIdx:sel.endIdx+1], sel.seqs) {
		return prepared{}, &changedError{msg: "compaction: selected surface changed before summarization began"}
	}
	prices, err := nodePrices(s.Events, sel.seqs)
	if err != nil {
		return prepared{}, &changedError{msg: "compaction: selected surface changed before summarization began", cause: err}
	}
	p := prepared{prices: prices}
	for _, n := range prices {
		p.tokens += n
	}
	p.input.System, p.input.Tools = requestPrefix(s.Events)
	for _, seq := range sel.seqs {
		msg, err := surface.Project(s.Events[seq])
		if err != nil {
			return prepared{}, err
		}
		if msg != nil {
			p.input.Messages = append(p.input.Messages, msg)
		}
	}
	return p, nil
}

// requestPrefix is the system prompt and tool schemas of the latest request/header (the harness's
// session.requestHeader()), raw; nil where absent.
func requestPrefix(events []event.Event) (system, tools []byte) {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Type != "request/header" {
			continue
		}
		system, _ = event.Lookup(events[i].Raw, "data", "header", "system")
		tools, _ = event.Lookup(events[i].Raw, "data", "header", "tools")
		return system, tools
	}
	return nil, nil
}

// newEvent encodes one event as the harness's Session.append does, stamped now.
func newEvent(typ string, seq int64, data []byte, extra ...event.Member) event.Event {
	return event.NewEventFrom(typ, seq, time.Now().UnixMilli(), data, extra...)
}

// lifecycle is the data of compaction/start and compaction/end: {compactionId, turn: null} — a manual
// compaction belongs to no turn — and, on a failed end, the error text.
func lifecycle(id string, err error) []byte {
	m := []event.Member{
		{Key: "compactionId", Value: event.String(id)},
		{Key: "turn", Value: event.Null()},
	}
	if err != nil {
		m = append(m, event.Member{Key: "error", Value: event.String(err.Error())})
	}
	return event.Stringify(event.Object(m...))
}

// summaryData is the compaction/summary record, keys in the harness's order; the fields only a model
// call produces (rawOutput, llmStreamCall, usage) are absent.
func summaryData(id string, sum Summary, sel span, tokens int) []byte {
	m := []event.Member{
		{Key: "compactionId", Value: event.String(id)},
		{Key: "summary", Value: summaryBlocks(sum.Text)},
		{Key: "shadowedRange", Value: rangeValue(sel.start(), sel.end())},
		{Key: "shadowedSeqs", Value: seqList(sel.seqs)},
		{Key: "shadowedTokenCount", Value: event.Int(int64(tokens))},
		{Key: "provider", Value: event.String(sum.Provider)},
		{Key: "model", Value: event.String(sum.Model)},
	}
	if sum.MaxTokens > 0 {
		m = append(m, event.Member{Key: "maxTokens", Value: event.Int(int64(sum.MaxTokens))})
	}
	return event.Stringify(event.Object(m...))
}

// checkpointMessage is the replacement user message: the framed summary, the checkpoint source, then
// role and id in the order the harness's createUserMessage writes them. A v4 source is the producer's own
// kind, "compact-checkpoint", as the v3-to-v4 migration renames the compact plugin's.
func checkpointMessage(id string, text []string, gen int) []byte {
	blocks := []event.Value{textBlock(CheckpointPreamble + "\n\n" + summaryOpen)}
	blocks = append(blocks, summaryBlocks(text).Arr...)
	blocks = append(blocks, textBlock(summaryClose))
	return event.Stringify(event.Object(
		event.Member{Key: "content", Value: event.Array(blocks...)},
		event.Member{Key: "source", Value: checkpointSource(id, gen)},
		event.Member{Key: "role", Value: event.String("user")},
		event.Member{Key: "id", Value: event.String(eventstore.NewSessionID())},
	))
}

func checkpointSource(id string, gen int) event.Value {
	if gen == 4 {
		return event.Object(event.Member{Key: "kind", Value: event.String("compact-checkpoint")},
			event.Member{Key: "compactionId", Value: event.String(id)})
	}
	return event.Object(
		event.Member{Key: "kind", Value: event.String("plugin")},
		event.Member{Key: "plugin", Value: event.String("compact")},
		event.Member{Key: "compactionId", Value: event.String(id)},
	)
}

// protectedHead reports whether the first node of a v4 log's surface is its protected system head.
func protectedHead(v eventstore.View) bool {
	return v.Generation == 4 && len(v.Fold.Nodes) > 0 && v.Events[v.Fold.Nodes[0]].Type == "system/message"
}

func rangeValue(start, end int64) event.Value {
	return event.Object(event.Member{Key: "start", Value: event.Int(start)}, event.Member{Key: "end", Value: event.Int(end)})
}

// replaceOp is a surface replacement of start..end: {op,start,end} in v0, {op,startSeq,endSeq} in v4.
func replaceOp(start, end int64, gen int) event.Value {
	s, e := "start", "end"
	if gen == 4 {
		s, e = "startSeq", "endSeq"
	}
	return event.Object(event.Member{Key: "op", Value: event.String("replace")},
		event.Member{Key: s, Value: event.Int(start)}, event.Member{Key: e, Value: event.Int(end)})
}

func seqList(seqs []int64) event.Value {
	vs := make([]event.Value, len(seqs))
	for i, s := range seqs {
		vs[i] = event.Int(s)
	}
	return event.Array(vs...)
}
