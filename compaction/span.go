package compaction

import (
	"fmt"
	"slices"

	"github.com/dshfs/dshfs/eventstore/event"
)

func errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }

// span is a validated replacement target: the surface positions [startIdx, endIdx] and their seqs.
type span struct {
	startIdx, endIdx int
	seqs             []int64 // nodes[startIdx..endIdx], surface order
}

func (s span) start() int64 { return s.seqs[0] }
func (s span) end() int64   { return s.seqs[len(s.seqs)-1] }

// headSpan is the harness's selectCompactableRange with retainTokens 0, as compactNow calls it: keep
// only the newest node, round the cut head-ward until it does not split a tool-call/result pair, and
// select everything before it. ok is false when nothing can be selected (an empty or one-node surface, or
// a surface whose only balanced cut is at its head, e.g. one open tool pair).
//
// balance holds the pairing count at every cut (surface.Balance): len(nodes)+1 values.
func headSpan(nodes []int64, balance []int, protected bool) (span, bool) {
	first := 0
	if protected {
		first = 1 // a v4 log's system head stays; a system node is neutral, so the cut after it is balanced
	}
	keep := len(nodes) - 1 // retainTokens 0: the walk from the tail stops at the newest node
	for keep > first && balance[keep] != 0 {
		keep--
	}
	if keep <= first {
		return span{}, false
	}
	return span{startIdx: first, endIdx: keep - 1, seqs: slices.Clone(nodes[first:keep])}, true
}

// validateRegion is the harness's validateSurfaceRegion: start and end must be current surface nodes, in
// that positional order, and neither cut may split a tool-call/result pair. Its texts are the harness's.
func validateRegion(nodes []int64, balance []int, start, end int64) (span, error) {
	startIdx, endIdx := slices.Index(nodes, start), slices.Index(nodes, end)
	switch {
	case startIdx < 0:
		return span{}, errorf("compactRegion: start seq %d not found in surface", start)
	case endIdx < 0:
		return span{}, errorf("compactRegion: end seq %d not found in surface", end)
	case startIdx > endIdx:
		return span{}, errorf("compactRegion: start seq %d (position %d) is after end seq %d (position %d) on the surface", start, startIdx, end, endIdx)
	case balance[startIdx] != 0:
		return span{}, errorf("compactRegion: start seq %d is not a balanced boundary (would split a step's tool-call/result pair)", start)
	case balance[endIdx+1] != 0:
		return span{}, errorf("compactRegion: end seq %d is not a balanced boundary (would split a step, or the step is still open)", end)
	}
	return span{startIdx: startIdx, endIdx: endIdx, seqs: slices.Clone(nodes[startIdx : endIdx+1])}, nil
}

// changedError is the harness's SurfaceChangedError: what the summary was computed from is no longer
// what it would replace. It fails the transaction with EAGAIN.
type changedError struct {
	msg   string
	cause error
}

func (e *changedError) Error() string { return chain(e.msg, e.cause) }
func (e *changedError) Unwrap() error { return e.cause }

// chain renders a message and its cause the way the harness's errorChain does for one level:
// "message: cause".
func chain(msg string, cause error) string {
	if cause == nil {
		return msg
	}
	return msg + ": " + cause.Error()
}

// stable is the harness's selected-span stability check (the mode compactNow uses): the span must still
// be a valid replacement target with the same nodes at the same prices. Nodes appended after it do not
// matter: the replace is positional, so they stay visible after the checkpoint.
func stable(events []event.Event, nodes []int64, balance []int, prepared span, preparedPrices []int) error {
	cur, err := validateRegion(nodes, balance, prepared.start(), prepared.end())
	if err != nil {
		return &changedError{msg: "compaction: the selected span is no longer a valid replacement target", cause: err}
	}
	if !slices.Equal(cur.seqs, prepared.seqs) {
		return &changedError{msg: "compaction: the selected span changed during summarization"}
	}
	prices, err := nodePrices(events, cur.seqs)
	if err != nil {
		return &changedError{msg: "compaction: the selected span is no longer a valid replacement target", cause: err}
	}
	if !slices.Equal(prices, preparedPrices) {
		return &changedError{msg: "compaction: the selected span was rewritten during summarization"}
	}
	return nil
}
