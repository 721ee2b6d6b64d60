package generation

import (
	"bytes"

	"github.com/dshfs/dshfs/eventstore/event"
)

// Format v4 is written from dsh-v0.2.0-rc.2 on (docs/formats.md#v4). It keeps v2's physical rows and v3's
// surface envelope with `version: 4` in the header; what changed is the payload vocabulary. This file holds
// the vocabulary and the row admission the v4 codec applies before v2's row decoding (developer data,
// message sources); v4payload.go the payload rules the admission and the restore share, v4restore.go the
// restore's walk, v4lifecycle.go its lifecycle relationships, v4write.go what a writer needs.

// ReleasedV4Types is the v4 reader's event vocabulary: the frozen released-v3 list of the v3-to-v4 package
// (RELEASED_V3_EVENT_TYPES) plus developer/message. A later 0.2.x may add ignorable types without a
// version bump; those stay opaque.
var ReleasedV4Types = []string{
	"agent-preset/selected", "agent/inbox/spliced", "approval/asked", "approval/decided", "approval/policy",
	"assistant/attempt", "assistant/message", "command/done", "command/run", "compaction/end",
	"compaction/prune", "compaction/start", "compaction/summary", "deliverables/presented", "developer/message",
	"feedback/message-delete", "feedback/message-put", "feedback/record", "goal/change", "hook/invoked",
	"hook/result", "image/offload", "llm/retry", "llm/retry-started", "model/selection", "permission/preset",
	"plan/mode", "request/context", "request/header", "sandbox/mode", "schedule/change",
	"session-log-deepseek/delivery-accepted", "session/end-seed", "session/title", "session/title-llm-request",
	"step/end", "step/start", "subagent/catalog", "subagent/descriptor", "subagent/model-selection-policy",
	"system/message", "team/member", "team/message/delivered", "team/message/queued", "team/task",
	"todo/write", "tool-workflow/agent-end", "tool-workflow/agent-start", "tool-workflow/run-end",
	"tool-workflow/run-start", "tool/call", "tool/ptc-dispatch", "tool/ptc-dispatch-start", "tool/result",
	"turn/end", "turn/start", "user/message", "web/deepseek-search-llm-request", "workspace/changes",
}

var releasedV4 = func() map[string]bool {
	m := make(map[string]bool, len(ReleasedV4Types))
	for _, t := range ReleasedV4Types {
		m[t] = true
	}
	return m
}()

// IsV4Type reports whether the v4 reader interprets events of type t.
func IsV4Type(t string) bool { return releasedV4[t] }

// IsV4Surface reports whether t is a v4 surface event type: v3's four and developer/message.
func IsV4Surface(t string) bool { return isV3Surface(t) || t == "developer/message" }

// The texts and id prefixes of the harness's repairs (repair.ts), shared by the checks, the v0 and v4
// repair planners and the writers.
const (
	// NotStartedText is the one text block of an interrupted repair's result for a call never started.
	NotStartedText = "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."
	// OutcomeUnknownText is the one text block of an interrupted repair's result for a call that started:
	// the model reads it on resume.
	OutcomeUnknownText = "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly."
	// InterruptedResultPrefix starts an interrupted repair's message id: the prefix, the call id, "-", a seq.
	InterruptedResultPrefix = "interrupted-tool-result-"
	// ForkedResultPrefix starts a fork's not-started result id: the prefix, the call id, "-", a seq.
	ForkedResultPrefix = "forked-tool-result-"
)

// v4Decoder is the v4 codec's row decoding: v4's admission of every physical row before the released v2
// decoder may set it aside, so that retired or foreign syntax refuses the artifact in both recovery modes.
type v4Decoder struct {
	v2 v2Decoder
}

func (d *v4Decoder) decodeRow(v event.Value, row event.Event, line int, emit func(accepted) error) error {
	if err := v4RowAdmission(v); err != nil {
		return atLine(err, line)
	}
	return d.v2.decodeRow(v, row, line, emit)
}

// v4Value is event e as the v4 checks read it. The embedded assistant stream is most of a log's bytes and
// is read by two rules only, both about tool-change and tool-result blocks: it is parsed only when the row
// could name one (a `\u` escape could spell either, so it counts too).
//
// No rule reads the words of a message either — only that a text is a string — except the exact text of a
// TOOL_NOT_STARTED repair: so "text" members are not materialized (their Kind is kept) but in a tool result.
func v4Value(e event.Event) (event.Value, error) {
	switch {
	case e.Type == "tool/result":
		return e.Record()
	case (e.Type == "assistant/message" || e.Type == "assistant/attempt") && !streamMayMatter(e.Raw):
		return e.Shallow(0, "stream", "text")
	}
	return e.Shallow(0, "text")
}

