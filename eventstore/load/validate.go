package load

import (
	"errors"
	"strconv"

	"github.com/dshfs/dshfs/eventstore/event"
)

// This file holds the harness's per-event load checks (session/src/index.ts): the fixed event envelope,
// the request/header and message shape checks, and the small JavaScript-semantics helpers they share
// with legacy.go and repair.go. Every check reads a parsed record (event.Value) so that absent members
// (JS undefined) stay distinguishable from JSON null.

// TypeError is a JavaScript TypeError the harness would raise itself while walking malformed stored data
// (a property read on null or undefined). It is kept apart from plain errors because the harness renders
// String(error) as "TypeError: <message>" rather than "Error: <message>" inside corruption diagnostics.
type TypeError struct{ Message string }

func (e *TypeError) Error() string { return e.Message }

// JSErrorName returns the JavaScript constructor name, for renderers of String(error).
func (e *TypeError) JSErrorName() string { return "TypeError" }

// propertyReadError is V8's text for reading key off null or undefined (present=false).
func propertyReadError(base event.Value, present bool, key string) error {
	what := "undefined"
	if present {
		what = "null"
	}
	return &TypeError{Message: "Cannot read properties of " + what + " (reading '" + key + "')"}
}

// jsGet is a JavaScript property read `base[key]` on a value that may be absent (undefined). It returns
// the member and whether it is defined, or a TypeError when base is null or undefined. Reads on other
// primitives and arrays yield undefined: none of the keys the harness reads exists on them.
func jsGet(base event.Value, present bool, key string) (event.Value, bool, error) {
	if !present || base.Kind == event.KindNull {
		return event.Value{}, false, propertyReadError(base, present, key)
	}
	v, ok := base.Get(key)
	return v, ok, nil
}

// jsPath is jsGet along a chain of keys, as JavaScript reads base.k1.k2…: the first key read of a missing
// or null value is the TypeError, with jsGet's message.
func jsPath(base event.Value, present bool, keys ...string) (event.Value, bool, error) {
	for _, key := range keys {
		var err error
		if base, present, err = jsGet(base, present, key); err != nil {
			return event.Value{}, false, err
		}
	}
	return base, present, nil
}

// JSString is JavaScript String(value) for a JSON value or undefined (present=false), as template
// literals interpolate it.
func JSString(v event.Value, present bool) string {
	if !present {
		return "undefined"
	}
	return event.JSString(v)
}

// isRecord is the coordinator's asRecord test: a non-null, non-array object.
func isRecord(v event.Value, present bool) bool { return present && v.Kind == event.KindObject }

// isJSObject is `typeof v === 'object' && v !== null`, which arrays also pass.
func isJSObject(v event.Value, present bool) bool {
	return present && (v.Kind == event.KindObject || v.Kind == event.KindArray)
}

// isSafeInt is Number.isSafeInteger.
func isSafeInt(v event.Value, present bool) bool {
	return present && v.Kind == event.KindNumber && event.IsSafeInteger(v.Num)
}

// isStr is `typeof v === 'string'`.
func isStr(v event.Value, present bool) bool { return present && v.Kind == event.KindString }

// isNonEmptyStr is `typeof v === 'string' && v.length > 0`, the harness's non-empty string test.
func isNonEmptyStr(v event.Value, present bool) bool { return isStr(v, present) && v.Str != "" }

// strEq is strict equality of a value with a string literal.
func strEq(v event.Value, present bool, s string) bool { return isStr(v, present) && v.Str == s }

// isTrue is strict equality with the literal true.
func isTrue(v event.Value, present bool) bool { return present && v.Kind == event.KindBool && v.Bool }

