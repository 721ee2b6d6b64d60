package load

import (
	"bytes"
	"errors"

	"github.com/dshfs/dshfs/eventstore/event"
)

// This file reproduces the coordinator's read-side legacy handling (session-persistence/src/coordinator.ts):
// refusal of retired vocabulary (assertSupportedEvents) and the in-memory upgrade of older shapes the build
// still reads (migrateLegacy*), followed per event by the message-shape check of adoptSessionEvent. The
// upgraded JSON must equal what the harness's object spreads produce, so every rewrite below keeps the
// member order a spread keeps: an existing key stays where it was, a new key goes last.

// CheckSupportedEvents is assertSupportedEvents: three whole-log scans, in this order, for retired types.
// The fallback scan reads data.reason and so raises the harness's TypeError on a request/header without
// object-like data.
func CheckSupportedEvents(events []event.Event, recs []event.Value, id string) error {
	for _, check := range retiredChecks {
		for i, e := range events {
			if err := check(e, recs[i], id); err != nil {
				return err
			}
		}
	}
	return nil
}

// retiredChecks are assertSupportedEvents' scans, in order, each as a check of one event and its record.
var retiredChecks = [...]func(e event.Event, rec event.Value, id string) error{
	func(e event.Event, rec event.Value, id string) error {
		return retiredType(e, rec, id, "request/header-delta")
	},
	func(e event.Event, rec event.Value, id string) error { return retiredType(e, rec, id, "mode/set") },
	fallbackHeader,
}

func retiredType(e event.Event, rec event.Value, id, t string) error {
	if e.Type != t {
		return nil
	}
	seq, ok := rec.Get("seq")
	return errors.New(`session "` + id + `" contains unsupported legacy ` + t + ` event at seq ` + JSString(seq, ok))
}

func fallbackHeader(e event.Event, rec event.Value, id string) error {
	if e.Type != "request/header" {
		return nil
	}
	data, dataOK := rec.Get("data")
	reason, reasonOK, err := jsGet(data, dataOK, "reason")
	if err != nil {
		return err
	}
	if strEq(reason, reasonOK, "fallback") {
		seq, ok := rec.Get("seq")
		return errors.New(`session "` + id + `" contains unsupported legacy request/header reason "fallback" at seq ` + JSString(seq, ok))
	}
	return nil
}

// legacyMessageID mints `legacy-message:<id>:<seq>`, the import identity of a pre-identity message.
func legacyMessageID(id string, seq event.Value, seqOK bool) event.Value {
	return event.String("legacy-message:" + id + ":" + JSString(seq, seqOK))
}

// spread returns a fresh object holding obj's members (a JS `{...obj}`), so that later members can be
// appended without aliasing obj.
func spread(obj event.Value) []event.Member {
	return append([]event.Member(nil), obj.Obj...)
}

// withMembers is `{...obj, k1: v1, ...}`: existing keys keep their position, new keys go last.
func withMembers(obj event.Value, ms ...event.Member) event.Value {
	return event.Object(append(spread(obj), ms...)...)
}

// withoutKeys is the rest object of `const {k1, k2, ...rest} = obj`.
func withoutKeys(obj event.Value, keys ...string) event.Value {
	out := make([]event.Member, 0, len(obj.Obj))
	for _, m := range obj.Obj {
		if !contains(keys, m.Key) {
			out = append(out, m)
		}
	}
	return event.Object(out...)
}

// optMember builds a member for a JS object literal entry whose value may be undefined; JSON.stringify
// drops such entries, so an undefined value yields no member at all.
func optMember(key string, v event.Value, present bool) []event.Member {
	if !present {
		return nil
	}
	return []event.Member{{Key: key, Value: v}}
}

// migrateTurnStart is migrateLegacyTurnStartEvent: an old turn/start carried a `trigger`, which is dropped
// after the complete old shape is verified.
func migrateTurnStart(rec event.Value, id string) (event.Value, bool, error) {
	if typ, ok := rec.Get("type"); !strEq(typ, ok, "turn/start") {
		return rec, false, nil
	}
	data, dataOK := rec.Get("data")
	if !isRecord(data, dataOK) || !data.Has("trigger") {
		return rec, false, nil
	}
	turn, turnOK := data.Get("turn")
	trigger, trigOK := data.Get("trigger")
	kind, kindOK := trigger.Get("kind")
	if !isSafeInt(turn, turnOK) || turn.Num < 1 ||
		!hasOnlyKeys(data, []string{"turn", "trigger"}) ||
		!isRecord(trigger, trigOK) || !isNonEmptyStr(kind, kindOK) {
		return rec, false, malformedLegacy(rec, id, "turn/start")
	}
	return withMembers(rec, event.Member{Key: "data", Value: event.Object(event.Member{Key: "turn", Value: turn})}), true, nil
}

