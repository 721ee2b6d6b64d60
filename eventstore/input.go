package eventstore

import (
	"slices"
	"strconv"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/load"
)

// inputKeys are the members an append line may carry (docs/writing.md): the event envelope, with seq and
// time optional.
var inputKeys = []string{"type", "data", "seq", "time", "surfaceOp", "sourceEventSeqs", "ignorable"}

// input is a parsed append line: the event and its record (the parsed object), so that validation does
// not parse the event a second time.
type input struct {
	ev  event.Event
	rec event.Value
	// prepared says the fields below hold what Session.prepare found, ahead of the fold's checks
	prepared bool
	invalid  error         // Session.check's outcome
	packing  event.Packing // how a flush packs the event (when it is valid)
	millis   int64         // its time, when timed
	timed    bool
	// quick marks an event quickInput read without parsing its record: turn and step are its data's, all
	// the live trace reads of it, and rec is the zero Value until liveTrace.acceptInput needs a record
	quick      bool
	turn, step float64
	// message marks a quick message event (quickMessage): callID is its data.callId (tool/call) or
	// data.message.source.callId (tool/result), appendOp whether it carries surfaceOp "append" (it carries
	// no other)
	message  bool
	callID   string
	appendOp bool
}

// parseInput turns one append line (without its LF) into the event it appends at seq: `type` and `data`
// required; `seq` optional and, if given, equal to seq; `time` optional (default now, epoch ms);
// `surfaceOp`, `sourceEventSeqs` and `ignorable` as the envelope allows; no other keys. The line must be
// lossless JSON (no duplicate keys, no -0, valid UTF-8). The event is encoded as the harness's
// Session.append builds it — type, seq, time, data, then sourceEventSeqs and surfaceOp — with ignorable
// (which Session.append cannot set) after data. Whether the event fits the log (envelope rules, surface
// rules, vocabulary) is checked when it is accepted.
func parseInput(line []byte, seq, now int64) (input, *CommandError) {
	if in, ok := quickInput(line, seq, now); ok {
		return in, nil
	}
	return parseLine(line, seq, now)
}

// parseLine is parseInput through the strict parser, for any line.
func parseLine(line []byte, seq, now int64) (input, *CommandError) {
	bad := func(msg string) (input, *CommandError) {
		return input{}, &CommandError{Failure: Invalid, Code: CodeBadInput, Message: msg}
	}
	v, err := event.ParseStrict(line)
	if err != nil {
		return bad("not lossless JSON: " + err.Error())
	}
	if v.Kind != event.KindObject {
		return bad("an append line must be a JSON object")
	}
	for _, m := range v.Obj {
		if !slices.Contains(inputKeys, m.Key) {
			return bad("unknown key " + jsonText(m.Key) + " (allowed: type, data, seq, time, surfaceOp, sourceEventSeqs, ignorable)")
		}
	}
	typ, ok := v.Get("type")
	if !ok || typ.Kind != event.KindString || typ.Str == "" {
		return bad(`"type" must be a non-empty string`)
	}
	data, ok := v.Get("data")
	if !ok {
		return bad(`"data" is required`)
	}
	if s, ok := v.Get("seq"); ok {
		if s.Kind != event.KindNumber || s.Num != float64(seq) {
			return input{}, &CommandError{Failure: Invalid, Code: CodeBadInput,
				Message: "stale or wrong seq " + string(event.Stringify(s)) + ": the next seq is " + strconv.FormatInt(seq, 10)}
		}
	}
	t := now
	if tv, ok := v.Get("time"); ok {
		if tv.Kind != event.KindNumber || !event.IsSafeInteger(tv.Num) {
			return bad(`"time" must be a safe integer (epoch milliseconds)`)
		}
		t = int64(tv.Num)
	}
	ig, hasIg := v.Get("ignorable")
	if hasIg && (ig.Kind != event.KindBool || !ig.Bool) {
		return bad(`"ignorable" may only be true`)
	}
	if ev, ok := storedForm(line, v, typ.Str, seq); ok {
		return input{ev: ev, rec: v}, nil
	}
	members := []event.Member{{Key: "type", Value: typ}, {Key: "seq", Value: event.Int(seq)}, {Key: "time", Value: event.Int(t)}, {Key: "data", Value: data}}
	if hasIg {
		members = append(members, event.Member{Key: "ignorable", Value: ig})
	}
	for _, k := range []string{"sourceEventSeqs", "surfaceOp"} {
		if m, ok := v.Get(k); ok {
			members = append(members, event.Member{Key: k, Value: m})
		}
	}
	// A line already in canonical form (what `dshfs cat` and the harness print) holds data's canonical
	// bytes: splice them instead of stringifying the parsed value again.
	raw, ok := []byte(nil), false
	if event.IsCanonical(line) {
		raw, ok = event.Lookup(line, "data")
	}
	if !ok {
		raw = event.Stringify(data)
	}
	// The members are distinct and none is an array index, so they are already in JS order.
	rec := event.Value{Kind: event.KindObject, Obj: members}
	return input{ev: event.NewEventFrom(typ.Str, seq, t, raw, members[4:]...), rec: rec}, nil
}