// streamMayMatter reports whether raw holds "tool-r", "tool-a" or `\u` anywhere. The search is anchored
// on the rare bytes '-' and '\': a stream is full of 't's (every "type", "time" and "text"), so a search
// for "tool-" by its first byte stopped at nearly every member name.
func streamMayMatter(raw []byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(raw[i:], '-')
		if j < 0 {
			break
		}
		i += j
		if i >= 4 && i+1 < len(raw) && string(raw[i-4:i]) == "tool" && (raw[i+1] == 'r' || raw[i+1] == 'a') {
			return true
		}
		i++
	}
	for i := 0; ; {
		j := bytes.IndexByte(raw[i:], '\\')
		if j < 0 {
			return false
		}
		i += j + 1
		if i < len(raw) && raw[i] == 'u' {
			return true
		}
	}
}

// v4RowAdmission is the codec's assertV4RowAdmission over one parsed physical row.
func v4RowAdmission(row event.Value) error {
	if !isObject(row) {
		return nil
	}
	typ, _ := row.Get("type")
	// the decoder has no vocabulary: an ignorable developer message waits for the restore
	if typ.Kind == event.KindString && typ.Str == "developer/message" && isTrue(row, "ignorable") {
		return nil
	}
	if err := v4DeveloperData(row); err != nil {
		return err
	}
	if err := v4SourceRowAdmission(row); err != nil {
		return err
	}
	if err := v4RetiredSyntax(row); err != nil {
		return err
	}
	if err := v4SystemMessageFields(row); err != nil {
		return err
	}
	if typ.Kind != event.KindString || typ.Str != "tool/result" {
		return nil
	}
	if err := v4ToolResultMessage(row); err != nil {
		return err
	}
	return v4ForkResult(row)
}

func typeOf(v event.Value) string {
	t, _ := v.Get("type")
	if t.Kind != event.KindString {
		return ""
	}
	return t.Str
}

// seqText is `${row.seq}` of a row.
func seqText(v event.Value) string {
	s, ok := v.Get("seq")
	return jsString(s, ok)
}

func isToolChange(t string) bool { return t == "tool-addition" || t == "tool-removal" }

// v4ToolChange is assertToolChange: tool-addition and tool-removal blocks belong to developer messages.
func v4ToolChange(block event.Value, developer bool) error {
	if !isObject(block) {
		return nil
	}
	t, _ := block.Get("type")
	if t.Kind != event.KindString || !isToolChange(t.Str) {
		return nil
	}
	if !developer {
		return formatErr("format v4 " + t.Str + " requires developer role")
	}
	if name, _ := block.Get("toolName"); name.Kind != event.KindString || name.Str == "" {
		return formatErr("format v4 " + t.Str + " requires a nonempty toolName")
	}
	if t.Str == "tool-addition" && block.Has("tool") {
		return formatErr("format v4 tool-addition must omit inline tool definitions")
	}
	return nil
}

func v4ToolChanges(content event.Value, developer bool) error {
	if content.Kind != event.KindArray {
		return nil
	}
	for _, b := range content.Arr {
		if err := v4ToolChange(b, developer); err != nil {
			return err
		}
	}
	return nil
}

// v4OrdinaryMessage refuses the developer role and tool-change blocks outside developer/message.
func v4OrdinaryMessage(m event.Value) error {
	if !isObject(m) {
		return nil
	}
	if isStr(m, "role", "developer") {
		return formatErr("format v4 developer/message and developer role must occur together")
	}
	c, _ := m.Get("content")
	return v4ToolChanges(c, false)
}

func isStr(v event.Value, key, s string) bool {
	x, ok := v.Get(key)
	return ok && x.Kind == event.KindString && x.Str == s
}

// producerOwned is a message source the v4 reader accepts: a nonempty kind that is not the retired
// "plugin" wrapper.
func producerOwned(src event.Value, ok bool) bool {
	if !ok || !isObject(src) {
		return false
	}
	k, _ := src.Get("kind")
	return k.Kind == event.KindString && k.Str != "" && k.Str != "plugin"
}

var errProducerSource = "format v4 message requires a producer-owned source kind"

