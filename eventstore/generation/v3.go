package generation

import (
	"github.com/dshfs/dshfs/eventstore/event"
)

// isV3Surface reports whether t is a v3 surface event type: v2's three plus the system message.
func isV3Surface(t string) bool {
	return t == "system/message" || t == "user/message" || t == "assistant/message" || t == "tool/result"
}

func isCodeDispatch(t string) bool {
	return t == "tool/code-dispatch-start" || t == "tool/code-dispatch"
}

// isV3Classified reports whether v3 interprets the envelope of type t: the released v2 inventory without
// the retired PTC predecessors, the surface types, the PTC dispatch pair and the feedback pair. Anything
// else is opaque (and may carry surface metadata the codec does not interpret).
func isV3Classified(t string) bool {
	if isCodeDispatch(t) {
		return false
	}
	if isV3Surface(t) || isReleasedV2Type(t) {
		return true
	}
	switch t {
	case "tool/ptc-dispatch-start", "tool/ptc-dispatch", "feedback/message-put", "feedback/message-delete":
		return true
	}
	return false
}

// structuralRow is v3's admission of identified structural payloads, applied to each raw row before any
// recovery could discard it: a request header still carrying the retired system prompt, and a system
// message whose payload is not one.
func structuralRow(v event.Value) error {
	if !isObject(v) {
		return nil
	}
	t, _ := v.Get("type")
	if t.Kind != event.KindString {
		return nil
	}
	switch t.Str {
	case "request/header":
		data, _ := v.Get("data")
		if _, err := record(data, "request/header data"); err != nil {
			return err
		}
		h, _ := data.Get("header")
		if _, err := record(h, "request header"); err != nil {
			return err
		}
		if h.Has("system") {
			return unsupportedErr("format v3 request/header rejects retired header.system")
		}
	case "system/message":
		data, _ := v.Get("data")
		if _, err := record(data, "system/message data"); err != nil {
			return err
		}
		return systemPayload(data)
	}
	return nil
}

// systemPayload checks a system message's data as the codec does, ending with the released user-message
// payload rules over its message.
func systemPayload(data event.Value) error {
	if err := exactKeys(data, []string{"turn", "step", "message"}, nil, "system/message data", "lacks required field"); err != nil {
		return err
	}
	for _, k := range []string{"turn", "step"} {
		x, _ := data.Get(k)
		n, err := count(x, k)
		if err != nil {
			return err
		}
		if n == 0 {
			return formatErr(k + " must be positive")
		}
	}
	msg, _ := data.Get("message")
	if _, err := record(msg, "system message"); err != nil {
		return err
	}
	if err := exactKeys(msg, []string{"id", "role", "source", "content"}, nil, "system message", "lacks required field"); err != nil {
		return err
	}
	id, _ := msg.Get("id")
	role, _ := msg.Get("role")
	if id.Kind != event.KindString || id.Str == "" || role.Kind != event.KindString || role.Str != "system" {
		return formatErr("system message requires an id and system role")
	}
	src, _ := msg.Get("source")
	if _, err := record(src, "system source"); err != nil {
		return err
	}
	kind, _ := src.Get("kind")
	plugin, _ := src.Get("plugin")
	if kind.Kind != event.KindString || kind.Str != "plugin" || plugin.Kind != event.KindString || plugin.Str == "" {
		return formatErr("system message requires plugin source")
	}
	return systemMessageSemantics(msg)
}

// eventAdmission refuses the v2 PTC tags in a v3 artifact unless they are marked ignorable: a required
// predecessor tag must not acquire current meaning.
func eventAdmission(v event.Value) error {
	if !isObject(v) {
		return nil
	}
	t, _ := v.Get("type")
	if t.Kind != event.KindString || !isCodeDispatch(t.Str) || isTrue(v, "ignorable") {
		return nil
	}
	seq, ok := v.Get("seq")
	return unsupportedErr("format v3 contains unknown event type " + quote(t.Str) + " at seq " + jsString(seq, ok))
}