// quickInput is parseInput and Session.prepare in one pass over the bytes, for the two kinds of line that
// are most of what a live writer appends, laid out as the harness writes them: a streamed assistant/chunk
// (event.ReadChunk, the line canonical) and a turn or step bracket (load.BracketData), each either in stored
// form or without seq and time (load.ReadEnvelope). Chunks are
// three quarters of a turn's events and brackets half of the rest; the tree each was parsed into (a
// kilobyte of values, of which the checks read a few numbers) was most of an append's CPU time and
// garbage. Every check of the event alone passes on such a line — its envelope is exactly type, seq, time
// and data, its type is known, nothing upgrades it — and the live trace reads only its turn and step
// (liveTrace.acceptInput). TestQuickInputAgrees holds it to the parsed path's outcome.
func quickInput(line []byte, seq, now int64) (input, bool) {
	env, ok := load.ReadEnvelope(line)
	if !ok || (env.Stored && env.Seq != seq) {
		return input{}, false
	}
	in := input{prepared: true, timed: true, quick: true, millis: now}
	if env.Stored {
		in.millis = env.Time
	}
	var typ string
	switch {
	case string(env.Type) == "assistant/chunk":
		c, ok := event.ReadChunk(env.Data, seq, in.millis)
		if !ok || !event.IsCanonical(line) {
			return input{}, false
		}
		typ, in.packing, in.turn, in.step = "assistant/chunk", c.Packing, c.Turn, c.Step
	case load.IsBracket(string(env.Type)):
		typ = string(env.Type)
		if in.turn, in.step, ok = load.BracketData(env.Data, typ); !ok {
			return input{}, false
		}
	case messageTypes[string(env.Type)] && env.Stored:
		return quickMessage(line, string(env.Type), seq, in)
	default:
		return input{}, false
	}
	if env.Stored {
		in.ev = event.CanonicalEvent(append([]byte(nil), line...), typ, seq)
	} else {
		in.ev = event.NewEventFrom(typ, seq, in.millis, env.Data)
	}
	return in, true
}

// messageTypes are the types quickMessage reads.
var messageTypes = map[string]bool{"user/message": true, "assistant/message": true, "tool/call": true, "tool/result": true}

