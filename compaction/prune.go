package compaction

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dshfs/dshfs/config"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/load"
)

// Pruned is one tool result the pruner replaced.
type Pruned struct {
	OriginalSeq, ReplacementSeq int64
	CallID                      string
	CharsBefore, CharsAfter     int
}

// PruneOutcome is what one prune pass did; a pass with nothing over budget prunes nothing.
type PruneOutcome struct {
	Pruned       []Pruned
	CharsRemoved int
}

// Message summarizes the pass for ctl and status.json.
func (o PruneOutcome) Message() string {
	if len(o.Pruned) == 0 {
		return "nothing to prune: no tool result on the surface is over the threshold"
	}
	return fmt.Sprintf("pruned %d tool results (%d characters removed)", len(o.Pruned), o.CharsRemoved)
}

// PruneSession is the harness's tool-result pruner (its pruneSession) (spec §A.4, TRP/): every tool/result on the current surface
// whose first block's nested content is over cfg.ThresholdChars code points of text is replaced by a
// copy whose text keeps the first HeadChars and last TailChars code points around the marker, each
// preceded by the compaction/prune record pricing it. All replacements of a pass are accepted together
// and flushed. As upstream, pruning needs an open turn (the session invariant the harness keeps): on an
// idle session it is refused with EBUSY, and compact is the tool there.
//
// A v4 log is pruned in v4's shapes: its tool result is a tool-role message whose own content holds the
// text blocks (no nested tool-result block), the record's shadowed span is the one result (an exact
// current-surface span, as v4's relationships require), and the replacement swaps it with
// {op:"replace",startSeq,endSeq}, every other member of the result kept.
func PruneSession(ctx context.Context, w *eventstore.Session, cfg config.Pruner) (PruneOutcome, error) {
	var out PruneOutcome
	evs, err := w.Transact(func(v eventstore.View) ([]event.Event, error) {
		if _, open := load.OpenTurn(v.Events); !open {
			return nil, busy(CodeNoOpenTurn, "prune needs an open turn: the harness prunes tool results only inside a turn, and this session has none; use compact to shrink an idle session")
		}
		var evs []event.Event
		next := v.Next()
		for _, seq := range v.Fold.Nodes {
			e := v.Events[seq]
			if e.Type != "tool/result" {
				continue
			}
			data, pruned, ok, err := pruneResult(e, cfg, v.Generation)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			msg, _ := event.Lookup(e.Raw, "data", "message")
			evs = append(evs,
				newEvent("compaction/prune", next, pruneRecord(seq, EstimateMessage(msg))),
				newEvent("tool/result", next+1, data,
					event.Member{Key: "sourceEventSeqs", Value: seqList([]int64{seq})},
					event.Member{Key: "surfaceOp", Value: replaceOp(seq, seq, v.Generation)}))
			pruned.OriginalSeq, pruned.ReplacementSeq = seq, next+1
			out.Pruned = append(out.Pruned, pruned)
			out.CharsRemoved += pruned.CharsBefore - pruned.CharsAfter
			next += 2
		}
		return evs, nil
	})
	if err != nil {
		return PruneOutcome{}, err
	}
	if len(evs) == 0 {
		return out, nil
	}
	if err := w.Flush(ctx); err != nil {
		return out, &eventstore.CommandError{Failure: eventstore.Failed, Code: CodePersistence,
			Message: "prune: the replacements were accepted but could not be made durable: " + err.Error(), Err: err}
	}
	return out, nil
}

// pruneRecord is compaction/prune's data: the one shadowed result and its price.
func pruneRecord(seq int64, tokens int) []byte {
	return event.Stringify(event.Object(
		event.Member{Key: "shadowedRange", Value: rangeValue(seq, seq)},
		event.Member{Key: "shadowedSeqs", Value: seqList([]int64{seq})},
		event.Member{Key: "shadowedTokenCount", Value: event.Int(int64(tokens))},
	))
}

