package generation

import (
	"maps"
	"strconv"
	"strings"

	"github.com/dshfs/dshfs/eventstore/event"
)

// The v4 restore (restoreReleasedV4Artifact of the v3-to-v4 package) runs three passes over the decoded
// events, each stopping at its first failure: per-event admission (vocabulary, retired syntax, system
// message fields, tool-role results, fork results, the inherited marker), then producer attribution,
// delivery markers and catalog children, then the lifecycle relationships of v4 (turns, steps, tool
// lifecycles, PTC dispatches, retries, titles, commands, compactions and surface replacements). They run
// here as one walk that keeps each pass's first failure and reports them in the passes' order, which is
// what the three loops report.

// restoreV4 validates the decoded events of a v4 artifact with header h and inherited cut.
func restoreV4(h Header, cut int64, events []event.Event) error {
	_, err := restoreV4At(h, cut, events, nil)
	return err
}

// restoreV4At is restoreV4 that also says at which event the reported failure was found (the last event
// for the inherited-marker checks, which need them all), and leaves the walker's final state in rel when
// given one (a repair reads it).
func restoreV4At(h Header, cut int64, events []event.Event, rel *v4Relations) (int, error) {
	if rel == nil {
		rel = newV4Relations(events)
	}
	w := &v4Walk{h: h, cut: cut, rel: rel, last: -1, children: map[string]bool{}}
	for i, e := range events {
		if err := w.step(i, e); err != nil {
			return i, err
		}
	}
	return w.result(len(events))
}

// v4Walk is the restore's walk over a v4 log: each pass's state and first failure.
type v4Walk struct {
	h   Header
	cut int64
	rel *v4Relations
	// stream: the walk runs as the events are decoded, before the cut and the later events are known
	// (finish completes it)
	stream           bool
	deferred         []deferredEvent
	last             int64 // the last inherited end-seed marker, -1 when none
	children         map[string]bool
	errA, errB, errL error
	atA, atB, atL    int
}

// step takes event i; an error is one of reading the event itself (it was not canonical JSON).
func (w *v4Walk) step(i int, e event.Event) error {
	if !IsV4Type(e.Type) {
		return w.stepValue(i, e, event.Value{}, false)
	}
	v, err := v4Value(e)
	if err != nil {
		return err
	}
	return w.stepValue(i, e, v, false)
}

// stepValue is step with the event already read (v4Value; ignored for an unknown type). admitted says that
// the codec's row admission passed on this very value: it holds every per-event check of the restore
// and its developer-data check, which are then not run twice (an ignorable developer/message, which the
// admission leaves to the restore, is never admitted).
func (w *v4Walk) stepValue(i int, e event.Event, v event.Value, admitted bool) error {
	admitted = admitted && !(e.Type == "developer/message" && isTrue(v, "ignorable"))
	known := IsV4Type(e.Type)
	if w.errA == nil && !known {
		if ig, _ := e.Member("ignorable"); string(ig) != "true" {
			w.errA, w.atA = unsupportedErr("format v4 contains unknown event type "+quote(e.Type)+" at seq "+strconv.Itoa(i)), i
		}
	}
	if w.stream {
		w.rel.markOrphans([]event.Event{e})
	}
	if !known {
		return nil
	}
	if w.errA == nil {
		if !admitted {
			w.errA, w.atA = v4EventAdmission(v), i
		}
		if w.errA == nil && e.Type == "session/end-seed" {
			if data, _ := v.Get("data"); isObject(data) && isTrue(data, "inherited") {
				w.last = int64(i)
			}
		}
	}
	if w.errB == nil {
		if w.stream && (e.Type == "session-log-deepseek/delivery-accepted" || e.Type == "subagent/catalog") {
			// their checks need the inherited cut, which a decode learns at the end
			w.deferred = append(w.deferred, deferredEvent{i: i, v: v, admitted: admitted})
		} else {
			w.errB, w.atB = v4Attribution(w.h, w.cut, v, int64(i), w.children, admitted), i
		}
	}
	if w.errL == nil {
		w.errL, w.atL = w.rel.accept(e, v), i
	}
	return nil
}

