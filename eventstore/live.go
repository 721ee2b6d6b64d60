package eventstore

import (
	"strings"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/load"
)

// The live writer's rules. The loader accepts any log whose turns it can repair, but the harness's live
// path runs two invariant companions on every append (the session package's and the compaction
// package's, docs/harness.md#turns-steps-and-token-usage): a turn/end that names another turn, a step
// outside its turn, a tool/result without its tool/call in the step, a compaction bracket crossing a
// turn boundary, are vetoed there with an InvariantError. liveTrace holds what those companions hold
// for one session and applies the same checks, with their texts, to every event dshfs accepts, so that
// nothing appended through dshfs is a log the harness would have refused to write.

// Invariant owners as the harness's InvariantError names them.
const (
	sessionInvariant    = "@deepseek-ai/dsh-session"
	compactionInvariant = "@deepseek-ai/dsh-compaction"
)

// CodeInvariant is the code of an append the harness's live invariants veto (its InvariantError code).
const CodeInvariant = "INVARIANT"

// invariantError is the harness's InvariantError text for a veto by owner.
func invariantError(owner, message string) *CommandError {
	return &CommandError{Failure: Invalid, Code: CodeInvariant,
		Message: `invariant violated by "` + owner + `": ` + message}
}

// jsv is a JSON value as a JS program sees a property: set false is undefined.
type jsv struct {
	v   event.Value
	set bool
}

var jsNull = jsv{v: event.Null(), set: true}

func (a jsv) isNull() bool { return a.set && a.v.Kind == event.KindNull }

// String is String(value) in JS, as a template literal renders it.
func (a jsv) String() string { return load.JSString(a.v, a.set) }

// same is JS strict equality (===) of two JSON values: objects and arrays are never equal.
func same(a, b jsv) bool {
	if !a.set || !b.set {
		return a.set == b.set
	}
	if a.v.Kind != b.v.Kind {
		return false
	}
	switch a.v.Kind {
	case event.KindNull:
		return true
	case event.KindNumber:
		return a.v.Num == b.v.Num
	case event.KindString:
		return a.v.Str == b.v.Str
	case event.KindBool:
		return a.v.Bool == b.v.Bool
	}
	return false
}

// prop is base[key] in JS for a JSON value (undefined through anything that is not an object).
func prop(base jsv, key string) jsv {
	if !base.set || base.v.Kind != event.KindObject {
		return jsv{}
	}
	v, ok := base.v.Get(key)
	return jsv{v, ok}
}

// index is base[i] for an array (undefined otherwise or out of range).
func index(base jsv, i int) jsv {
	if !base.set || base.v.Kind != event.KindArray || i < 0 || i >= len(base.v.Arr) {
		return jsv{}
	}
	return jsv{base.v.Arr[i], true}
}

// liveCompaction is a compaction/start not yet matched by its compaction/end.
type liveCompaction struct {
	id, sourceCommandID jsv
	turn                jsv
	summarized          bool
}

// liveTrace is the state of both companions for one session: the open turn and step, the numbers the
// next turn and step must carry, the tool calls of the open step still without a result, and the open
// compaction.
type liveTrace struct {
	openTurn, openStep jsv
	nextTurn, nextStep float64
	pending            map[string]bool // callIds as their JSON text
	compaction         *liveCompaction
}

func newLiveTrace() *liveTrace {
	return &liveTrace{openTurn: jsNull, openStep: jsNull, nextTurn: 1, nextStep: 1, pending: map[string]bool{}}
}

// seedLiveTrace replays a stored log into a trace without vetoing anything: the harness's companions
// check what is appended; a stored log is the loader's business, which accepts more.
func seedLiveTrace(events []event.Event) *liveTrace {
	t := newLiveTrace()
	for _, e := range events {
		if !tracedTypes[e.Type] {
			continue // apply passes over it: parsing every chunk of a long log made its first append slow
		}
		rec, err := e.Record()
		if err != nil {
			continue
		}
		t.apply(e.Type, jsv{rec, true})
	}
	return t
}

// clone is a copy that check and apply may change while a request's events are staged.
func (t *liveTrace) clone() *liveTrace {
	c := *t
	c.pending = make(map[string]bool, len(t.pending))
	for k := range t.pending {
		c.pending[k] = true
	}
	if t.compaction != nil {
		oc := *t.compaction
		c.compaction = &oc
	}
	return &c
}

// accept checks one event as both companions do, in the order the harness loads them (session, then
// compaction), and applies it when neither vetoes it.
func (t *liveTrace) accept(typ string, rec event.Value) *CommandError {
	r := jsv{rec, true}
	if err := t.checkSession(typ, r); err != nil {
		return err
	}
	if err := t.checkCompaction(typ, r); err != nil {
		return err
	}
	t.apply(typ, r)
	return nil
}