func malformedLegacy(rec event.Value, id, what string) error {
	seq, ok := rec.Get("seq")
	return errors.New(`session "` + id + `" contains malformed pre-react-loop ` + what + ` at seq ` + JSString(seq, ok))
}

// migrateTurnEnd is migrateLegacyTurnEndEvent: every turn/end must have exactly {turn, reason}; the old
// aborted/disposed/error reason shapes become their current forms and unknown kinds pass untouched.
func migrateTurnEnd(rec event.Value, id string) (event.Value, bool, error) {
	if typ, ok := rec.Get("type"); !strEq(typ, ok, "turn/end") {
		return rec, false, nil
	}
	data, dataOK := rec.Get("data")
	if !isRecord(data, dataOK) {
		return rec, false, nil
	}
	malformed := func() (event.Value, bool, error) { return rec, false, malformedLegacy(rec, id, "turn/end") }
	turn, turnOK := data.Get("turn")
	reason, reasonOK := data.Get("reason")
	kind, kindOK := reason.Get("kind")
	if !isSafeInt(turn, turnOK) || turn.Num < 1 ||
		!hasOnlyKeys(data, []string{"turn", "reason"}) ||
		!isRecord(reason, reasonOK) || !isStr(kind, kindOK) {
		return malformed()
	}
	var current event.Value
	switch kind.Str {
	case "completed", "blocked", "max-tokens", "interrupted":
		if !hasOnlyKeys(reason, []string{"kind"}) {
			return malformed()
		}
		return rec, false, nil
	case "aborted":
		if reason.Has("reason") {
			return rec, false, nil
		}
		if !hasOnlyKeys(reason, []string{"kind"}) {
			return malformed()
		}
		current = event.Object(
			event.Member{Key: "kind", Value: event.String("aborted")},
			event.Member{Key: "reason", Value: event.Object(event.Member{Key: "kind", Value: event.String("legacy")})},
		)
	case "disposed":
		if !hasOnlyKeys(reason, []string{"kind"}) {
			return malformed()
		}
		current = event.Object(
			event.Member{Key: "kind", Value: event.String("aborted")},
			event.Member{Key: "reason", Value: event.Object(event.Member{Key: "kind", Value: event.String("disposed")})},
		)
	case "error":
		if reason.Has("error") {
			return rec, false, nil
		}
		if step, ok := reason.Get("step"); !isSafeInt(step, ok) || step.Num < 0 {
			return malformed()
		}
		failure, failureOK := reason.Get("failure")
		if isRecord(failure, failureOK) && hasOnlyKeys(reason, []string{"kind", "step", "failure"}) && validLegacyFailure(failure) {
			current = event.Object(
				event.Member{Key: "kind", Value: event.String("error")},
				event.Member{Key: "error", Value: failure},
			)
			break
		}
		msg, msgOK := reason.Get("message")
		code, codeOK := reason.Get("code")
		keys := []string{"kind", "step", "message"}
		if codeOK {
			keys = append(keys, "code")
		}
		if !hasOnlyKeys(reason, keys) || !isStr(msg, msgOK) || (codeOK && !isStr(code, codeOK)) {
			return malformed()
		}
		if !codeOK {
			code = event.String("UNKNOWN")
		}
		current = event.Object(
			event.Member{Key: "kind", Value: event.String("error")},
			event.Member{Key: "error", Value: event.Object(
				event.Member{Key: "message", Value: msg},
				event.Member{Key: "code", Value: code},
			)},
		)
	default:
		return rec, false, nil
	}
	newData := withMembers(data, event.Member{Key: "reason", Value: current})
	return withMembers(rec, event.Member{Key: "data", Value: newData}), true, nil
}

// validLegacyFailure checks the old error reason's LlmFailure payload.
func validLegacyFailure(f event.Value) bool {
	if !hasOnlyKeys(f, []string{"message", "code"}, "status", "providerRetryAfterMs", "requestId") {
		return false
	}
	msg, msgOK := f.Get("message")
	code, codeOK := f.Get("code")
	if !isStr(msg, msgOK) || !isStr(code, codeOK) {
		return false
	}
	if v, ok := f.Get("status"); ok && v.Kind != event.KindNumber {
		return false
	}
	if v, ok := f.Get("providerRetryAfterMs"); ok && v.Kind != event.KindNumber {
		return false
	}
	if v, ok := f.Get("requestId"); ok && v.Kind != event.KindString {
		return false
	}
	return true
}