// finish ends a streaming walk (a decode's) of n events once the inherited cut is known: the deferred
// checks run in their place in the order, and a turn boundary that crossed an open compaction is a failure
// unless a later session/end-seed left that compaction open.
func (w *v4Walk) finish(cut int64, n int) (int, error) {
	w.cut = cut
	for _, d := range w.deferred {
		if w.errB != nil && d.i > w.atB {
			break
		}
		if err := v4Attribution(w.h, w.cut, d.v, int64(d.i), w.children, d.admitted); err != nil {
			w.errB, w.atB = err, d.i
			break
		}
	}
	for _, c := range w.rel.crossings {
		if w.rel.orphans[c.start] {
			continue
		}
		if w.errL == nil || c.at < w.atL {
			w.errL, w.atL = formatErr(c.typ+" crosses an open compaction"), c.at
		}
		break
	}
	return w.result(n)
}

// deferredEvent is an event whose check waits for the inherited cut.
type deferredEvent struct {
	i        int
	v        event.Value
	admitted bool
}

// result is the restore's verdict on the n events walked: each pass's first failure, in the passes'
// order, with the inherited-marker checks between the first and the second.
func (w *v4Walk) result(n int) (int, error) {
	switch {
	case w.errA != nil:
		return w.atA, w.errA
	case w.h.IsSeeded && w.last != w.cut:
		return n - 1, formatErr("format v4 seeded header disagrees with its last inherited end-seed marker")
	case !w.h.IsSeeded && w.last >= 0:
		return n - 1, formatErr("format v4 unseeded Session contains an inherited end-seed marker")
	case w.errB != nil:
		return w.atB, w.errB
	}
	return w.atL, w.errL
}

// clone is a copy of a walk without failures that more events cannot change.
func (w *v4Walk) clone() *v4Walk {
	c := *w
	c.rel = w.rel.clone()
	c.children = maps.Clone(w.children)
	return &c
}

// v4EventAdmission is the restore's per-event checks of a known event.
func v4EventAdmission(v event.Value) error {
	if err := v4RetiredSyntax(v); err != nil {
		return err
	}
	if err := v4SystemMessageFields(v); err != nil {
		return err
	}
	if err := v4ToolResultMessage(v); err != nil {
		return err
	}
	return v4ForkResult(v)
}

// v4Attribution is the second pass over a known event: developer data, producer-owned message sources,
// the delivery marker's session and catalog children named once.
func v4Attribution(h Header, cut int64, v event.Value, seq int64, children map[string]bool, admitted bool) error {
	if !admitted {
		if err := v4DeveloperData(v); err != nil {
			return err
		}
	}
	if err := v4MessageSources(v); err != nil {
		return err
	}
	typ := typeOf(v)
	data, _ := v.Get("data")
	switch typ {
	case "session-log-deepseek/delivery-accepted":
		id, err := v4Delivery(data, seq)
		if err != nil {
			return err
		}
		if id != nil && !(h.ParentSession != nil && seq < cut) && *id != h.ID {
			return formatErr("current-generation delivery marker names the wrong Session")
		}
	case "subagent/catalog":
		if seq < cut {
			return nil
		}
		if err := catalogFact(data); err != nil {
			return err
		}
		id, _ := data.Get("childId")
		if children[id.Str] {
			return formatErr("duplicate catalog child " + id.Str)
		}
		children[id.Str] = true
	}
	return nil
}

// v4MessageSources requires a producer-owned source in every durable message slot.
func v4MessageSources(v event.Value) error {
	typ := typeOf(v)
	data, _ := v.Get("data")
	if !isObject(data) {
		return nil
	}
	check := func(m event.Value) error {
		src, ok := m.Get("source")
		if !producerOwned(src, ok) {
			return formatErr(errProducerSource)
		}
		return nil
	}
	switch typ {
	case "user/message":
		return check(data)
	case "developer/message", "system/message", "assistant/message", "tool/result":
		m, _ := data.Get("message")
		if !isObject(m) {
			return formatErr(typ + " requires a message")
		}
		return check(m)
	case "agent/inbox/spliced", "session/title-llm-request":
		ms, _ := data.Get(messagesKey(typ))
		if ms.Kind != event.KindArray {
			return formatErr(typ + " requires message array")
		}
		for _, m := range ms.Arr {
			if !isObject(m) {
				return formatErr(typ + " requires message objects")
			}
			if err := check(m); err != nil {
				return err
			}
		}
	}
	return nil
}