// acceptInput is accept for a new event, for one quickInput read too: of an assistant/chunk both
// companions check only that it names the open turn and step, and apply nothing; of a turn or step
// bracket they read only its turn and step (data.turn of a turn's, data.turn and data.step of a step's),
// which a record of those members alone stands for.
func (t *liveTrace) acceptInput(in *input) *CommandError {
	if in.message {
		rec, ok := t.messageRecord(in)
		if !ok {
			var err error
			if rec, err = in.ev.Record(); err != nil {
				return &CommandError{Failure: Invalid, Code: CodeBadInput, Message: err.Error(), Err: err}
			}
		}
		in.rec = rec
		return t.accept(in.ev.Type, rec)
	}
	if in.quick {
		if in.ev.Type == "assistant/chunk" && same(t.openTurn, number(in.turn)) && same(t.openStep, number(in.step)) {
			return nil
		}
		data := []event.Member{{Key: "turn", Value: event.Number(in.turn)}}
		if !strings.HasPrefix(in.ev.Type, "turn/") {
			data = append(data, event.Member{Key: "step", Value: event.Number(in.step)})
		}
		in.rec = event.Object(event.Member{Key: "data", Value: event.Object(data...)})
	}
	return t.accept(in.ev.Type, in.rec)
}

// messageRecord is the record of a quick message event (quickMessage) as far as both companions read it:
// its data's turn and step; a tool/call's callId; a tool/result's surfaceOp and call id. ok is false where
// they would read more: a tool/result appended to the surface for a call that is not pending, whose
// content and error decide whether it reports a tool that never started.
func (t *liveTrace) messageRecord(in *input) (event.Value, bool) {
	var top []event.Member
	if in.appendOp {
		top = append(top, event.Member{Key: "surfaceOp", Value: event.String("append")})
	}
	if in.ev.Type == "user/message" {
		// of a message that replaces nothing both companions read nothing
		return event.Object(top...), true
	}
	data := []event.Member{{Key: "turn", Value: event.Number(in.turn)}, {Key: "step", Value: event.Number(in.step)}}
	switch in.ev.Type {
	case "tool/call":
		data = append(data, event.Member{Key: "callId", Value: event.String(in.callID)})
	case "tool/result":
		if in.appendOp {
			if !t.pending[callKey(jsv{event.String(in.callID), true})] {
				return event.Value{}, false
			}
			source := event.Object(event.Member{Key: "callId", Value: event.String(in.callID)})
			data = append(data, event.Member{Key: "message", Value: event.Object(event.Member{Key: "source", Value: source})})
		}
	}
	return event.Object(append(top, event.Member{Key: "data", Value: event.Object(data...)})...), true
}

// requireOpenStep is the session companion's check of a step-scoped event.
func (t *liveTrace) requireOpenStep(kind string, data jsv) *CommandError {
	turn, step := prop(data, "turn"), prop(data, "step")
	if !same(t.openTurn, turn) || !same(t.openStep, step) {
		return invariantError(sessionInvariant, kind+" names turn "+turn.String()+"/step "+step.String()+
			" but open is turn "+t.openTurn.String()+"/step "+t.openStep.String())
	}
	return nil
}

