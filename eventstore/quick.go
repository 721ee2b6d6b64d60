package eventstore

import (
	"bytes"
	"strconv"

	"github.com/dshfs/dshfs/eventstore/event"
)

// quickMessage is what the load's passes take from a message event that quickEvent read without
// parsing: the message id the upgrades remember, and what the repair planner tracks.
type quickMessage struct {
	id     string   // the message id (eventMessageID); "" for a tool/call, which has none
	step   float64  // assistant/message: data.step, the step of the tool calls it opens
	calls  []string // assistant/message: the ids of its tool-call blocks, in order
	callID string   // tool/call: data.callId; tool/result: data.message.source.callId
}

// quickEvent reads, without parsing it into a tree, a user/message, assistant/message, tool/call or
// tool/result event in which every load check passes and no upgrade applies, whatever the order of its
// members, and returns what the passes take from it; ok is false for anything else, which is parsed and
// checked in full, so that every error keeps its exact text. Message events are a tenth of a large log's
// events but were most of its parsing: a tree of some thirty values each, of which the checks read a few.
//
// What it requires, level by level (TestQuickEventsPassEveryCheck runs every check on what it accepts):
//
//   - the record: only envelope members (type, seq, time, data, surfaceOp, sourceEventSeqs, ignorable);
//     seq the event's own, a non-negative safe integer; time a safe integer; ignorable, when present,
//     true; data an object;
//   - user/message: data is the message: a non-empty string id, role "user", an array content, a source
//     object with a non-empty string kind;
//   - assistant/message: data.step a safe integer and data.message a message as above with role
//     "assistant", source kind "model" and non-empty string provider and model, and content blocks that
//     are objects, each tool-call block with a string id;
//   - tool/result: data.message a message as above, source kind "tool" with a non-empty string callId,
//     and exactly one content block: an object of type "tool-result" with an array content and that
//     callId as its toolCallId;
//   - tool/call: a string data.callId, and no data.message (whose id the upgrades would record).
//
// A name the checks read appearing twice anywhere on the way sends the event to the parser.
func quickEvent(e event.Event) (q quickMessage, ok bool) {
	switch e.Type {
	case "user/message", "assistant/message", "tool/call", "tool/result":
	default:
		return q, false
	}
	if e.Seq < 0 {
		return q, false
	}
	var seen bits
	ok = members(e.Raw, func(name, value []byte) bool {
		switch string(name) {
		case "type":
			return seen.first(0) && len(value) == len(e.Type)+2 && string(value[1:len(value)-1]) == e.Type
		case "seq":
			var buf [20]byte
			return seen.first(1) && bytes.Equal(value, strconv.AppendInt(buf[:0], e.Seq, 10))
		case "time":
			return seen.first(2) && safeIntToken(value)
		case "data":
			return seen.first(3) && q.data(e.Type, value)
		case "ignorable":
			return seen.first(4) && string(value) == "true"
		case "surfaceOp", "sourceEventSeqs": // the surface fold reads them from the bytes
			return true
		}
		return false // not an envelope member: the envelope check refuses the event
	})
	return q, ok && seen.all(4) // type, seq, time and data
}

// data reads the data member of an event of type typ.
func (q *quickMessage) data(typ string, raw []byte) bool {
	var seen bits
	switch typ {
	case "user/message":
		return q.message(raw, "user", nil)
	case "tool/call":
		ok := members(raw, func(name, value []byte) bool {
			switch string(name) {
			case "callId":
				var s bool
				q.callID, s = str(value)
				return seen.first(0) && s
			case "message":
				return false
			}
			return true
		})
		return ok && seen.all(1)
	}
	ok := members(raw, func(name, value []byte) bool {
		switch string(name) {
		case "step":
			if !seen.first(0) || !safeIntToken(value) {
				return false
			}
			q.step = intToken(value)
			return true
		case "message":
			role := "user"
			if typ == "assistant/message" {
				role = "assistant"
			}
			return seen.first(1) && q.message(value, role, &typ)
		}
		return true
	})
	if typ == "tool/result" {
		return ok && seen.has(1)
	}
	return ok && seen.all(2)
}

// message reads a message object with role role; typ is the event's type, nil for a user/message.
func (q *quickMessage) message(raw []byte, role string, typ *string) bool {
	var seen bits
	var kind, toolCallID, callID []byte
	model := typ != nil && *typ == "assistant/message"
	result := typ != nil && *typ == "tool/result"
	ok := members(raw, func(name, value []byte) bool {
		switch string(name) {
		case "id":
			var s bool
			q.id, s = str(value)
			return seen.first(0) && s && q.id != ""
		case "role":
			return seen.first(1) && len(value) == len(role)+2 && string(value[1:len(value)-1]) == role
		case "content":
			if !seen.first(2) || len(value) == 0 || value[0] != '[' {
				return false
			}
			switch {
			case model:
				return q.blocks(value)
			case result:
				var ok bool
				toolCallID, ok = resultBlock(value)
				return ok
			}
			return true
		case "source":
			var s sourceFacts
			if !seen.first(3) || !s.read(value, model, result) {
				return false
			}
			kind, callID = s.kind, s.callID
			return true
		}
		return true
	})
	if !ok || !seen.all(4) || len(kind) < 3 { // kind: a non-empty string
		return false
	}
	switch {
	case model:
		return string(kind) == `"model"`
	case result:
		if string(kind) != `"tool"` || len(callID) < 3 || !bytes.Equal(callID, toolCallID) {
			return false // canonical strings are equal exactly when their bytes are
		}
		q.callID, ok = str(callID)
		return ok
	}
	return true
}