// v4Delivery is validateDeliveryAccepted for generation 4: the session a current delivery marker names,
// nil for a marker of another generation.
func v4Delivery(data event.Value, seq int64) (*string, error) {
	if !isObject(data) {
		return nil, formatErr("delivery-accepted data must be an object")
	}
	ver, ok := data.Get("sessionFormatVersion")
	if !ok {
		ver = event.Int(0)
	}
	n, err := count(ver, "delivery sessionFormatVersion")
	if err != nil || n != 4 {
		return nil, err
	}
	through, _ := data.Get("throughSeq")
	t, err := count(through, "delivery throughSeq")
	if err != nil {
		return nil, err
	}
	if t >= seq {
		return nil, formatErr("delivery throughSeq must precede its marker")
	}
	id, _ := data.Get("sessionId")
	if id.Kind != event.KindString || id.Str == "" {
		return nil, formatErr("delivery requires a nonempty Session id")
	}
	return &id.Str, nil
}

// catalogFact is the catalog payload check of a subagent/catalog event.
func catalogFact(v event.Value) error {
	bad := formatErr("subagent/catalog requires a supported versioned catalog fact")
	if !isObject(v) {
		return bad
	}
	ver, _ := v.Get("version")
	mode, _ := v.Get("mode")
	label, labelOK := v.Get("label")
	v0, v1 := ver.Kind == event.KindNumber && ver.Num == 0, ver.Kind == event.KindNumber && ver.Num == 1
	modeIs := func(s string) bool { return mode.Kind == event.KindString && mode.Str == s }
	switch {
	case !v0 && !v1, !isString(v, "childId"),
		!modeIs("continuable") && !modeIs("one-shot") && !modeIs("unknown"),
		v0 && modeIs("unknown"),
		modeIs("continuable") && (!labelOK || label.Kind != event.KindString),
		labelOK && label.Kind != event.KindString:
		return bad
	}
	created, _ := v.Get("childCreatedAt")
	_, err := count(created, "catalog child creation time")
	return err
}

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
	prefix := InterruptedResultPrefix + callID + "-"
	cv, cok := msg.Get("content")
	content, err := relArray(cv, cok, "not-started content")
	if err != nil {
		return false, err
	}
	if !strings.HasPrefix(id, prefix) {
		return false, nil
	}
	if _, ok := seqSuffix(id[len(prefix):]); !ok {
		return false, nil
	}
	return len(content) == 1 && isObject(content[0]) && isStr(content[0], "type", "text") && isStr(content[0], "text", NotStartedText), nil
}

func (r *v4Relations) developer(seq int64, data event.Value) error {
	hv, ok := data.Get("headerSeq")
	if !ok {
		return nil
	}
	hs, err := relEarlier(hv, seq, "developer/message headerSeq")
	if err != nil {
		return err
	}
	he := r.at(hs)
	if he.Type != "request/header" {
		return formatErr("developer/message headerSeq must reference an earlier request/header")
	}
	hrec, err := he.Record()
	if err != nil {
		return err
	}
	hdata, err := relObj(hrec, "data", "request/header data")
	if err != nil {
		return err
	}
	header, err := relObj(hdata, "header", "request header")
	if err != nil {
		return err
	}
	tools, _ := header.Get("tools")
	msg, err := relObj(data, "message", "developer message")
	if err != nil {
		return err
	}
	cv, cok := msg.Get("content")
	content, err := relArray(cv, cok, "developer content")
	if err != nil {
		return err
	}
	where := " in headerSeq " + strconv.FormatInt(hs, 10)
	for _, b := range content {
		if !isObject(b) || !isStr(b, "type", "tool-addition") {
			continue
		}
		nameV, _ := b.Get("toolName")
		name := jsString(nameV, true)
		var defs []event.Value
		if tools.Kind == event.KindArray {
			for _, t := range tools.Arr {
				if isObject(t) && isStr(t, "name", nameV.Str) && nameV.Kind == event.KindString {
					defs = append(defs, t)
				}
			}
		}
		if len(defs) != 1 {
			return formatErr(`developer/message tool-addition "` + name + `" must name exactly one tool` + where)
		}
		params, _ := defs[0].Get("parameters")
		if !isString(defs[0], "description") || !isObject(params) {
			return formatErr(`developer/message tool-addition "` + name + `" requires a complete tool definition` + where)
		}
	}
	return nil
}