// migrateSteering is migrateLegacySteeringEvent: the removed steering/message surface event becomes a
// user/message, either by unwrapping {turn, message} or by identifying a flat {turn, content, source}.
func migrateSteering(rec event.Value, id string) (event.Value, bool, error) {
	if typ, ok := rec.Get("type"); !strEq(typ, ok, "steering/message") {
		return rec, false, nil
	}
	data, dataOK := rec.Get("data")
	if !isRecord(data, dataOK) {
		return rec, false, malformedLegacy(rec, id, "steering/message")
	}
	turn, turnOK := data.Get("turn")
	if wrapped, ok := data.Get("message"); isRecord(wrapped, ok) && isSafeInt(turn, turnOK) &&
		hasOnlyKeys(data, []string{"turn", "message"}) {
		return withMembers(rec,
			event.Member{Key: "type", Value: event.String("user/message")},
			event.Member{Key: "data", Value: wrapped},
		), true, nil
	}
	if !isSafeInt(turn, turnOK) || !hasOnlyKeys(data, []string{"turn", "content", "source"}) {
		return rec, false, malformedLegacy(rec, id, "steering/message")
	}
	seq, seqOK := rec.Get("seq")
	msg := withMembers(withoutKeys(data, "turn"),
		event.Member{Key: "id", Value: legacyMessageID(id, seq, seqOK)},
		event.Member{Key: "role", Value: event.String("user")},
	)
	return withMembers(rec,
		event.Member{Key: "type", Value: event.String("user/message")},
		event.Member{Key: "data", Value: msg},
	), true, nil
}

// replacementStart reads surfaceOp.start of a replace marker, leaving malformed markers to the surface
// validator.
func replacementStart(rec event.Value) (float64, bool) {
	op, ok := rec.Get("surfaceOp")
	if !isRecord(op, ok) {
		return 0, false
	}
	kind, kindOK := op.Get("op")
	start, startOK := op.Get("start")
	if !strEq(kind, kindOK, "replace") || !startOK || start.Kind != event.KindNumber {
		return 0, false
	}
	return start.Num, true
}

// migrateMessage is migrateLegacyMessageEvent: pre-identity user/assistant/tool-result events gain the
// current wrapper and a minted id; a legacy tool/result replacement inherits the id of the event at its
// start. Current-looking but malformed events stay untouched for the shape check to reject.
func migrateMessage(rec event.Value, id string, messageIDs map[float64]string) (event.Value, bool) {
	data, dataOK := rec.Get("data")
	if !isRecord(data, dataOK) {
		return rec, false
	}
	typ, _ := rec.Get("type")
	if typ.Kind != event.KindString {
		return rec, false
	}
	seq, seqOK := rec.Get("seq")
	switch typ.Str {
	case "user/message":
		if data.Has("id") || data.Has("role") || data.Has("message") || !data.Has("content") || !data.Has("source") {
			return rec, false
		}
		msg := withMembers(data,
			event.Member{Key: "id", Value: legacyMessageID(id, seq, seqOK)},
			event.Member{Key: "role", Value: event.String("user")},
		)
		return withMembers(rec, event.Member{Key: "data", Value: msg}), true
	case "assistant/message":
		if data.Has("message") || !data.Has("content") || !data.Has("provenance") {
			return rec, false
		}
		content, _ := data.Get("content")
		provenance, _ := data.Get("provenance")
		var source []event.Member
		if isRecord(provenance, true) {
			source = spread(provenance)
		}
		source = append(source, event.Member{Key: "kind", Value: event.String("model")})
		msg := event.Object(
			event.Member{Key: "id", Value: legacyMessageID(id, seq, seqOK)},
			event.Member{Key: "role", Value: event.String("assistant")},
			event.Member{Key: "content", Value: content},
			event.Member{Key: "source", Value: event.Object(source...)},
		)
		newData := withMembers(withoutKeys(data, "content", "provenance"), event.Member{Key: "message", Value: msg})
		return withMembers(rec, event.Member{Key: "data", Value: newData}), true
	case "tool/result":
		if data.Has("message") || !data.Has("callId") || !data.Has("content") || !data.Has("isError") {
			return rec, false
		}
		callID, _ := data.Get("callId")
		content, _ := data.Get("content")
		isError, _ := data.Get("isError")
		var msgID event.Value
		msgIDOK := true
		if start, ok := replacementStart(rec); ok {
			var s string
			s, msgIDOK = messageIDs[start]
			msgID = event.String(s)
		} else {
			msgID = legacyMessageID(id, seq, seqOK)
		}
		var ms []event.Member
		ms = append(ms, optMember("id", msgID, msgIDOK)...)
		ms = append(ms,
			event.Member{Key: "role", Value: event.String("user")},
			event.Member{Key: "content", Value: event.Array(event.Object(
				event.Member{Key: "type", Value: event.String("tool-result")},
				event.Member{Key: "toolCallId", Value: callID},
				event.Member{Key: "content", Value: content},
				event.Member{Key: "isError", Value: isError},
			))},
			event.Member{Key: "source", Value: event.Object(
				event.Member{Key: "kind", Value: event.String("tool")},
				event.Member{Key: "callId", Value: callID},
			)},
		)
		newData := withMembers(withoutKeys(data, "callId", "content", "isError"), event.Member{Key: "message", Value: event.Object(ms...)})
		return withMembers(rec, event.Member{Key: "data", Value: newData}), true
	}
	return rec, false
}

