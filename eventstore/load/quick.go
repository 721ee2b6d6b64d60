package load

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
	raw := e.Raw
	var seen bits
	end := event.Members(raw, 0, func(name []byte, at int) int {
		switch string(name) {
		case "type":
			tok, end := scalar(raw, at)
			return check(end, seen.first(0) && len(tok) == len(e.Type)+2 && string(tok[1:len(tok)-1]) == e.Type)
		case "seq":
			var buf [20]byte
			tok, end := scalar(raw, at)
			return check(end, seen.first(1) && bytes.Equal(tok, strconv.AppendInt(buf[:0], e.Seq, 10)))
		case "time":
			tok, end := scalar(raw, at)
			return check(end, seen.first(2) && safeIntToken(tok))
		case "data":
			if !seen.first(3) {
				return -1
			}
			return q.data(e.Type, raw, at)
		case "ignorable":
			tok, end := scalar(raw, at)
			return check(end, seen.first(4) && string(tok) == "true")
		case "surfaceOp", "sourceEventSeqs": // the surface fold reads them from the bytes
			return event.SkipValue(raw, at)
		}
		return -1 // not an envelope member: the envelope check refuses the event
	})
	return q, end == len(raw) && seen.all(4) // type, seq, time and data
}

// data reads the data member of an event of type typ, at raw[at], and returns where it ends (-1: the
// event is not for quickEvent).
func (q *quickMessage) data(typ string, raw []byte, at int) int {
	var seen bits
	var end int
	switch typ {
	case "user/message":
		return q.message(raw, at, "user", typ)
	case "tool/call":
		end = event.Members(raw, at, func(name []byte, at int) int {
			switch string(name) {
			case "callId":
				tok, end := scalar(raw, at)
				var ok bool
				q.callID, ok = str(tok)
				return check(end, seen.first(0) && ok)
			case "message":
				return -1
			}
			return event.SkipValue(raw, at)
		})
		return check(end, seen.all(1))
	}
	role := "user"
	if typ == "assistant/message" {
		role = "assistant"
	}
	end = event.Members(raw, at, func(name []byte, at int) int {
		switch string(name) {
		case "step":
			tok, end := scalar(raw, at)
			if !seen.first(0) || !safeIntToken(tok) {
				return -1
			}
			q.step = intToken(tok)
			return end
		case "message":
			if !seen.first(1) {
				return -1
			}
			return q.message(raw, at, role, typ)
		}
		return event.SkipValue(raw, at)
	})
	if typ == "tool/result" {
		return check(end, seen.has(1))
	}
	return check(end, seen.all(2))
}

// message reads the message object at raw[at], of role role in an event of type typ.
func (q *quickMessage) message(raw []byte, at int, role, typ string) int {
	var seen bits
	var src sourceFacts
	var toolCallID []byte
	model, result := typ == "assistant/message", typ == "tool/result"
	end := event.Members(raw, at, func(name []byte, at int) int {
		switch string(name) {
		case "id":
			tok, end := scalar(raw, at)
			var ok bool
			q.id, ok = str(tok)
			return check(end, seen.first(0) && ok && q.id != "")
		case "role":
			tok, end := scalar(raw, at)
			return check(end, seen.first(1) && len(tok) == len(role)+2 && string(tok[1:len(tok)-1]) == role)
		case "content":
			if !seen.first(2) || raw[at] != '[' {
				return -1
			}
			switch {
			case model:
				return q.blocks(raw, at)
			case result:
				var end int
				toolCallID, end = resultBlock(raw, at)
				return end
			}
			return event.SkipValue(raw, at)
		case "source":
			if !seen.first(3) {
				return -1
			}
			return src.read(raw, at, model, result)
		}
		return event.SkipValue(raw, at)
	})
	if end < 0 || !seen.all(4) || len(src.kind) < 3 { // kind: a non-empty string
		return -1
	}
	switch {
	case model:
		return check(end, string(src.kind) == `"model"`)
	case result:
		if string(src.kind) != `"tool"` || len(src.callID) < 3 || !bytes.Equal(src.callID, toolCallID) {
			return -1 // canonical strings are equal exactly when their bytes are
		}
		var ok bool
		q.callID, ok = str(src.callID)
		return check(end, ok)
	}
	return end
}

