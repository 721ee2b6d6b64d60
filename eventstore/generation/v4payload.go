package generation

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/dshfs/dshfs/eventstore/event"
)

// The v4 payload rules checked on each row by the codec's admission and on each event by the restore:
// retired syntax, system-message fields, tool-role results and fork results.

// v4RetiredSyntax is assertV4RetiredSyntax: the PTC predecessors, the request header's system prompt and
// the released tool-result wrapper in interpreted content slots.
func v4RetiredSyntax(row event.Value) error {
	typ := typeOf(row)
	if isCodeDispatch(typ) && !isTrue(row, "ignorable") {
		return unsupportedErr("format v4 rejects retired event type " + typ)
	}
	data, _ := row.Get("data")
	if typ == "request/header" {
		h, _ := data.Get("header")
		if !isObject(data) || !isObject(h) {
			return formatErr("format v4 request/header requires data and header objects")
		}
		if h.Has("system") {
			return formatErr("format v4 request/header rejects retired header.system")
		}
		return nil
	}
	if !isObject(data) {
		return nil
	}
	// the refusal is built only when there is one: this runs on every row of a log
	wrapper := func() error {
		t, _ := row.Get("type")
		return formatErr("format v4 " + jsString(t, true) + " at seq " + seqText(row) + " content must not contain a released tool-result wrapper")
	}
	noWrapper := func(content event.Value) error {
		if content.Kind != event.KindArray {
			return nil
		}
		for _, b := range content.Arr {
			if isObject(b) && isStr(b, "type", "tool-result") {
				return wrapper()
			}
		}
		return nil
	}
	messageContent := func(m event.Value) error {
		if !isObject(m) {
			return nil
		}
		c, _ := m.Get("content")
		return noWrapper(c)
	}
	var err error
	switch typ {
	case "user/message":
		c, _ := data.Get("content")
		err = noWrapper(c)
	case "developer/message", "assistant/message", "team/message/queued":
		m, _ := data.Get("message")
		err = messageContent(m)
	case "agent/inbox/spliced", "session/title-llm-request":
		if ms, _ := data.Get(messagesKey(typ)); ms.Kind == event.KindArray {
			for _, m := range ms.Arr {
				if err = messageContent(m); err != nil {
					break
				}
			}
		}
	case "compaction/summary":
		s, _ := data.Get("summary")
		if err = noWrapper(s); err == nil {
			r, _ := data.Get("rawOutput")
			err = noWrapper(r)
		}
	case "tool/ptc-dispatch":
		c, _ := data.Get("content")
		err = noWrapper(c)
	}
	if err != nil {
		return err
	}
	if typ == "assistant/message" || typ == "assistant/attempt" {
		return eachStreamChunk(data, func(chunk event.Value) error {
			switch {
			case isStr(chunk, "type", "block-end"):
				if b, _ := chunk.Get("block"); isObject(b) && isStr(b, "type", "tool-result") {
					return wrapper()
				}
			case isStr(chunk, "type", "block-start") && isStr(chunk, "blockType", "tool-result"):
				return wrapper()
			}
			return nil
		})
	}
	return nil
}

