package generation

import (
	"maps"
	"strings"

	"github.com/dshfs/dshfs/eventstore/event"
)

// The lifecycle relationships, with the v4 package's own texts.

var v4RelationshipTypes = map[string]bool{
	"system/message": true, "user/message": true, "developer/message": true, "assistant/message": true,
	"tool/result": true, "assistant/attempt": true, "turn/start": true, "turn/end": true, "step/start": true,
	"step/end": true, "tool/call": true, "request/header": true, "request/context": true,
	"tool/ptc-dispatch-start": true, "tool/ptc-dispatch": true, "llm/retry": true, "llm/retry-started": true,
	"session/title": true, "session/title-llm-request": true, "command/run": true, "command/done": true,
	"compaction/start": true, "compaction/summary": true, "compaction/end": true, "compaction/prune": true,
	"session/end-seed": true,
}

func isV4StepEvent(t string) bool {
	return t == "system/message" || t == "developer/message" || t == "assistant/attempt"
}

type v4Compaction struct {
	id         string
	command    jsv
	turn       jsv // a number or null
	seq        int64
	summarized bool
}

type v4Dispatch struct {
	data    event.Value
	settled bool
}

// v4Relations is one artifact's lifecycle state.
type v4Relations struct {
	at                 func(seq int64) event.Event // an earlier event, for the checks that cite one
	turn, step         jsv                         // a number or null
	nextTurn, nextStep int64
	provider           jsv
	surface            []int64
	protectedHead      int64 // -1: none
	compaction         *v4Compaction
	tools              map[string]*toolLifecycle
	toolOrder          []string
	callSeqs           map[string]int64 // the tool/call seq of each started call
	dispatches         map[string]*v4Dispatch
	retries            []event.Value
	startedRetries     map[string]bool
	commands           map[string]bool
	orphans            map[int64]bool // compaction/start seqs a session/end-seed left open
	prepass            int64          // the pre-pass's open compaction/start, -1 when none
	// lazyOrphans: the pre-pass runs beside the walk (a decode's), so a turn boundary crossing an open
	// compaction is noted in crossings, to be judged once the whole log is known
	lazyOrphans bool
	crossings   []crossing
}

// crossing is a turn boundary at seq at that crossed the compaction opened at start.
type crossing struct {
	start int64
	at    int
	typ   string
}

// newStreamRelations is the lifecycle state of a walk that runs as the events are decoded into *events.
func newStreamRelations(events *[]event.Event) *v4Relations {
	r := newV4Relations(nil)
	r.at = func(seq int64) event.Event { return (*events)[seq] }
	r.lazyOrphans = true
	return r
}

func newV4Relations(events []event.Event) *v4Relations {
	r := &v4Relations{at: func(seq int64) event.Event { return events[seq] }, turn: jsNull, step: jsNull, nextTurn: 1,
		nextStep: 1, protectedHead: -1, tools: map[string]*toolLifecycle{}, callSeqs: map[string]int64{},
		dispatches: map[string]*v4Dispatch{}, startedRetries: map[string]bool{}, commands: map[string]bool{},
		orphans: map[int64]bool{}, prepass: -1}
	r.markOrphans(events)
	return r
}

// markOrphans continues the pre-pass that finds the compactions a session/end-seed leaves open (which a
// turn boundary may then cross) over events.
func (r *v4Relations) markOrphans(events []event.Event) {
	for _, e := range events {
		switch e.Type {
		case "compaction/start":
			r.prepass = e.Seq
		case "compaction/end":
			r.prepass = -1
		case "session/end-seed":
			if r.prepass >= 0 {
				r.orphans[r.prepass] = true
			}
			r.prepass = -1
		}
	}
}

// clone is a copy of the state that accepting more events cannot change.
func (r *v4Relations) clone() *v4Relations {
	c := *r
	c.surface = append([]int64(nil), r.surface...)
	if r.compaction != nil {
		cc := *r.compaction
		c.compaction = &cc
	}
	c.tools = make(map[string]*toolLifecycle, len(r.tools))
	for k, v := range r.tools {
		vv := *v
		c.tools[k] = &vv
	}
	c.toolOrder = append([]string(nil), r.toolOrder...)
	c.callSeqs = maps.Clone(r.callSeqs)
	c.dispatches = make(map[string]*v4Dispatch, len(r.dispatches))
	for k, v := range r.dispatches {
		vv := *v
		c.dispatches[k] = &vv
	}
	c.retries = append([]event.Value(nil), r.retries...)
	c.startedRetries = maps.Clone(r.startedRetries)
	c.commands = maps.Clone(r.commands)
	c.orphans = maps.Clone(r.orphans)
	return &c
}