// v3Event is the codec's canonical envelope validation of one decoded v3 event.
func v3Event(v event.Value) error {
	t, _ := v.Get("type")
	typ := t.Str
	seqv, _ := v.Get("seq")
	subject := "format v3 " + typ + " at seq " + event.JSString(seqv)
	surface := isV3Surface(typ)
	optional := logOptional
	if surface || !isV3Classified(typ) {
		optional = []string{"ignorable", "surfaceOp", "sourceEventSeqs"}
	}
	if err := exactKeys(v, eventRequired, optional, subject, "lacks required field"); err != nil {
		return err
	}
	seq, err := count(seqv, subject+" seq")
	if err != nil {
		return err
	}
	tm, _ := v.Get("time")
	if err := safeInteger(tm, subject+" time"); err != nil {
		return err
	}
	if ig, ok := v.Get("ignorable"); ok && (ig.Kind != event.KindBool || !ig.Bool) {
		return formatErr(subject + " ignorable must be true when present")
	}
	if surface {
		op, ok := v.Get("surfaceOp")
		if !ok {
			return formatErr(subject + " requires a surfaceOp marker")
		}
		if op.Kind != event.KindString || op.Str != "append" {
			if _, err := record(op, subject+" surfaceOp"); err != nil {
				return err
			}
			kind, _ := op.Get("op")
			if len(op.Obj) != 3 || kind.Kind != event.KindString || kind.Str != "replace" || !op.Has("startSeq") || !op.Has("endSeq") {
				return formatErr(subject + " requires exact replace fields op/startSeq/endSeq")
			}
			for _, k := range []string{"startSeq", "endSeq"} {
				x, _ := op.Get(k)
				n, err := count(x, subject+" surfaceOp "+k)
				if err != nil {
					return err
				}
				if n >= seq {
					return formatErr(subject + " replacement endpoints must reference earlier events")
				}
			}
		}
		src, ok := v.Get("sourceEventSeqs")
		if typ == "assistant/message" && ok {
			return formatErr(subject + " embeds its stream and cannot carry sourceEventSeqs")
		}
		if ok {
			if src.Kind != event.KindArray || len(src.Arr) == 0 {
				return formatErr(subject + " sourceEventSeqs must be a non-empty array")
			}
			seen := make(map[int64]struct{}, len(src.Arr))
			for _, x := range src.Arr {
				n, err := count(x, subject+" sourceEventSeqs member")
				if err != nil {
					return err
				}
				if _, dup := seen[n]; n >= seq || dup {
					return formatErr(subject + " sourceEventSeqs must be unique earlier seqs")
				}
				seen[n] = struct{}{}
			}
		}
	}
	if err := structuralRow(v); err != nil {
		return err
	}
	return canonicalPayload(v, typ, subject)
}

// canonicalPayload refuses the non-canonical spellings v3 forbids: empty optional request-header fields,
// and error metadata on a tool result that is not a single error block.
func canonicalPayload(v event.Value, typ, subject string) error {
	switch typ {
	case "request/header":
		data, _ := v.Get("data")
		if _, err := record(data, subject+" data"); err != nil {
			return err
		}
		h, _ := data.Get("header")
		if _, err := record(h, subject+" header"); err != nil {
			return err
		}
		tools, tok := h.Get("tools")
		defaults, dok := h.Get("adapterDefaults")
		if (tok && tools.Kind == event.KindArray && len(tools.Arr) == 0) || (dok && isObject(defaults) && len(defaults.Obj) == 0) {
			return formatErr(subject + " empty optional header fields must be omitted")
		}
	case "tool/result":
		data, _ := v.Get("data")
		if _, err := record(data, subject+" data"); err != nil {
			return err
		}
		if !data.Has("error") {
			return nil
		}
		msg, _ := data.Get("message")
		if _, err := record(msg, subject+" message"); err != nil {
			return err
		}
		content, _ := msg.Get("content")
		if content.Kind != event.KindArray || len(content.Arr) != 1 || !isObject(content.Arr[0]) ||
			!isString(content.Arr[0], "type") || !isTrue(content.Arr[0], "isError") {
			return formatErr(subject + " carries error metadata for a non-error tool result")
		}
		if t, _ := content.Arr[0].Get("type"); t.Str != "tool-result" {
			return formatErr(subject + " carries error metadata for a non-error tool result")
		}
	}
	return nil
}

