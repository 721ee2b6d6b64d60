package surface

import (
	"errors"

	"github.com/dshfs/dshfs/eventstore/event"
)

// eventAt finds the logged event for a surface seq. events is a contiguous log or window; its first
// event's seq is the base (0 for a whole log).
func eventAt(events []event.Event, seq int64) (event.Event, bool) {
	if len(events) == 0 {
		return event.Event{}, false
	}
	i := seq - max(events[0].Seq, 0)
	if i < 0 || i >= int64(len(events)) || events[i].Seq != seq {
		return event.Event{}, false
	}
	return events[i], true
}

// rawVal is a member read straight from canonical bytes; def is false for undefined.
type rawVal struct {
	b   []byte
	def bool
}

// rawProp is base[key] over canonical bytes for the object/null/undefined cases the projection
// needs: objects yield their member, other non-nullish values yield undefined (no JSON message shape
// has a meaningful property on a primitive), null and undefined throw.
func rawProp(base rawVal, key string) (rawVal, error) {
	if !base.def || string(base.b) == "null" {
		return rawVal{}, typeError(jsVal{def: base.def}, key)
	}
	if base.b[0] != '{' {
		return rawVal{}, nil
	}
	b, ok := event.Lookup(base.b, key)
	return rawVal{b, ok}, nil
}

// emptyContent is `content.length === 0` for a non-nullish content value.
func emptyContent(content rawVal) (bool, error) {
	if !content.def || string(content.b) == "null" {
		return false, typeError(jsVal{def: content.def}, "length")
	}
	switch content.b[0] {
	case '[':
		return string(content.b) == "[]", nil
	case '"':
		return string(content.b) == `""`, nil
	case '{':
		l, ok := event.Lookup(content.b, "length")
		return ok && string(l) == "0", nil
	}
	return false, nil
}

// falsy is JavaScript's `!x` for a JSON value (`if (msg)` in deriveMessages).
func falsy(v rawVal) bool {
	if !v.def {
		return true
	}
	switch string(v.b) {
	case "null", "false", "0", `""`:
		return true
	}
	return false
}

// Project is the harness's deriveEventMessage for one surface event: the canonical bytes of the message
// it derives to (aliasing the event's bytes), or nil when it derives none (an assistant/message with
// empty content).
func Project(e event.Event) ([]byte, error) { return projection(e) }

// projection is deriveEventMessage for one event: the canonical bytes of the message it derives to,
// or nil when it derives none.
func projection(e event.Event) ([]byte, error) {
	data := rawVal{}
	data.b, data.def = e.Member("data")
	var msg rawVal
	switch e.Type {
	case "user/message":
		msg = data
	case "assistant/message":
		m, err := rawProp(data, "message")
		if err != nil {
			return nil, err
		}
		content, err := rawProp(m, "content")
		if err != nil {
			return nil, err
		}
		empty, err := emptyContent(content)
		if err != nil || empty {
			return nil, err
		}
		msg = m
	case "tool/result", "system/message", "developer/message":
		// v4's system and developer messages (no v0 log has them) are model messages as stored, like a
		// tool result's
		m, err := rawProp(data, "message")
		if err != nil {
			return nil, err
		}
		msg = m
	default:
		return nil, nil
	}
	if falsy(msg) {
		return nil, nil
	}
	return msg.b, nil
}

// DeriveMessages is deriveMessages(): one canonical JSON message (JSON.stringify bytes, no newline)
// per projected node, in surface order. user/message projects its data, assistant/message,
// tool/result and v4's system/message and developer/message their data.message; an assistant/message with empty content stays a node but derives
// nothing. The returned slices alias the events' bytes.
func DeriveMessages(events []event.Event, r *Result) ([][]byte, error) {
	out := make([][]byte, 0, len(r.Nodes))
	for _, seq := range r.Nodes {
		e, ok := eventAt(events, seq)
		if !ok {
			return nil, errText("surface node ", itoa(seq), " has no matching session event")
		}
		msg, err := projection(e)
		if err != nil {
			return nil, err
		}
		if msg != nil {
			out = append(out, msg)
		}
	}
	return out, nil
}

// Balance returns compaction's tool-pairing running count at every cut of the current surface:
// len(r.Nodes)+1 values, cut 0 being 0 and cut i+1 the count after node i. A cut is balanced (a safe
// compaction boundary) when its count is 0. An assistant/message opens one pair per tool-call block, a
// tool/result closes one, other nodes are neutral; a result with no open call fails with the
// harness's "(corrupt surface)" text.
func Balance(events []event.Event, r *Result) ([]int, error) {
	out := make([]int, 1, len(r.Nodes)+1)
	count := 0
	for _, seq := range r.Nodes {
		e, ok := eventAt(events, seq)
		if !ok {
			return nil, errText("tool-pairing balance: surface seq ", itoa(seq), " has no matching session event (corrupt surface)")
		}
		switch e.Type {
		case "assistant/message":
			n, err := toolCalls(e)
			if err != nil {
				return nil, err
			}
			count += n
		case "tool/result":
			count--
		}
		if count < 0 {
			return nil, errText("tool-pairing balance: tool/result at surface seq ", itoa(seq), " has no matching tool-call (corrupt surface)")
		}
		out = append(out, count)
	}
	return out, nil
}

// toolCalls counts `data.message.content` blocks whose type is "tool-call".
func toolCalls(e event.Event) (int, error) {
	data := rawVal{}
	data.b, data.def = e.Member("data")
	m, err := rawProp(data, "message")
	if err != nil {
		return 0, err
	}
	c, err := rawProp(m, "content")
	if err != nil {
		return 0, err
	}
	if !c.def || string(c.b) == "null" {
		return 0, typeError(jsVal{def: c.def}, "filter")
	}
	if c.b[0] != '[' {
		return 0, errors.New("event.data.message.content.filter is not a function")
	}
	content, err := event.Parse(c.b)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, block := range content.Arr {
		if block.Kind == event.KindNull {
			//lint:ignore ST1005 the harness's exact text (the TypeError JavaScript raises here)
			return 0, errors.New("Cannot read properties of null (reading 'type')")
		}
		if t, ok := block.Get("type"); ok && t.Kind == event.KindString && t.Str == "tool-call" {
			n++
		}
	}
	return n, nil
}