func (r *v4Relations) dispatch(typ string, data event.Value) error {
	if err := r.requireTurn(typ); err != nil {
		return err
	}
	id, err := relText2(data, "subCallId", "PTC subCallId")
	if err != nil {
		return err
	}
	root, err := relText2(data, "rootCallId", "PTC rootCallId")
	if err != nil {
		return err
	}
	parent, err := relText2(data, "parentCallId", "PTC parentCallId")
	if err != nil {
		return err
	}
	existing := r.dispatches[id]
	if existing != nil && !isStr(existing.data, "rootCallId", root) {
		return formatErr("PTC dispatch changes its rootCallId")
	}
	if parent != root {
		if p := r.dispatches[parent]; p == nil || !isStr(p.data, "rootCallId", root) {
			return formatErr("PTC parentCallId does not belong to rootCallId")
		}
	}
	if typ == "tool/ptc-dispatch-start" {
		if existing != nil {
			return formatErr("PTC dispatch repeats subCallId")
		}
		r.dispatches[id] = &v4Dispatch{data: data}
		return nil
	}
	if existing == nil || existing.settled {
		return formatErr("PTC dispatch has no unique start")
	}
	for _, k := range []string{"rootCallId", "parentCallId", "name", "arguments"} {
		if !deepEqual(member(existing.data, k), member(data, k)) {
			return formatErr("PTC dispatch does not match its start")
		}
	}
	existing.settled = true
	return nil
}

func (r *v4Relations) retry(typ string, data event.Value) error {
	id, err := relText2(data, "retryId", "retryId")
	if err != nil {
		return err
	}
	attemptV, _ := data.Get("retry")
	attempt, err := count(attemptV, "retry")
	if err != nil {
		return err
	}
	if typ == "llm/retry-started" {
		var scheduled *event.Value
		for i := range r.retries {
			if isStr(r.retries[i], "retryId", id) && member(r.retries[i], "retry").eq(num(attempt)) {
				scheduled = &r.retries[i]
				break
			}
		}
		if scheduled == nil {
			return formatErr("llm/retry-started pairs no prior scheduled attempt")
		}
		if !member(*scheduled, "turn").eq(member(data, "turn")) || !member(*scheduled, "step").eq(member(data, "step")) {
			return formatErr("llm/retry-started changes scheduled coordinates")
		}
		key := id + "\x00" + strconv.FormatInt(attempt, 10)
		if r.startedRetries[key] {
			return formatErr("llm/retry-started repeats one scheduled attempt")
		}
		r.startedRetries[key] = true
		return nil
	}
	step := r.step
	if step.isNull() {
		step = num(r.nextStep - 1)
	}
	if r.turn.isNull() || !member(data, "turn").eq(r.turn) || !member(data, "step").eq(step) {
		return formatErr("llm/retry does not match the current turn and step")
	}
	if !member(data, "provider").eq(r.provider) {
		return formatErr("llm/retry provider does not match the open request/header")
	}
	var prior *event.Value
	for i := len(r.retries) - 1; i >= 0; i-- {
		same := true
		for _, k := range []string{"turn", "step", "provider", "policyKey"} {
			if !member(r.retries[i], k).eq(member(data, k)) {
				same = false
				break
			}
		}
		if same {
			prior = &r.retries[i]
			break
		}
	}
	want := int64(1)
	if prior != nil {
		pr, _ := prior.Get("retry")
		n, err := count(pr, "prior retry")
		if err != nil {
			return err
		}
		want = n + 1
	}
	if attempt != want {
		return formatErr("llm/retry skips its policy attempt sequence")
	}
	chain := false
	if prior == nil {
		for _, x := range r.retries {
			if isStr(x, "retryId", id) {
				chain = true
				break
			}
		}
	} else {
		chain = !isStr(*prior, "retryId", id)
	}
	if chain {
		return formatErr("llm/retry must keep one retryId per policy chain")
	}
	r.retries = append(r.retries, data)
	return nil
}

func (r *v4Relations) compact(typ string, seq int64, data event.Value) error {
	if typ == "compaction/prune" || typ == "compaction/summary" {
		if err := r.span(typ, seq, data); err != nil {
			return err
		}
	}
	switch typ {
	case "compaction/prune":
		return nil
	case "compaction/start":
		if r.compaction != nil {
			return formatErr("compaction/start overlaps an open compaction")
		}
		owner := jsNull
		if t := member(data, "turn"); !t.isNull() {
			n, err := count(t.v, "compaction turn")
			if err != nil {
				return err
			}
			owner = num(n)
		}
		if !owner.eq(r.turn) {
			return formatErr("compaction/start does not match the open turn")
		}
		id, err := relText2(data, "compactionId", "compactionId")
		if err != nil {
			return err
		}
		r.compaction = &v4Compaction{id: id, command: member(data, "sourceCommandId"), turn: owner, seq: seq}
		return nil
	}
	cur, err := r.compactionOwner(data, typ)
	if err != nil {
		return err
	}
	if !cur.turn.eq(r.turn) {
		return formatErr(typ + " does not match the open turn")
	}
	if typ == "compaction/summary" {
		if cur.summarized {
			return formatErr("compaction/summary repeats")
		}
		cur.summarized = true
		return nil
	}
	if !member(data, "turn").eq(cur.turn) {
		return formatErr("compaction/end changes its owner turn")
	}
	if !data.Has("error") && !cur.summarized {
		return formatErr("successful compaction/end requires one summary")
	}
	r.compaction = nil
	return nil
}