func relRecord(v event.Value, ok bool, subject string) (event.Value, error) {
	if !ok || !isObject(v) {
		return v, formatErr(subject + " requires an object")
	}
	return v, nil
}

func relObj(v event.Value, key, subject string) (event.Value, error) {
	x, ok := v.Get(key)
	return relRecord(x, ok, subject)
}

func relText(v event.Value, ok bool, subject string) (string, error) {
	if !ok || v.Kind != event.KindString || v.Str == "" {
		return "", formatErr(subject + " requires a nonempty string")
	}
	return v.Str, nil
}

func relArray(v event.Value, ok bool, subject string) ([]event.Value, error) {
	if !ok || v.Kind != event.KindArray {
		return nil, formatErr(subject + " requires an array")
	}
	return v.Arr, nil
}

func relEarlier(v event.Value, seq int64, subject string) (int64, error) {
	n, err := count(v, subject)
	if err != nil {
		return 0, err
	}
	if n >= seq {
		return 0, formatErr(subject + " must name an earlier event")
	}
	return n, nil
}

func member(v event.Value, key string) jsv {
	x, ok := v.Get(key)
	return jsv{v: x, ok: ok}
}

func (r *v4Relations) requireTurn(typ string) error {
	if r.turn.isNull() {
		return formatErr(typ + " is outside an open turn")
	}
	return nil
}

func (r *v4Relations) requireStep(typ string, data event.Value) error {
	if r.turn.isNull() || r.step.isNull() || !member(data, "turn").eq(r.turn) || !member(data, "step").eq(r.step) {
		return formatErr(typ + " does not match an open turn and step")
	}
	return nil
}

func (r *v4Relations) closeTools(typ string) error {
	if len(r.toolOrder) != 0 {
		return formatErr(typ + " leaves unresolved tool call " + r.toolOrder[0])
	}
	clear(r.tools)
	return nil
}

func (r *v4Relations) dropTool(id string) {
	delete(r.tools, id)
	for i, x := range r.toolOrder {
		if x == id {
			r.toolOrder = append(r.toolOrder[:i], r.toolOrder[i+1:]...)
			return
		}
	}
}

func (r *v4Relations) surfaceIndex(seq int64) int {
	for i, s := range r.surface {
		if s == seq {
			return i
		}
	}
	return -1
}