func (t *liveTrace) checkSession(typ string, r jsv) *CommandError {
	data := prop(r, "data")
	fail := func(msg string) *CommandError { return invariantError(sessionInvariant, msg) }
	switch typ {
	case "turn/start":
		turn := prop(data, "turn")
		if !t.openTurn.isNull() {
			return fail("turn/start " + turn.String() + " while turn " + t.openTurn.String() + " is still open")
		}
		if !same(turn, number(t.nextTurn)) {
			return fail("turn/start expected turn " + number(t.nextTurn).String() + ", got " + turn.String())
		}
	case "turn/end":
		turn := prop(data, "turn")
		if !same(t.openTurn, turn) {
			return fail("turn/end " + turn.String() + " does not match open turn " + t.openTurn.String())
		}
		if !t.openStep.isNull() {
			return fail("turn/end " + turn.String() + " while step " + t.openStep.String() + " is still open")
		}
	case "step/start":
		turn, step := prop(data, "turn"), prop(data, "step")
		if !same(t.openTurn, turn) {
			return fail("step/start in turn " + turn.String() + " but open turn is " + t.openTurn.String())
		}
		if !t.openStep.isNull() {
			return fail("step/start " + step.String() + " while step " + t.openStep.String() + " is still open")
		}
		if !same(step, number(t.nextStep)) {
			return fail("step/start expected step " + number(t.nextStep).String() + " in turn " + turn.String() + ", got " + step.String())
		}
	case "step/end", "assistant/chunk", "assistant/message", "tool/call":
		return t.requireOpenStep(typ, data)
	case "tool/result":
		if op := prop(r, "surfaceOp"); !same(op, jsv{event.String("append"), true}) {
			if t.openTurn.isNull() {
				return fail("tool/result surface replacement appended outside any open turn")
			}
			return nil
		}
		if err := t.requireOpenStep(typ, data); err != nil {
			return err
		}
		message := prop(data, "message")
		callID := prop(prop(message, "source"), "callId")
		notStarted := same(prop(index(prop(message, "content"), 0), "isError"), jsv{event.Bool(true), true}) &&
			same(prop(prop(data, "error"), "code"), jsv{event.String("TOOL_NOT_STARTED"), true})
		if !t.pending[callKey(callID)] && !notStarted {
			return fail("tool/result for " + callID.String() + " with no prior tool/call in this step")
		}
	case "todo/write", "request/header", "request/context":
		if t.openTurn.isNull() {
			return fail(typ + " appended outside any open turn (core execution events must be turn-enclosed)")
		}
	}
	return nil
}

// compactionOwner is how the compaction companion names an open compaction's owner.
func (c *liveCompaction) owner(standalone, numbered string) string {
	if c.turn.isNull() {
		return standalone
	}
	return numbered + c.turn.String()
}

func (t *liveTrace) checkCompaction(typ string, r jsv) *CommandError {
	fail := func(msg string) *CommandError { return invariantError(compactionInvariant, msg) }
	open := t.compaction
	if (typ == "turn/start" || typ == "turn/end") && open != nil {
		return fail(typ + " cannot cross an open " + open.owner("standalone compaction", "compaction for turn "))
	}
	data := prop(r, "data")
	validID := func(v jsv, label string) *CommandError {
		if !v.set || v.v.Kind != event.KindString || v.v.Str == "" {
			return fail(label + " must be a non-empty string")
		}
		return nil
	}
	optionalID := func(v jsv, label string) *CommandError {
		if v.set {
			return validID(v, label)
		}
		return nil
	}
	sameCommand := func(what string, v, want jsv) *CommandError {
		if err := optionalID(v, what+" sourceCommandId"); err != nil {
			return err
		}
		if !same(v, want) {
			return fail(what + " sourceCommandId " + v.String() + " does not match compaction/start sourceCommandId " + want.String())
		}
		return nil
	}
	owner := func(owner jsv) *CommandError {
		if owner.isNull() {
			if !t.openTurn.isNull() {
				return fail(typ + " is standalone but turn " + t.openTurn.String() + " is open")
			}
			return nil
		}
		if t.openTurn.isNull() {
			return fail(typ + " for turn " + owner.String() + " appended outside any open turn")
		}
		if !same(owner, t.openTurn) {
			return fail(typ + " names turn " + owner.String() + " but open turn is " + t.openTurn.String())
		}
		return nil
	}
	switch typ {
	case "user/message":
		source := prop(data, "source")
		if !isCheckpoint(r, source) {
			return nil
		}
		id := prop(source, "compactionId")
		if err := validID(id, "compaction checkpoint compactionId"); err != nil {
			return err
		}
		cmd := prop(source, "sourceCommandId")
		if err := optionalID(cmd, "compaction checkpoint sourceCommandId"); err != nil {
			return err
		}
		if open == nil {
			return fail("compaction checkpoint has no matching compaction/start")
		}
		if !same(id, open.id) {
			return fail("compaction checkpoint id " + id.String() + " does not match compaction/start id " + open.id.String())
		}
		return sameCommand("compaction checkpoint", cmd, open.sourceCommandID)
	case "compaction/start":
		if err := validID(prop(data, "compactionId"), "compaction/start compactionId"); err != nil {
			return err
		}
		if err := optionalID(prop(data, "sourceCommandId"), "compaction/start sourceCommandId"); err != nil {
			return err
		}
		if open != nil {
			return fail("compaction/start while " + open.owner("standalone compaction", "turn ") + " is still compacting")
		}
		return owner(prop(data, "turn"))
	case "compaction/summary", "compaction/end":
		id := prop(data, "compactionId")
		if err := validID(id, typ+" compactionId"); err != nil {
			return err
		}
		cmd := prop(data, "sourceCommandId")
		if err := optionalID(cmd, typ+" sourceCommandId"); err != nil {
			return err
		}
		if open == nil {
			return fail(typ + " has no matching compaction/start")
		}
		if !same(id, open.id) {
			return fail(typ + " id " + id.String() + " does not match compaction/start id " + open.id.String())
		}
		if err := sameCommand(typ, cmd, open.sourceCommandID); err != nil {
			return err
		}
		if typ == "compaction/end" {
			if turn := prop(data, "turn"); !same(turn, open.turn) {
				return fail("compaction/end owner " + turn.String() + " does not match compaction/start owner " + open.turn.String())
			}
			if err := owner(open.turn); err != nil {
				return err
			}
			if !prop(data, "error").set && !open.summarized {
				return fail("successful compaction/end requires one compaction/summary")
			}
			return nil
		}
		if err := owner(open.turn); err != nil {
			return err
		}
		if open.summarized {
			return fail("compaction/summary repeated within one compaction")
		}
		seqs := prop(data, "shadowedSeqs")
		if seqs.set && seqs.v.Kind == event.KindArray && len(seqs.v.Arr) == 0 {
			return fail("compaction/summary shadowedSeqs must be non-empty")
		}
		last := jsv{}
		if seqs.set && seqs.v.Kind == event.KindArray {
			last = index(seqs, len(seqs.v.Arr)-1)
		}
		rng := prop(data, "shadowedRange")
		if !same(index(seqs, 0), prop(rng, "start")) || !same(last, prop(rng, "end")) {
			return fail("compaction/summary shadowedRange must match the first and last shadowedSeqs")
		}
		if n := prop(data, "shadowedTokenCount"); !n.set || n.v.Kind != event.KindNumber || !event.IsSafeInteger(n.v.Num) || n.v.Num < 0 {
			return fail("compaction/summary shadowedTokenCount must be a non-negative safe integer")
		}
	}
	return nil
}