// v3Event is the released v3 restore's own check of one event: the open-step ownership of system
// messages and the protected system head, which only a system message covering exactly that head may
// replace and which no other replacement or compaction may shadow.
func (r *restorer) v3Event(v event.Value, typ string, seq int64) error {
	switch typ {
	case "step/start":
		data, _ := v.Get("data")
		if _, err := record(data, typ); err != nil {
			return err
		}
		r.stepTurn, r.stepTurnOK = data.Get("turn")
		r.stepStep, r.stepStepOK = data.Get("step")
		r.inStep = true
	case "step/end", "turn/end":
		r.inStep = false
	}
	op, _ := v.Get("surfaceOp")
	isAppend := op.Kind == event.KindString && op.Str == "append"
	if typ == "system/message" {
		data, _ := v.Get("data")
		if _, err := record(data, "system/message"); err != nil {
			return err
		}
		dt, dtok := data.Get("turn")
		ds, dsok := data.Get("step")
		if !r.inStep || !strictEqual(r.stepTurn, r.stepTurnOK, dt, dtok) || !strictEqual(r.stepStep, r.stepStepOK, ds, dsok) {
			return formatErr("system/message does not match an open step")
		}
		if r.hasSurface && r.head < 0 {
			return formatErr("system/message requires a protected first surface head")
		}
		if isAppend {
			if !r.hasSurface {
				r.head = seq
			}
		} else {
			start, end := replaceEnds(op)
			if r.head >= 0 && (start == r.head || end == r.head) {
				if start != r.head || end != r.head {
					return formatErr("system/message must replace exactly the current system head")
				}
				r.head = seq
			}
		}
	} else if isV3Surface(typ) && !isAppend {
		start, end := replaceEnds(op)
		if r.head >= 0 && (start == r.head || end == r.head) {
			return formatErr("surface replacement cannot shadow the protected system head")
		}
	}
	if typ == "compaction/prune" || typ == "compaction/summary" {
		data, _ := v.Get("data")
		if _, err := record(data, typ); err != nil {
			return err
		}
		if seqs, ok := data.Get("shadowedSeqs"); ok && seqs.Kind == event.KindArray && r.head >= 0 {
			for _, s := range seqs.Arr {
				if s.Kind == event.KindNumber && s.Num == float64(r.head) {
					return formatErr("compaction cannot shadow the protected system head")
				}
			}
		}
	}
	if isV3Surface(typ) {
		r.hasSurface = true
	}
	// what building the relationship view requires of a repair result (see relationView)
	if typ == "tool/result" {
		data, _ := v.Get("data")
		errv, ok := data.Get("error")
		if !ok {
			return nil
		}
		if _, err := record(errv, "tool error"); err != nil {
			return err
		}
		if code, _ := errv.Get("code"); code.Kind != event.KindString || code.Str != "TOOL_NOT_STARTED" {
			return nil
		}
		msg, _ := data.Get("message")
		if _, err := record(msg, "tool message"); err != nil {
			return err
		}
		src, _ := msg.Get("source")
		if _, err := record(src, "tool source"); err != nil {
			return err
		}
	}
	return nil
}

// replaceEnds returns a canonical replacement's endpoints; the codec has proved them counts.
func replaceEnds(op event.Value) (start, end int64) {
	s, _ := op.Get("startSeq")
	e, _ := op.Get("endSeq")
	return int64(s.Num), int64(e.Num)
}

// relationshipType is the type under which v3 hands an event to the frozen v2 validation.
func relationshipType(t string) string {
	switch t {
	case "tool/ptc-dispatch-start":
		return "tool/code-dispatch-start"
	case "tool/ptc-dispatch":
		return "tool/code-dispatch"
	case "tool/code-dispatch-start", "tool/code-dispatch":
		return "v3/opaque-released-event"
	case "system/message":
		return "user/message"
	}
	return t
}

// isV3Known is the v3 event vocabulary the published decode tool installs: the frozen v2 inventory plus
// the additions and renames the v2-to-v3 package lists.
func isV3Known(t string) bool {
	if isReleasedV2Type(t) {
		return true
	}
	switch t {
	case "feedback/message-put", "feedback/message-delete", "system/message", "tool/ptc-dispatch-start", "tool/ptc-dispatch":
		return true
	}
	return false
}