func (r *v4Relations) accept(e event.Event, v event.Value) error {
	if !v4RelationshipTypes[e.Type] {
		return nil
	}
	typ, seq := e.Type, e.Seq
	data, err := relObj(v, "data", typ)
	if err != nil {
		return err
	}
	if isV4StepEvent(typ) {
		if err := r.requireStep(typ, data); err != nil {
			return err
		}
	}
	if strings.HasPrefix(typ, "turn/") && r.compaction != nil && !r.orphans[r.compaction.seq] {
		if !r.lazyOrphans {
			return formatErr(typ + " crosses an open compaction")
		}
		// a session/end-seed later in the log may still leave the compaction open: v4Walk.finish decides
		r.crossings = append(r.crossings, crossing{start: r.compaction.seq, at: int(seq), typ: typ})
	}
	if err := r.foldSurface(typ, seq, v); err != nil {
		return err
	}
	switch typ {
	case "turn/start":
		if !r.turn.isNull() || !member(data, "turn").eq(num(r.nextTurn)) {
			return formatErr("turn/start does not open the expected turn")
		}
		r.turn, r.nextStep = num(r.nextTurn), 1
		clear(r.tools)
		clear(r.callSeqs)
		r.toolOrder = r.toolOrder[:0]
	case "turn/end":
		if r.turn.isNull() || !member(data, "turn").eq(r.turn) || !r.step.isNull() {
			return formatErr("turn/end does not match the open turn with no open step")
		}
		if err := r.closeTools(typ); err != nil {
			return err
		}
		r.turn = jsNull
		r.nextTurn++
	case "step/start":
		if r.turn.isNull() || !member(data, "turn").eq(r.turn) || !r.step.isNull() || !member(data, "step").eq(num(r.nextStep)) {
			return formatErr("step/start does not match the open turn and next step")
		}
		r.step = num(r.nextStep)
	case "step/end":
		if err := r.requireStep(typ, data); err != nil {
			return err
		}
		if err := r.closeTools(typ); err != nil {
			return err
		}
		r.step = jsNull
		r.nextStep++
	case "assistant/message", "tool/call", "tool/result":
		return r.tool(typ, seq, v, data)
	case "developer/message":
		return r.developer(seq, data)
	case "request/header":
		if err := r.requireTurn(typ); err != nil {
			return err
		}
		h, err := relObj(data, "header", "request header")
		if err != nil {
			return err
		}
		cfg, err := relObj(h, "config", "request config")
		if err != nil {
			return err
		}
		r.provider = member(cfg, "provider")
	case "request/context":
		return r.requireTurn(typ)
	case "tool/ptc-dispatch-start", "tool/ptc-dispatch":
		return r.dispatch(typ, data)
	case "llm/retry", "llm/retry-started":
		return r.retry(typ, data)
	case "session/title", "session/title-llm-request":
		return r.title(typ, seq, data)
	case "command/run":
		id, err := relText2(data, "commandId", "commandId")
		if err != nil {
			return err
		}
		if r.commands[id] {
			return formatErr("command/run repeats commandId " + id)
		}
		r.commands[id] = true
	case "command/done":
		id, err := relText2(data, "commandId", "commandId")
		if err != nil {
			return err
		}
		if !r.commands[id] {
			return formatErr("command/done has no prior command/run")
		}
		if src, ok := data.Get("sourceEventSeq"); ok {
			at, err := relEarlier(src, seq, "command sourceEventSeq")
			if err != nil {
				return err
			}
			t := r.at(at).Type
			if !isStr(data, "kind", "success") || t == "command/run" || t == "command/done" {
				return formatErr("command/done has invalid sourceEventSeq")
			}
		}
	case "compaction/start", "compaction/summary", "compaction/end", "compaction/prune":
		return r.compact(typ, seq, data)
	case "user/message":
		src, err := relObj(data, "source", "user message source")
		if err != nil {
			return err
		}
		if op, _ := v.Get("surfaceOp"); !(op.Kind == event.KindString && op.Str == "append") && isStr(src, "kind", "compact-checkpoint") {
			_, err := r.compactionOwner(src, "compaction checkpoint")
			return err
		}
	case "session/end-seed":
		r.compaction = nil
	}
	return nil
}

func relText2(v event.Value, key, subject string) (string, error) {
	x, ok := v.Get(key)
	return relText(x, ok, subject)
}

func (r *v4Relations) foldSurface(typ string, seq int64, v event.Value) error {
	if !IsV4Surface(typ) {
		return nil
	}
	if typ == "system/message" && len(r.surface) > 0 && r.protectedHead < 0 {
		return formatErr("system/message requires a protected first surface head")
	}
	op, opOK := v.Get("surfaceOp")
	if opOK && op.Kind == event.KindString && op.Str == "append" {
		if typ == "system/message" && len(r.surface) == 0 {
			r.protectedHead = seq
		}
		r.surface = append(r.surface, seq)
		return nil
	}
	if _, err := relRecord(op, opOK, typ+" surfaceOp"); err != nil {
		return err
	}
	startV, _ := op.Get("startSeq")
	start, err := relEarlier(startV, seq, "replacement start")
	if err != nil {
		return err
	}
	first := r.surfaceIndex(start)
	endV, _ := op.Get("endSeq")
	end, err := relEarlier(endV, seq, "replacement end")
	if err != nil {
		return err
	}
	last := r.surfaceIndex(end)
	if first < 0 || last < first {
		return formatErr(typ + " replacement range is not on the current surface")
	}
	removed := r.surface[first : last+1]
	srcV, srcOK := v.Get("sourceEventSeqs")
	sources, err := relArray(srcV, srcOK, "replacement sourceEventSeqs")
	if err != nil {
		return err
	}
	for _, s := range removed {
		if !containsNum(sources, s) {
			return formatErr("replacement sourceEventSeqs omit a shadowed surface node")
		}
	}
	if r.protectedHead >= 0 && containsSeq(removed, r.protectedHead) {
		if typ != "system/message" || len(removed) != 1 {
			return formatErr("surface replacement cannot shadow the protected system head")
		}
		r.protectedHead = seq
	}
	rest := append([]int64{seq}, r.surface[last+1:]...)
	r.surface = append(r.surface[:first], rest...)
	return nil
}