// v4SystemMessageFields is assertV4SystemMessageFields.
func v4SystemMessageFields(row event.Value) error {
	if typeOf(row) != "system/message" {
		return nil
	}
	obj := func(v event.Value, subject string) error {
		if !isObject(v) {
			return formatErr("format v4 " + subject + " requires an object")
		}
		return nil
	}
	str := func(v event.Value, ok bool, subject string, nonempty bool) error {
		if !ok || v.Kind != event.KindString || (nonempty && v.Str == "") {
			msg := "format v4 " + subject + " requires a string"
			if nonempty {
				msg += " with content"
			}
			return formatErr(msg)
		}
		return nil
	}
	positive := func(v event.Value, subject string) error {
		n, err := count(v, subject)
		if err != nil {
			return err
		}
		if n == 0 {
			return formatErr("format v4 " + subject + " must be positive")
		}
		return nil
	}
	data, _ := row.Get("data")
	if err := obj(data, "system/message data"); err != nil {
		return err
	}
	turn, _ := data.Get("turn")
	if err := positive(turn, "system/message turn"); err != nil {
		return err
	}
	step, _ := data.Get("step")
	if err := positive(step, "system/message step"); err != nil {
		return err
	}
	msg, _ := data.Get("message")
	if err := obj(msg, "system message"); err != nil {
		return err
	}
	id, idOK := msg.Get("id")
	if err := str(id, idOK, "system message id", true); err != nil {
		return err
	}
	if !isStr(msg, "role", "system") {
		return formatErr("format v4 system message requires system role")
	}
	content, _ := msg.Get("content")
	if content.Kind != event.KindArray {
		return formatErr("format v4 system message requires content array")
	}
	for _, b := range content.Arr {
		if err := obj(b, "system content block"); err != nil {
			return err
		}
		t, tOK := b.Get("type")
		if err := str(t, tOK, "system content type", true); err != nil {
			return err
		}
		field := func(key, subject string, nonempty bool) error {
			x, ok := b.Get(key)
			return str(x, ok, subject, nonempty)
		}
		var err error
		switch t.Str {
		case "text", "reasoning":
			err = field("text", "system content text", false)
		case "tool-call":
			if err = field("id", "system tool-call id", true); err == nil {
				if err = field("name", "system tool-call name", true); err == nil {
					err = field("arguments", "system tool-call arguments", false)
				}
			}
		case "image":
			a, _ := b.Get("attachment")
			err = v4SystemImage(a, obj, str, positive)
		case "tool-result":
			err = formatErr("format v4 system content rejects retired tool-result wrappers")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func v4SystemImage(a event.Value, obj func(event.Value, string) error, str func(event.Value, bool, string, bool) error,
	positive func(event.Value, string) error) error {
	if err := obj(a, "system image attachment"); err != nil {
		return err
	}
	id, idOK := a.Get("attachmentId")
	if err := str(id, idOK, "system image attachmentId", true); err != nil {
		return err
	}
	switch mt, _ := a.Get("mediaType"); {
	case mt.Kind == event.KindString && (mt.Str == "image/png" || mt.Str == "image/jpeg" || mt.Str == "image/webp" || mt.Str == "image/gif"):
	default:
		return formatErr("format v4 system image requires a supported mediaType")
	}
	bytesV, _ := a.Get("bytes")
	if _, err := count(bytesV, "system image bytes"); err != nil {
		return err
	}
	w, _ := a.Get("width")
	if err := positive(w, "system image width"); err != nil {
		return err
	}
	h, _ := a.Get("height")
	if err := positive(h, "system image height"); err != nil {
		return err
	}
	if name, ok := a.Get("name"); ok {
		if err := str(name, ok, "system image name", false); err != nil {
			return err
		}
	}
	if od, ok := a.Get("originalDimensions"); ok {
		if err := obj(od, "system image originalDimensions"); err != nil {
			return err
		}
		ow, _ := od.Get("width")
		if err := positive(ow, "system image original width"); err != nil {
			return err
		}
		oh, _ := od.Get("height")
		if err := positive(oh, "system image original height"); err != nil {
			return err
		}
	}
	return nil
}

// v4ToolResultMessage is assertV4ToolResultMessage: a v4 result is a first-class tool-role message.
func v4ToolResultMessage(ev event.Value) error {
	if typeOf(ev) != "tool/result" {
		return nil
	}
	subject := func() string { return "format v4 tool/result at seq " + seqText(ev) } // for a refusal only
	data, _ := ev.Get("data")
	if !isObject(data) {
		return formatErr(subject() + " data must be an object")
	}
	msg, _ := data.Get("message")
	if !isObject(msg) {
		return formatErr(subject() + " message must be an object")
	}
	id, _ := msg.Get("id")
	if id.Kind != event.KindString || id.Str == "" {
		return formatErr(subject() + " requires a first-class message with a string id")
	}
	if !isStr(msg, "role", "tool") {
		return formatErr(subject() + " requires a tool-role message")
	}
	src, _ := msg.Get("source")
	tcid, _ := msg.Get("toolCallId")
	var srcCall event.Value
	srcCallOK := false
	if isObject(src) {
		srcCall, srcCallOK = src.Get("callId")
	}
	if tcid.Kind != event.KindString || tcid.Str == "" || !strictEqual(srcCall, srcCallOK, tcid, true) {
		return formatErr(subject() + " requires toolCallId matching its tool source")
	}
	if !isObject(src) || !isStr(src, "kind", "tool") {
		return formatErr(subject() + " requires a tool source")
	}
	content, _ := msg.Get("content")
	if content.Kind != event.KindArray {
		return formatErr(subject() + " requires array content")
	}
	for _, b := range content.Arr {
		if isObject(b) && isStr(b, "type", "tool-result") {
			return formatErr(subject() + " content must not contain a released tool-result wrapper")
		}
	}
	isErr, hasIsErr := msg.Get("isError")
	if hasIsErr && isErr.Kind != event.KindBool {
		return formatErr(subject() + " isError must be boolean when present")
	}
	if data.Has("error") && !isTrue(msg, "isError") {
		return formatErr(subject() + " carries error metadata for a non-error tool result")
	}
	return nil
}

var canonicalSeq = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)

// seqSuffix parses the decimal seq an id ends with, as the harness does: canonical digits of a safe integer.
func seqSuffix(s string) (int64, bool) {
	if !canonicalSeq.MatchString(s) {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > event.MaxSafeInteger {
		return 0, false
	}
	return n, true
}

// v4ForkResult is assertV4ForkResult: a fork's not-started result keeps its exact identity.
func v4ForkResult(row event.Value) error {
	if typeOf(row) != "tool/result" {
		return nil
	}
	data, _ := row.Get("data")
	if !isObject(data) {
		return nil
	}
	errv, _ := data.Get("error")
	msg, _ := data.Get("message")
	id, _ := msg.Get("id")
	if !isObject(errv) || !isStr(errv, "code", "TOOL_NOT_STARTED") || !isObject(msg) || id.Kind != event.KindString ||
		!strings.HasPrefix(id.Str, ForkedResultPrefix) {
		return nil
	}
	bad := formatErr("invalid V4 not-started fork result")
	src, _ := msg.Get("source")
	var callID event.Value
	callOK := false
	if isObject(src) {
		callID, callOK = src.Get("callId")
	}
	if !callOK || callID.Kind != event.KindString {
		return bad
	}
	prefix := ForkedResultPrefix + callID.Str + "-"
	if !strings.HasPrefix(id.Str, prefix) {
		return bad
	}
	seq, ok := seqSuffix(id.Str[len(prefix):])
	if !ok {
		return bad
	}
	op, opOK := row.Get("surfaceOp")
	replacement := isObject(op) && isStr(op, "op", "replace")
	rowSeq, _ := row.Get("seq")
	srcs, srcsOK := row.Get("sourceEventSeqs")
	if replacement {
		if rowSeq.Kind != event.KindNumber || float64(seq) >= rowSeq.Num {
			return bad
		}
		if srcs.Kind != event.KindArray || len(srcs.Arr) != 1 || srcs.Arr[0].Kind != event.KindNumber || srcs.Arr[0].Num != float64(seq) {
			return bad
		}
	} else {
		if rowSeq.Kind != event.KindNumber || float64(seq) != rowSeq.Num || srcsOK || !opOK || op.Kind != event.KindString || op.Str != "append" {
			return bad
		}
	}
	content, _ := msg.Get("content")
	if !isStr(errv, "name", "ToolNotStartedError") || !isStr(msg, "role", "tool") || !isTrue(msg, "isError") ||
		!isStr(msg, "toolCallId", callID.Str) || !isStr(src, "kind", "tool") ||
		content.Kind != event.KindArray || len(content.Arr) != 1 || !isObject(content.Arr[0]) ||
		!isStr(content.Arr[0], "type", "text") || !isString(content.Arr[0], "text") {
		return bad
	}
	return nil
}