// eventMessageID is eventMessageId: the string id of the message an event carries (data itself for
// user/message, data.message otherwise, for any event type).
func eventMessageID(rec event.Value) (string, bool) {
	data, dataOK := rec.Get("data")
	var msg event.Value
	msgOK := false
	if typ, ok := rec.Get("type"); strEq(typ, ok, "user/message") {
		msg, msgOK = data, isRecord(data, dataOK)
	} else if isRecord(data, dataOK) {
		m, ok := data.Get("message")
		msg, msgOK = m, isRecord(m, ok)
	}
	if !msgOK {
		return "", false
	}
	id, ok := msg.Get("id")
	if !isStr(id, ok) {
		return "", false
	}
	return id.Str, true
}

// MigrateEvent applies the coordinator's upgrades in its order: turn/start, turn/end, steering, message.
func MigrateEvent(rec event.Value, id string, messageIDs map[float64]string) (event.Value, bool, error) {
	changed := false
	for _, migrate := range []func(event.Value, string) (event.Value, bool, error){
		migrateTurnStart, migrateTurnEnd, migrateSteering,
	} {
		next, did, err := migrate(rec, id)
		if err != nil {
			return rec, false, err
		}
		rec, changed = next, changed || did
	}
	next, did := migrateMessage(rec, id, messageIDs)
	return next, changed || did, nil
}

// plainEnvelope reports, without parsing, whether e is an event whose data no load check reads — a type
// outside loadRecord's list, without data.message — and whose envelope passes the harness's seed check
// (CheckEnvelope). Most of a log (streamed chunks) takes this path; anything else is parsed and checked
// in full, so every error keeps its exact text.
func plainEnvelope(e event.Event) bool {
	switch e.Type {
	case "", "turn/start", "turn/end", "step/start", "step/end", "steering/message", "user/message",
		"assistant/message", "tool/result", "tool/call", "request/header", "request/header-delta", "mode/set":
		return false
	}
	if e.Seq < 0 {
		return false
	}
	if _, ok := event.Lookup(e.Raw, "data", "message"); ok {
		return false
	}
	var typ, seq, tm, data, bad bool
	ok := event.EachMember(e.Raw, func(name, value []byte) bool {
		switch string(name) {
		case "type":
			typ = true
		case "seq":
			seq = true
		case "time":
			tm = safeIntToken(value)
		case "data":
			data = true
		case "ignorable":
			bad = string(value) != "true"
		case "surfaceOp", "sourceEventSeqs":
		default:
			bad = true
		}
		return !bad
	})
	return ok && !bad && typ && seq && tm && data
}

// bracketEvent reads, without parsing, a turn or step bracket laid out exactly as the harness writes one:
// in stored form (ReadEnvelope) with the data BracketData reads. On such an event every load check passes
// and no upgrade applies (TestBracketEventsPassEveryCheck); all the checks take from it is the number the
// repair planner tracks, which it returns: N of a turn/start, M of a step/start (0 for the ends). Brackets
// are half of the events that are not chunks, and each was parsed into a tree for that. Any other layout
// takes the parsed path, which says what is wrong in the harness's words.
func bracketEvent(e event.Event) (float64, bool) {
	if !IsBracket(e.Type) {
		return 0, false
	}
	env, ok := ReadEnvelope(e.Raw)
	if !ok || !env.Stored || string(env.Type) != e.Type {
		return 0, false
	}
	turn, step, ok := BracketData(env.Data, e.Type)
	switch e.Type {
	case "turn/start":
		return turn, ok
	case "step/start":
		return step, ok
	}
	return 0, ok
}

// bracketTypes are the types of turn and step brackets.
var bracketTypes = map[string]bool{"turn/start": true, "turn/end": true, "step/start": true, "step/end": true}

// IsBracket reports whether typ is the type of a turn or step bracket.
func IsBracket(typ string) bool { return bracketTypes[typ] }