// pruneResult returns the data of the replacement for one tool/result, or ok false when its content is
// within budget (or not the shape the pruner reads). Every member but the text blocks (v0:
// message.content[0].content, the tool-result block's; v4: message.content, the tool-role message's) is
// kept as it is, unknown ones included.
func pruneResult(e event.Event, cfg config.Pruner, gen int) (data []byte, p Pruned, ok bool, err error) {
	raw, found := event.Lookup(e.Raw, "data")
	if !found {
		return nil, p, false, nil
	}
	d, err := event.Parse(raw)
	if err != nil {
		return nil, p, false, err
	}
	msg, _ := d.Get("message")
	content, _ := msg.Get("content")
	// texts is the array of text blocks, put back into the message by rebuild
	texts, rebuild := content, func(blocks event.Value) event.Value { return with(msg, "content", blocks) }
	if gen != 4 {
		if content.Kind != event.KindArray || len(content.Arr) == 0 {
			return nil, p, false, nil
		}
		first := content.Arr[0]
		texts, _ = first.Get("content")
		rebuild = func(blocks event.Value) event.Value {
			content.Arr = append([]event.Value{with(first, "content", blocks)}, content.Arr[1:]...)
			return with(msg, "content", content)
		}
	}
	if texts.Kind != event.KindArray {
		return nil, p, false, nil
	}
	blocks, before, after, ok := pruneContent(texts.Arr, cfg)
	if !ok {
		return nil, p, false, nil
	}
	d = with(d, "message", rebuild(event.Array(blocks...)))
	p.CallID, _ = callID(msg)
	p.CharsBefore, p.CharsAfter = before, after
	return event.Stringify(d), p, true, nil
}

func callID(msg event.Value) (string, bool) {
	src, _ := msg.Get("source")
	id, ok := src.Get("callId")
	return id.Str, ok && id.Kind == event.KindString
}

// with returns a copy of obj with key's value replaced in place (its position kept).
func with(obj event.Value, key string, v event.Value) event.Value {
	ms := make([]event.Member, len(obj.Obj))
	copy(ms, obj.Obj)
	for i := range ms {
		if ms[i].Key == key {
			ms[i].Value = v
		}
	}
	obj.Obj = ms
	return obj
}

// pruneContent is the harness's pruneContent: sizes are code points of text blocks (other blocks count
// 0 and stay where they are); over the threshold, the window [head, total-tail) is cut out of the text,
// the marker inserted once into the first text block that meets the window, and text blocks left empty
// are dropped.
func pruneContent(blocks []event.Value, cfg config.Pruner) (out []event.Value, before, after int, ok bool) {
	for _, b := range blocks {
		if t, isText := blockText(b); isText {
			before += codePoints(t)
		}
	}
	if before <= cfg.ThresholdChars {
		return nil, before, before, false
	}
	ws, we := cfg.HeadChars, before-cfg.TailChars
	pos, marked := 0, false
	for _, b := range blocks {
		t, isText := blockText(b)
		if !isText {
			out = append(out, b)
			continue
		}
		cps := cpOffsets(t)
		n := len(cps) - 1
		a, z := pos, pos+n
		pos = z
		headEnd := clampInt(ws-a, 0, n)   // code points of this block before the window
		tailStart := clampInt(we-a, 0, n) // first code point of this block after the window
		var sb strings.Builder
		sb.WriteString(t[:cps[headEnd]])
		if !marked && a < we && z > ws {
			sb.WriteString(config.PruneMarker)
			marked = true
		}
		sb.WriteString(t[cps[tailStart]:])
		nt := sb.String()
		if nt == "" {
			continue
		}
		after += codePoints(nt)
		out = append(out, with(b, "text", event.String(nt)))
	}
	if after > cfg.ThresholdChars || after >= before {
		return nil, before, before, false
	}
	return out, before, after, true
}

func blockText(b event.Value) (string, bool) {
	if str(b, "type") != "text" {
		return "", false
	}
	t, _ := b.Get("text")
	return t.Str, t.Kind == event.KindString
}

func clampInt(v, lo, hi int) int { return max(lo, min(v, hi)) }

// codePoints counts code points as JavaScript's [...s].length does: a lone surrogate (kept as its
// three-byte WTF-8 form) is one.
func codePoints(s string) int { return len(cpOffsets(s)) - 1 }

// cpOffsets is the byte offset of every code point of s, and len(s) at the end.
func cpOffsets(s string) []int {
	offs := make([]int, 0, len(s)+1)
	for i := 0; i < len(s); {
		offs = append(offs, i)
		if s[i] == 0xED && i+2 < len(s) && s[i+1] >= 0xA0 {
			i += 3 // a surrogate's WTF-8 bytes, which utf8 would split into three
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return append(offs, len(s))
}