// v4DeveloperData is assertV4DeveloperData.
func v4DeveloperData(ev event.Value) error {
	typ := typeOf(ev)
	data, _ := ev.Get("data")
	if !isObject(data) {
		if typ == "developer/message" {
			return formatErr("format v4 developer/message data must be an object")
		}
		return nil
	}
	switch typ {
	case "developer/message":
		msg, _ := data.Get("message")
		if !isObject(msg) || !isStr(msg, "role", "developer") {
			return formatErr("format v4 developer/message requires turn, step, and a developer message")
		}
		for _, f := range []string{"turn", "step"} {
			x, _ := data.Get(f)
			n, err := count(x, "developer/message "+f)
			if err != nil {
				return err
			}
			if n == 0 {
				return formatErr("developer/message " + f + " must be positive")
			}
		}
		content, _ := msg.Get("content")
		if err := v4ToolChanges(content, true); err != nil {
			return err
		}
		id, _ := msg.Get("id")
		src, srcOK := msg.Get("source")
		if id.Kind != event.KindString || id.Str == "" || content.Kind != event.KindArray || !producerOwned(src, srcOK) {
			return formatErr("format v4 developer message requires id, role, content, and a producer-owned source")
		}
		additions := false
		for _, b := range content.Arr {
			if isObject(b) && isStr(b, "type", "tool-addition") {
				additions = true
			}
		}
		if additions {
			hs, _ := data.Get("headerSeq")
			if _, err := count(hs, "developer/message headerSeq"); err != nil {
				return err
			}
		} else if data.Has("headerSeq") {
			return formatErr("format v4 developer/message must omit headerSeq without tool additions")
		}
	case "user/message":
		if err := v4OrdinaryMessage(data); err != nil {
			return err
		}
	case "system/message", "assistant/message", "tool/result":
		m, _ := data.Get("message")
		if err := v4OrdinaryMessage(m); err != nil {
			return err
		}
	case "agent/inbox/spliced", "session/title-llm-request":
		ms, _ := data.Get(messagesKey(typ))
		if ms.Kind == event.KindArray {
			for _, m := range ms.Arr {
				if err := v4OrdinaryMessage(m); err != nil {
					return err
				}
			}
		}
	}
	if typ == "compaction/summary" {
		for _, k := range []string{"summary", "rawOutput"} {
			c, _ := data.Get(k)
			if err := v4ToolChanges(c, false); err != nil {
				return err
			}
		}
	}
	if typ == "assistant/message" || typ == "assistant/attempt" {
		if err := eachStreamChunk(data, func(chunk event.Value) error {
			switch {
			case isStr(chunk, "type", "block-end"):
				b, _ := chunk.Get("block")
				return v4ToolChange(b, false)
			case isStr(chunk, "type", "block-start"):
				if bt, _ := chunk.Get("blockType"); bt.Kind == event.KindString && isToolChange(bt.Str) {
					return formatErr("format v4 tool-change blocks require developer role")
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	if typ == "request/header" {
		if h, _ := data.Get("header"); isObject(h) {
			if tools, _ := h.Get("tools"); tools.Kind == event.KindArray {
				for _, tool := range tools.Arr {
					if !isObject(tool) || !tool.Has("deferLoading") {
						continue
					}
					if d, _ := tool.Get("deferLoading"); d.Kind != event.KindBool || !d.Bool {
						return formatErr("format v4 tool deferLoading must be true when present")
					}
				}
			}
		}
	}
	return nil
}

// eachStreamChunk calls f with every chunk object of an assistant event's embedded stream.
func eachStreamChunk(data event.Value, f func(chunk event.Value) error) error {
	stream, _ := data.Get("stream")
	if stream.Kind != event.KindArray {
		return nil
	}
	for _, entry := range stream.Arr {
		if !isObject(entry) || !isStr(entry, "type", "chunk") {
			continue
		}
		chunk, _ := entry.Get("chunk")
		if !isObject(chunk) {
			continue
		}
		if err := f(chunk); err != nil {
			return err
		}
	}
	return nil
}

func messagesKey(typ string) string {
	if typ == "agent/inbox/spliced" {
		return "inserted"
	}
	return "messages"
}

// v4SourceRowAdmission refuses the retired plugin source wrapper in any durable message slot of a row.
func v4SourceRowAdmission(row event.Value) error {
	data, _ := row.Get("data")
	if !isObject(data) {
		return nil
	}
	var msgs []event.Value
	switch typ := typeOf(row); typ {
	case "user/message":
		msgs = []event.Value{data}
	case "system/message", "assistant/message", "tool/result":
		m, _ := data.Get("message")
		msgs = []event.Value{m}
	case "agent/inbox/spliced", "session/title-llm-request":
		ms, _ := data.Get(messagesKey(typ))
		if ms.Kind != event.KindArray {
			return nil
		}
		msgs = ms.Arr
	}
	for _, m := range msgs {
		if !isObject(m) {
			continue
		}
		if src, _ := m.Get("source"); isObject(src) && isStr(src, "kind", "plugin") {
			return formatErr(errProducerSource)
		}
	}
	return nil
}