// Envelope is what ReadEnvelope reads of a line.
type Envelope struct {
	Type      []byte // the type's name, as written
	Stored    bool   // seq and time are present
	Seq, Time int64  // when stored
	Data      []byte // the data member's value
}

// ReadEnvelope reads the envelope of a line laid out as the harness writes one — {"type":T,"seq":S,
// "time":M,"data":D} (stored form) or {"type":T,"data":D} (the append syntax without seq and time) — with
// S and M non-negative safe integers in canonical form. T is what lies between the quotes (a type with
// an escape in its name is never one the callers look for); D is not read. ok is false for any other
// layout.
func ReadEnvelope(line []byte) (env Envelope, ok bool) {
	const head = `{"type":"`
	if !bytes.HasPrefix(line, []byte(head)) {
		return env, false
	}
	rest := line[len(head):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return env, false
	}
	env.Type = rest[:end]
	cur := event.NewCursor(rest[end:])
	if env.Stored = cur.Lit(`","seq":`); env.Stored {
		if env.Seq, ok = cur.Digits(); !ok || !cur.Lit(`,"time":`) {
			return env, false
		}
		if env.Time, ok = cur.Digits(); !ok || !cur.Lit(`,"data":`) {
			return env, false
		}
	} else if !cur.Lit(`","data":`) {
		return env, false
	}
	// data is the last member: what follows it is the record's closing brace
	rest = cur.Rest()
	if len(rest) < 2 || rest[len(rest)-1] != '}' {
		return env, false
	}
	env.Data = rest[:len(rest)-1]
	return env, true
}

// BracketData reads the data of a bracket of type typ laid out as the harness writes it — {"turn":N} of a
// turn/start, {"turn":N,"step":M} of a step's, {"turn":N,"reason":{"kind":K}} of a turn/end — with N and
// M non-negative safe integers in canonical form, N at least 1 in a turn/end, and K a reason the upgrade
// leaves alone (completed, blocked, max-tokens, interrupted). It returns N and M (0 for a turn's).
func BracketData(data []byte, typ string) (turn, step float64, ok bool) {
	cur := event.NewCursor(data)
	if !cur.Lit(`{"turn":`) {
		return 0, 0, false
	}
	n, ok := cur.Digits()
	if !ok {
		return 0, 0, false
	}
	turn = float64(n)
	switch typ {
	case "turn/start":
		return turn, 0, string(cur.Rest()) == "}"
	case "turn/end":
		if n < 1 || !cur.Lit(`,"reason":{"kind":"`) {
			return 0, 0, false
		}
		switch string(cur.Rest()) {
		case `completed"}}`, `blocked"}}`, `max-tokens"}}`, `interrupted"}}`:
			return turn, 0, true
		}
		return 0, 0, false
	default: // step/start, step/end
		if !cur.Lit(`,"step":`) {
			return 0, 0, false
		}
		m, ok := cur.Digits()
		return turn, float64(m), ok && string(cur.Rest()) == "}"
	}
}

// safeIntToken reports whether a canonical number token is a safe integer (JS Number.isSafeInteger).
func safeIntToken(tok []byte) bool {
	digits := tok
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 16 {
		return false
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int64(c-'0')
	}
	return n <= event.MaxSafeInteger
}

// recordDepth is how deep the load path reads into a record: record, data, message, content, block — the
// deepest fields checked are a tool-result block's own members (its inner content only by kind).
const recordDepth = 5

// unreadMembers are members no load check reads the value of, only their presence: message texts, tool
// arguments, the request header's system prompt and tool schemas (often the bulk of a record), and
// sourceEventSeqs (the surface fold reads it from the bytes). They are not materialized; an event a legacy
// migration rewrites is parsed again in full before it is re-encoded.
var unreadMembers = []string{"text", "arguments", "system", "tools", "sourceEventSeqs"}

// loadRecord parses what the load path reads of an event: the record down to recordDepth for the types whose data a
// check or migration inspects, and for any event carrying data.message (its id is recorded for legacy
// replacements); only the envelope otherwise. Streamed chunks, the bulk of a log, are never parsed deeply.
func loadRecord(e event.Event) (event.Value, error) {
	switch e.Type {
	case "turn/start", "turn/end", "step/start", "step/end", "steering/message", "user/message",
		"assistant/message", "tool/result", "tool/call", "request/header":
		return e.Shallow(recordDepth, unreadMembers...)
	}
	if _, ok := event.Lookup(e.Raw, "data", "message"); ok {
		return e.Shallow(recordDepth, unreadMembers...)
	}
	return e.Envelope()
}