func (r *v4Relations) compactionOwner(data event.Value, subject string) (*v4Compaction, error) {
	c := r.compaction
	if c == nil || !isStr(data, "compactionId", c.id) || !c.command.eq(member(data, "sourceCommandId")) {
		return nil, formatErr(subject + " has no matching compaction/start")
	}
	return c, nil
}

func (r *v4Relations) span(typ string, seq int64, data event.Value) error {
	rng, err := relObj(data, "shadowedRange", "compaction shadowedRange")
	if err != nil {
		return err
	}
	sv, _ := rng.Get("start")
	s, err := relEarlier(sv, seq, "compaction range start")
	if err != nil {
		return err
	}
	start := r.surfaceIndex(s)
	ev, _ := rng.Get("end")
	e, err := relEarlier(ev, seq, "compaction range end")
	if err != nil {
		return err
	}
	end := r.surfaceIndex(e)
	qv, qok := data.Get("shadowedSeqs")
	seqs, err := relArray(qv, qok, "compaction shadowedSeqs")
	if err != nil {
		return err
	}
	exact := start >= 0 && end >= start && end-start+1 == len(seqs)
	for i := 0; exact && i < len(seqs); i++ {
		exact = seqs[i].Kind == event.KindNumber && seqs[i].Num == float64(r.surface[start+i]) && !isNegZero(seqs[i])
	}
	if !exact {
		return formatErr(typ + " shadowedSeqs do not name an exact current surface span")
	}
	if r.protectedHead >= 0 && containsNum(seqs, r.protectedHead) {
		return formatErr("compaction cannot shadow the protected system head")
	}
	return nil
}

func (r *v4Relations) title(typ string, seq int64, data event.Value) error {
	rv, rok := data.Get("messageSeqs")
	refs, err := relArray(rv, rok, "title messageSeqs")
	if err != nil {
		return err
	}
	if typ == "session/title" {
		src, err := relObj(data, "source", "title source")
		if err != nil {
			return err
		}
		if (len(refs) == 0) != isStr(src, "kind", "user") {
			return formatErr("session/title messageSeqs must be empty exactly for a user title")
		}
	}
	bad := formatErr(typ + " messageSeqs must cite distinct earlier human user/message events")
	seen := map[int64]bool{}
	for _, x := range refs {
		at, err := relEarlier(x, seq, "title messageSeqs")
		if err != nil {
			return err
		}
		if seen[at] || r.at(at).Type != "user/message" {
			return bad
		}
		rec, err := r.at(at).Record()
		if err != nil {
			return err
		}
		d, err := relObj(rec, "data", "title input")
		if err != nil {
			return err
		}
		src, err := relObj(d, "source", "title input source")
		if err != nil {
			return err
		}
		if !isStr(src, "kind", "user") {
			return bad
		}
		seen[at] = true
	}
	if typ != "session/title-llm-request" {
		return nil
	}
	mv, mok := data.Get("messages")
	msgs, err := relArray(mv, mok, "title messages")
	if err != nil {
		return err
	}
	var m0 event.Value
	m0OK := len(msgs) > 0
	if m0OK {
		m0 = msgs[0]
	}
	msg, err := relRecord(m0, m0OK, "title message")
	if err != nil {
		return err
	}
	cv, cok := msg.Get("content")
	content, err := relArray(cv, cok, "title content")
	if err != nil {
		return err
	}
	notIt := formatErr("session/title-llm-request messages do not represent messageSeqs")
	if len(refs) == 0 || len(msgs) != 1 || !isStr(msg, "role", "user") {
		return notIt
	}
	src, err := relObj(msg, "source", "title source")
	if err != nil {
		return err
	}
	if !isStr(src, "kind", "dsh-session-title-llm") || len(content) != 1 || !isObject(content[0]) || !isStr(content[0], "type", "text") {
		return notIt
	}
	return nil
}