// hasOnlyKeys is the coordinator's hasOnlyKeys: every key of rec is required or optional, and every
// required key is present.
func hasOnlyKeys(rec event.Value, required []string, optional ...string) bool {
	for _, m := range rec.Obj {
		if !contains(required, m.Key) && !contains(optional, m.Key) {
			return false
		}
	}
	for _, k := range required {
		if !rec.Has(k) {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// envelopeKeys are the only top-level members a stored event may carry.
var envelopeKeys = []string{"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable"}

// CheckEnvelope is the restore-mode Session constructor's assertSessionEventEnvelope for the event at
// seed index index, including the request/header and message shape checks it runs for LLM-bearing types.
func CheckEnvelope(rec event.Value, index int) error {
	// The messages are made only for a failure: made for every event they were a large load's most
	// frequent allocation.
	at := func() string { return "seed event at index " + strconv.Itoa(index) }
	typ, typOK := rec.Get("type")
	if strEq(typ, typOK, "request/header-delta") {
		return errors.New(at() + " uses unsupported legacy request/header-delta format")
	}
	invalid := func() error { return errors.New(at() + " has an invalid event envelope") }
	if rec.Kind != event.KindObject {
		return invalid()
	}
	for _, m := range rec.Obj {
		if !contains(envelopeKeys, m.Key) {
			return invalid()
		}
	}
	seq, seqOK := rec.Get("seq")
	tm, tmOK := rec.Get("time")
	_, dataOK := rec.Get("data")
	ign, ignOK := rec.Get("ignorable")
	if !isStr(typ, typOK) ||
		!isSafeInt(seq, seqOK) || seq.Num < 0 ||
		!isSafeInt(tm, tmOK) ||
		!dataOK ||
		(ignOK && !isTrue(ign, ignOK)) {
		return invalid()
	}
	switch typ.Str {
	case "request/header", "user/message", "assistant/message", "tool/result":
		return checkCurrentLLMShape(rec, typ.Str, index)
	}
	return nil
}

// checkCurrentLLMShape is assertCurrentLlmShape: a request/header must name its provider and model and
// carry valid adapter-default markers; message events must have the current identified shape.
func checkCurrentLLMShape(rec event.Value, typ string, index int) error {
	if typ == "request/header" {
		at := "seed request/header at index " + strconv.Itoa(index)
		data, dataOK := rec.Get("data")
		var header event.Value
		headerOK := false
		if isJSObject(data, dataOK) {
			header, headerOK = data.Get("header")
		}
		var config event.Value
		configOK := false
		if isRecord(header, headerOK) {
			config, configOK = header.Get("config")
		}
		if !hasProviderModel(config, configOK) {
			return errors.New(at + " lacks provider/model")
		}
		if re, ok := config.Get("reasoningEffort"); ok && !isNonEmptyStr(re, ok) {
			return errors.New(at + " has an invalid reasoningEffort")
		}
		if defaults, ok := header.Get("adapterDefaults"); ok && !validAdapterDefaults(defaults, config) {
			return errors.New(at + " has invalid adapterDefaults")
		}
		return nil
	}
	return CheckMessageEventShape(rec, func() string { return "seed " + typ + " at index " + strconv.Itoa(index) })
}

// validAdapterDefaults is assertAdapterDefaults for a present value: an object of `true` markers for
// reasoningEffort/maxTokens, each naming a field the config actually carries.
func validAdapterDefaults(defaults, config event.Value) bool {
	if defaults.Kind != event.KindObject {
		return false
	}
	for _, m := range defaults.Obj {
		if m.Key != "reasoningEffort" && m.Key != "maxTokens" {
			return false
		}
		if !isTrue(m.Value, true) {
			return false
		}
		if !config.Has(m.Key) {
			return false
		}
	}
	return true
}

// hasProviderModel is the harness's hasProviderModel: non-empty string provider and model members.
func hasProviderModel(v event.Value, present bool) bool {
	if !isJSObject(v, present) {
		return false
	}
	p, pOK := v.Get("provider")
	m, mOK := v.Get("model")
	return isNonEmptyStr(p, pOK) && isNonEmptyStr(m, mOK)
}

// CheckMessageEventShape is assertMessageEventShape: the replay invariants of user/message,
// assistant/message and tool/result events; other types pass. subject names the event at the start of
// every message; it is called only for a failure (a load checks every event, and naming each one was half a
// million strings for a large session).
func CheckMessageEventShape(rec event.Value, subject func() string) error {
	typ, typOK := rec.Get("type")
	if !isStr(typ, typOK) {
		return nil
	}
	t := typ.Str
	if t != "user/message" && t != "assistant/message" && t != "tool/result" {
		return nil
	}
	data, dataOK := rec.Get("data")
	var msg event.Value
	msgOK := false
	if t == "user/message" {
		msg, msgOK = data, dataOK && isJSObject(data, dataOK)
	} else if isJSObject(data, dataOK) {
		msg, msgOK = data.Get("message")
	}
	id, idOK := msg.Get("id")
	if !isJSObject(msg, msgOK) || !isNonEmptyStr(id, idOK) {
		return errors.New(subject() + " lacks an identified message")
	}
	role := "user"
	if t == "assistant/message" {
		role = "assistant"
	}
	if r, ok := msg.Get("role"); !strEq(r, ok, role) {
		return errors.New(subject() + ` message must have role "` + role + `"`)
	}
	source, sourceOK := msg.Get("source")
	kind, kindOK := source.Get("kind")
	if !isJSObject(source, sourceOK) || !isNonEmptyStr(kind, kindOK) {
		return errors.New(subject() + " message has invalid source")
	}
	content, contentOK := msg.Get("content")
	if !contentOK || content.Kind != event.KindArray {
		return errors.New(subject() + " message has invalid content")
	}
	if t == "assistant/message" {
		if kind.Str != "model" || !hasProviderModel(source, true) {
			return errors.New(subject() + " message must have model source")
		}
		return nil
	}
	if t != "tool/result" {
		return nil
	}
	callID, callOK := source.Get("callId")
	if kind.Str != "tool" || !isNonEmptyStr(callID, callOK) {
		return errors.New(subject() + " message must have tool source")
	}
	if len(content.Arr) != 1 {
		return errors.New(subject() + " message must contain one tool-result block")
	}
	block := content.Arr[0]
	bt, btOK := block.Get("type")
	bc, bcOK := block.Get("content")
	if !isJSObject(block, true) || !strEq(bt, btOK, "tool-result") || !bcOK || bc.Kind != event.KindArray {
		return errors.New(subject() + " message must contain one tool-result block")
	}
	if tc, ok := block.Get("toolCallId"); !strEq(tc, ok, callID.Str) {
		return errors.New(subject() + " message has mismatched tool call ids")
	}
	return nil
}

// CheckSupportedRequestHeader is assertSupportedRequestHeader at the seed boundary; location names the
// event in a failure's message, made only then (CheckMessageEventShape says why).
func CheckSupportedRequestHeader(rec event.Value, location func() string) error {
	typ, typOK := rec.Get("type")
	if strEq(typ, typOK, "request/header-delta") {
		return errors.New(location() + " uses unsupported legacy request/header-delta format")
	}
	if strEq(typ, typOK, "request/header") {
		data, dataOK := rec.Get("data")
		if reason, ok := data.Get("reason"); isRecord(data, dataOK) && strEq(reason, ok, "fallback") {
			return errors.New(location() + ` uses unsupported legacy request/header reason "fallback"`)
		}
	}
	return nil
}