// sourceFacts is what message reads of a message's source.
type sourceFacts struct{ kind, callID []byte }

// read reads the source object at raw[at]: a string kind, and for a model the provider and model, for a
// tool result the callId, as non-empty strings.
func (s *sourceFacts) read(raw []byte, at int, model, result bool) int {
	var seen bits
	end := event.Members(raw, at, func(name []byte, at int) int {
		tok, end := scalar(raw, at)
		switch string(name) {
		case "kind":
			s.kind = tok
			return check(end, seen.first(0) && isStrToken(tok))
		case "provider":
			return check(end, !model || seen.first(1) && isStrToken(tok) && len(tok) > 2)
		case "model":
			return check(end, !model || seen.first(2) && isStrToken(tok) && len(tok) > 2)
		case "callId":
			s.callID = tok
			return check(end, !result || seen.first(1) && isStrToken(tok))
		}
		return end
	})
	switch {
	case model:
		return check(end, seen.all(3))
	case result:
		return check(end, seen.all(2))
	}
	return check(end, seen.all(1))
}

// blocks reads an assistant message's content at raw[at]: objects, the ids of its tool-call blocks kept.
func (q *quickMessage) blocks(raw []byte, at int) int {
	return elements(raw, at, func(at int) int {
		var seen bits
		var call bool
		var id []byte
		end := event.Members(raw, at, func(name []byte, at int) int {
			switch string(name) {
			case "type":
				tok, end := scalar(raw, at)
				call = string(tok) == `"tool-call"`
				return check(end, seen.first(0))
			case "id":
				tok, end := scalar(raw, at)
				id = tok
				return check(end, seen.first(1))
			}
			return event.SkipValue(raw, at)
		})
		if end < 0 || !call {
			return end
		}
		s, isStr := str(id)
		q.calls = append(q.calls, s)
		return check(end, isStr)
	})
}

// resultBlock reads a tool result's content at raw[at], which must be exactly one tool-result block with
// an array content, and returns its toolCallId token and where the content ends.
func resultBlock(raw []byte, at int) (toolCallID []byte, end int) {
	n := 0
	end = elements(raw, at, func(at int) int {
		n++
		var seen bits
		end := event.Members(raw, at, func(name []byte, at int) int {
			tok, end := scalar(raw, at)
			switch string(name) {
			case "type":
				return check(end, seen.first(0) && string(tok) == `"tool-result"`)
			case "content":
				return check(end, seen.first(1) && len(tok) > 0 && tok[0] == '[')
			case "toolCallId":
				toolCallID = tok
				return check(end, seen.first(2) && isStrToken(tok))
			}
			return end
		})
		return check(end, seen.all(3))
	})
	return toolCallID, check(end, n == 1)
}

// elements walks the canonical array at raw[at], whose elements must be objects: fn reads each and
// returns where it ends. elements returns where the array ends, or -1.
func elements(raw []byte, at int, fn func(at int) int) int {
	if at+1 >= len(raw) || raw[at] != '[' {
		return -1
	}
	if raw[at+1] == ']' {
		return at + 2
	}
	for i := at + 1; i < len(raw); {
		if raw[i] != '{' {
			return -1
		}
		end := fn(i)
		if end <= i || end >= len(raw) {
			return -1
		}
		switch raw[end] {
		case ',':
			i = end + 1
		case ']':
			return end + 1
		default:
			return -1
		}
	}
	return -1
}

// scalar returns the value token at raw[at] and where it ends.
func scalar(raw []byte, at int) ([]byte, int) {
	end := event.SkipValue(raw, at)
	if end < 0 {
		return nil, -1
	}
	return raw[at:end], end
}

// check is end when ok, else -1.
func check(end int, ok bool) int {
	if !ok {
		return -1
	}
	return end
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

// QuickMessage is quickEvent for an appended event: ok when the event is a user/message,
// assistant/message, tool/call or tool/result in which every check of the event alone passes and no
// upgrade applies, read without parsing it; callID is its data.callId (tool/call) or
// data.message.source.callId (tool/result).
func QuickMessage(e event.Event) (callID string, ok bool) {
	q, ok := quickEvent(e)
	return q.callID, ok
}
