package compaction

import (
	"unicode/utf8"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/surface"
)

// messageOverhead is the structural overhead, in tokens, the estimator adds to every message: role and
// framing a provider adds around each message even when it is empty.
const messageOverhead = 4

// EstimateMessage prices one message, given as its canonical JSON bytes, in estimated tokens. The
// harness's token meter is not in its published tree; its documented heuristic is "about 4 characters
// per token plus structural overhead" with no configuration, and that is what this is: the message's
// JSON text in UTF-16 code units (JavaScript's string length) divided by four, rounded up, plus
// messageOverhead. A nil message (a node that derives none) costs only the overhead.
//
// One function prices both the shadowed nodes and the framed checkpoint, so the shrink check ("the
// summary is not smaller than the shadowed content") compares like with like (spec Part E).
func EstimateMessage(msg []byte) int {
	return (utf16Len(msg)+3)/4 + messageOverhead
}

// utf16Len is the length JavaScript would give the text: a code point above U+FFFF counts twice.
// Invalid bytes (a lone surrogate kept as WTF-8 decodes as three of them) count once each, which only
// overprices such rare text slightly.
func utf16Len(b []byte) int {
	n := 0
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r > 0xFFFF {
			n += 2
		} else {
			n++
		}
		b = b[size:]
	}
	return n
}

// nodePrices prices every node of the current surface: the estimate of the message it derives.
func nodePrices(events []event.Event, nodes []int64) ([]int, error) {
	out := make([]int, len(nodes))
	for i, seq := range nodes {
		if seq < 0 || seq >= int64(len(events)) {
			return nil, errorf("surface node %d has no matching session event", seq)
		}
		msg, err := surface.Project(events[seq])
		if err != nil {
			return nil, err
		}
		out[i] = EstimateMessage(msg)
	}
	return out, nil
}