func containsNum(vs []event.Value, n int64) bool {
	for _, x := range vs {
		if x.Kind == event.KindNumber && x.Num == float64(n) {
			return true
		}
	}
	return false
}

func containsSeq(s []int64, n int64) bool {
	for _, x := range s {
		if x == n {
			return true
		}
	}
	return false
}

func (r *v4Relations) tool(typ string, seq int64, v, data event.Value) error {
	if typ == "tool/result" {
		if op, _ := v.Get("surfaceOp"); !(op.Kind == event.KindString && op.Str == "append") {
			return r.requireTurn(typ)
		}
	}
	if err := r.requireStep(typ, data); err != nil {
		return err
	}
	if typ == "assistant/message" {
		msg, err := relObj(data, "message", "assistant message")
		if err != nil {
			return err
		}
		cv, cok := msg.Get("content")
		content, err := relArray(cv, cok, "assistant content")
		if err != nil {
			return err
		}
		for _, b := range content {
			if _, err := relRecord(b, true, "assistant content block"); err != nil {
				return err
			}
			if !isStr(b, "type", "tool-call") {
				continue
			}
			id, err := relText2(b, "id", "tool call id")
			if err != nil {
				return err
			}
			if r.tools[id] != nil {
				return formatErr("assistant/message repeats advertised tool call " + id)
			}
			r.tools[id] = &toolLifecycle{name: member(b, "name"), arguments: member(b, "arguments")}
			r.toolOrder = append(r.toolOrder, id)
		}
		return nil
	}
	var msg event.Value
	var id string
	var err error
	if typ == "tool/result" {
		if msg, err = relObj(data, "message", "tool result message"); err != nil {
			return err
		}
		id, err = relText2(msg, "toolCallId", "tool call id")
	} else {
		id, err = relText2(data, "callId", "tool call id")
	}
	if err != nil {
		return err
	}
	pending := r.tools[id]
	if pending == nil {
		return formatErr(typ + " " + id + " has no advertised tool lifecycle")
	}
	if typ == "tool/call" {
		if pending.started || !pending.name.eq(member(data, "name")) || !pending.arguments.eq(member(data, "arguments")) {
			return formatErr("tool/call " + id + " does not match one advertised tool call")
		}
		pending.started = true
		r.callSeqs[id] = seq
		return nil
	}
	if !pending.started {
		ok, err := notStartedRepair(v, data, msg, id)
		if err != nil {
			return err
		}
		if !ok {
			return formatErr("tool/result " + id + " is not the exact TOOL_NOT_STARTED repair")
		}
	}
	r.dropTool(id)
	return nil
}

// notStartedRepair reports whether a result of a call that never started is the harness's exact
// TOOL_NOT_STARTED repair (or a fork's not-started result, checked on its own by v4ForkResult).
func notStartedRepair(v, data, msg event.Value, callID string) (bool, error) {
	errv, err := relObj(data, "error", "not-started error")
	if err != nil {
		return false, err
	}
	if !isStr(errv, "name", "ToolNotStartedError") || !isStr(errv, "code", "TOOL_NOT_STARTED") || !isTrue(msg, "isError") || v.Has("sourceEventSeqs") {
		return false, nil
	}
	id, err := relText2(msg, "id", "not-started message id")
	if err != nil {
		return false, err
	}
	if strings.HasPrefix(id, ForkedResultPrefix+callID+"-") {
		return true, nil
	}
	cv, cok := msg.Get("content")
	content, err := relArray(cv, cok, "not-started content")
	if err != nil {
		return false, err
	}
	if !isRepairID(id, callID) {
		return false, nil
	}
	return len(content) == 1 && isObject(content[0]) && isStr(content[0], "type", "text") && isStr(content[0], "text", NotStartedText), nil
}