// quickMessage is quickInput for a message event in stored form (what `dshfs cat` prints, and so what a
// replay or a copy appends): a user/message, assistant/message, tool/call or tool/result that is
// canonical, its members in storedOrder, in which every check of the event alone passes and no upgrade
// applies (load.QuickMessage, the load's own reading of a stored message event) — the event storedForm
// would make of it, checked as prepare would, without parsing it into a tree. Message events are a
// quarter to a half of what an agent appends once its streamed text is not counted, and each was a tree
// of some thirty values of which the checks read a few. What the live trace needs of it is read here:
// data.turn and data.step (the open turn and step it must name), and surfaceOp, which must be absent or
// "append" (a surface replacement is parsed, as any other line); a tool/result for a call that is not
// pending is parsed when the trace reaches it (liveTrace.acceptInput), whose decision then reads its
// content. TestQuickMessageInputAgrees holds it to the parsed path.
func quickMessage(line []byte, typ string, seq int64, in input) (input, bool) {
	if !event.IsCanonical(line) {
		return input{}, false
	}
	var turn, step []byte // the tokens of data.turn and data.step
	var op []byte         // the surfaceOp token
	k := 0
	end := event.Members(line, 0, func(name []byte, at int) int {
		for k < len(storedOrder) && storedOrder[k] != string(name) {
			if k < 4 {
				return -1 // type, seq, time and data come first, in this order
			}
			k++
		}
		if k == len(storedOrder) {
			return -1
		}
		k++
		end := event.SkipValue(line, at)
		switch {
		case end < 0:
		case string(name) == "surfaceOp":
			op = line[at:end]
		case string(name) == "data":
			if event.Members(line, at, func(name []byte, at int) int {
				end := event.SkipValue(line, at)
				if end >= 0 && string(name) == "turn" {
					turn = line[at:end]
				} else if end >= 0 && string(name) == "step" {
					step = line[at:end]
				}
				return end
			}) != end {
				return -1
			}
		}
		return end
	})
	if end != len(line) || k < 4 || (op != nil && string(op) != `"append"`) {
		return input{}, false
	}
	if typ != "user/message" {
		var ok bool
		if in.turn, ok = countToken(turn); !ok {
			return input{}, false
		}
		if in.step, ok = countToken(step); !ok {
			return input{}, false
		}
	}
	in.ev = event.CanonicalEvent(line, typ, seq)
	callID, ok := load.QuickMessage(in.ev)
	if !ok {
		return input{}, false
	}
	in.ev = event.CanonicalEvent(append([]byte(nil), line...), typ, seq)
	in.message, in.callID, in.appendOp = true, callID, op != nil
	return in, true
}

// countToken is the value of a JSON number token spelled as non-negative decimal digits, at most 15 of them
// (a safe integer, spelled as JSON.stringify spells it in a canonical line).
func countToken(tok []byte) (float64, bool) {
	if len(tok) == 0 || len(tok) > 15 || (tok[0] == '0' && len(tok) > 1) {
		return 0, false
	}
	n := 0.0
	for _, c := range tok {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + float64(c-'0')
	}
	return n, true
}

func jsonText(s string) string { return string(event.Stringify(event.String(s))) }

// storedOrder is the order of the members of a stored event as Session.append writes them; an append line
// may leave out only the optional ones (ignorable, sourceEventSeqs, surfaceOp).
var storedOrder = []string{"type", "seq", "time", "data", "ignorable", "sourceEventSeqs", "surfaceOp"}

// storedForm is the event of an append line that is already the record parseInput would encode —
// canonical, carrying seq and time, its members in storedOrder (what `dshfs cat` and the harness print,
// and so what a replay or a copy appends) — as a copy of the line's bytes, without encoding it again.
// The line v was parsed from has passed ParseStrict and parseInput's checks of seq, time and ignorable.
func storedForm(line []byte, v event.Value, typ string, seq int64) (event.Event, bool) {
	if len(v.Obj) < 4 {
		return event.Event{}, false
	}
	k := 0
	for _, m := range v.Obj {
		for k < len(storedOrder) && storedOrder[k] != m.Key {
			if k < 4 {
				return event.Event{}, false // type, seq, time and data are all required here, in order
			}
			k++
		}
		if k == len(storedOrder) {
			return event.Event{}, false
		}
		k++
	}
	if k < 4 || !event.IsCanonical(line) {
		return event.Event{}, false
	}
	return event.CanonicalEvent(append([]byte(nil), line...), typ, seq), true
}