// sourceFacts is what message reads of a message's source.
type sourceFacts struct{ kind, callID []byte }

// read reads a source object: a string kind, and for a model the provider and model, for a tool result
// the callId, as non-empty strings.
func (s *sourceFacts) read(raw []byte, model, result bool) bool {
	var seen bits
	ok := members(raw, func(name, value []byte) bool {
		switch string(name) {
		case "kind":
			s.kind = value
			return seen.first(0) && isStrToken(value)
		case "provider":
			return !model || seen.first(1) && isStrToken(value) && len(value) > 2
		case "model":
			return !model || seen.first(2) && isStrToken(value) && len(value) > 2
		case "callId":
			s.callID = value
			return !result || seen.first(1) && isStrToken(value)
		}
		return true
	})
	switch {
	case model:
		return ok && seen.all(3)
	case result:
		return ok && seen.all(2)
	}
	return ok && seen.all(1)
}

// blocks reads an assistant message's content: objects, the ids of its tool-call blocks kept.
func (q *quickMessage) blocks(raw []byte) bool {
	return elements(raw, func(block []byte) bool {
		var seen bits
		var call bool
		var id []byte
		ok := members(block, func(name, value []byte) bool {
			switch string(name) {
			case "type":
				call = string(value) == `"tool-call"`
				return seen.first(0)
			case "id":
				id = value
				return seen.first(1)
			}
			return true
		})
		if !ok || !call {
			return ok
		}
		s, isStr := str(id)
		q.calls = append(q.calls, s)
		return isStr
	})
}

// resultBlock reads a tool result's content, which must be exactly one tool-result block with an array
// content, and returns its toolCallId token.
func resultBlock(raw []byte) (toolCallID []byte, ok bool) {
	n := 0
	ok = elements(raw, func(block []byte) bool {
		n++
		var seen bits
		ok := members(block, func(name, value []byte) bool {
			switch string(name) {
			case "type":
				return seen.first(0) && string(value) == `"tool-result"`
			case "content":
				return seen.first(1) && value[0] == '['
			case "toolCallId":
				toolCallID = value
				return seen.first(2) && isStrToken(value)
			}
			return true
		})
		return ok && seen.all(3)
	})
	return toolCallID, ok && n == 1
}

// members calls fn with each member of the canonical object raw, and reports whether raw is an object
// and fn accepted every member.
func members(raw []byte, fn func(name, value []byte) bool) bool {
	all := true
	isObject := event.EachMember(raw, func(name, value []byte) bool {
		all = fn(name, value)
		return all
	})
	return isObject && all
}

// elements calls fn with each element of the canonical array raw, each of which must be an object, and
// reports whether fn accepted them all.
func elements(raw []byte, fn func(element []byte) bool) bool {
	if len(raw) < 2 || raw[0] != '[' {
		return false
	}
	for i := 1; i < len(raw)-1; {
		if raw[i] != '{' {
			return false
		}
		end := event.SkipValue(raw, i)
		if end < 0 || !fn(raw[i:end]) {
			return false
		}
		if raw[end] == ',' {
			end++
		}
		i = end
	}
	return true
}

// bits records which of up to eight names an object had.
type bits uint8

// first marks name n seen and reports whether it was not before.
func (b *bits) first(n uint) bool {
	if *b&(1<<n) != 0 {
		return false
	}
	*b |= 1 << n
	return true
}

func (b bits) has(n uint) bool { return b&(1<<n) != 0 }

// all reports whether names 0..n-1 were all seen.
func (b bits) all(n uint) bool { return b&(1<<n-1) == 1<<n-1 }

// intToken is the value of a safe integer token (safeIntToken).
func intToken(tok []byte) float64 {
	neg := tok[0] == '-'
	if neg {
		tok = tok[1:]
	}
	var n float64
	for _, c := range tok {
		n = n*10 + float64(c-'0')
	}
	if neg {
		return -n
	}
	return n
}

func isStrToken(tok []byte) bool { return len(tok) >= 2 && tok[0] == '"' }

// str decodes a canonical string token.
func str(tok []byte) (string, bool) {
	if !isStrToken(tok) {
		return "", false
	}
	body := tok[1 : len(tok)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return string(body), true
	}
	v, err := event.Parse(tok)
	return v.Str, err == nil && v.Kind == event.KindString
}