// isCheckpoint is the compaction companion's test of a compaction's replacement user message: a surface
// replacement (surfaceOp present and not "append") whose source is the compact plugin's.
func isCheckpoint(r, source jsv) bool {
	op := prop(r, "surfaceOp")
	if !op.set || same(op, jsv{event.String("append"), true}) {
		return false
	}
	return same(prop(source, "kind"), jsv{event.String("plugin"), true}) &&
		same(prop(source, "plugin"), jsv{event.String("compact"), true})
}

// tracedTypes are the types apply reads.
var tracedTypes = map[string]bool{"turn/start": true, "turn/end": true, "step/start": true, "step/end": true,
	"tool/call": true, "tool/result": true, "session/end-seed": true, "compaction/start": true,
	"compaction/summary": true, "compaction/end": true}

// apply advances the trace past an accepted event, as both companions do once it is committed.
func (t *liveTrace) apply(typ string, r jsv) {
	data := prop(r, "data")
	switch typ {
	case "turn/start":
		t.openTurn, t.nextStep = prop(data, "turn"), 1
	case "turn/end":
		t.openTurn = jsNull
		t.nextTurn++
	case "step/start":
		t.openStep = prop(data, "step")
	case "step/end":
		clear(t.pending)
		t.openStep = jsNull
		t.nextStep++
	case "tool/call":
		t.pending[callKey(prop(data, "callId"))] = true
	case "tool/result":
		if same(prop(r, "surfaceOp"), jsv{event.String("append"), true}) {
			delete(t.pending, callKey(prop(prop(prop(data, "message"), "source"), "callId")))
		}
	case "session/end-seed":
		t.compaction = nil
	case "compaction/start":
		t.compaction = &liveCompaction{id: prop(data, "compactionId"), sourceCommandID: prop(data, "sourceCommandId"), turn: prop(data, "turn")}
	case "compaction/summary":
		if t.compaction != nil {
			t.compaction.summarized = true
		}
	case "compaction/end":
		t.compaction = nil
	}
}

// callKey is a callId as a set key: its JSON text, so that "1" and 1 stay apart as in a JS Set.
func callKey(v jsv) string {
	if !v.set {
		return "undefined"
	}
	return string(event.Stringify(v.v))
}

func number(n float64) jsv { return jsv{event.Value{Kind: event.KindNumber, Num: n}, true} }

// unknownType refuses an event type the harness does not know, in input a user wrote: a typo is far more
// likely there than a newer harness (that text stays for logs read from disk).
func unknownType(typ string) *CommandError {
	return &CommandError{Failure: Invalid, Code: CodeBadInput,
		Message: "unknown event type " + jsonText(typ) + "; known types: " + strings.Join(event.KnownTypes, ", ") +
			` (an event of another type must carry "ignorable": true)`}
}
