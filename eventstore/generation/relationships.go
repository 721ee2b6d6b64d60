package generation

import "github.com/dshfs/dshfs/eventstore/event"

// The released restore of both generations ends with the frozen cross-event relationship validation of
// the released v0 format (dsh-session-format-v0-to-v1's relationships): turns and steps nest and count
// up, advertised tool calls start and settle inside their step, PTC dispatches pair with their starts,
// retries chain, titles cite human messages, commands run before they finish, compactions own their turn
// and name exact current surface spans, and every surface replacement covers what it shadows. Its rules
// are restated here from that package's behaviour.
//
// The validation reads payloads the v2 restore has not checked, so a malformed one fails in it as a
// JavaScript TypeError (reading a member of undefined); such refusals carry ClassTypeError and a text
// of dshfs's own.

// This file holds the validation's state and its walk: turns, steps and the events that need an open
// step. relationtools.go holds tool calls, PTC dispatches and retries; relationledgers.go titles,
// commands, delivery markers, compactions and the surface; jsvalue.go the JavaScript values it reads.

// isReleasedV0Type reports whether the relationship validation interprets events of type t: the v2
// inventory without assistant/attempt (an extension it handles apart), with the released v0
// assistant/chunk.
func isReleasedV0Type(t string) bool {
	return t == "assistant/chunk" || (t != "assistant/attempt" && isReleasedV2Type(t))
}

type toolLifecycle struct {
	name, arguments jsv
	started         bool
}

type ptcStart struct {
	root, parent, name, arguments jsv
	settled                       bool
}

type compaction struct {
	id, sourceCommandID, turn jsv
	startSeq                  int64
	summarized                bool
}

// relationEvent is one event as the relationship validation sees it: its type under v2's names and its
// record (v3's view rewrites a system message into a user message and a repair result's id).
type relationEvent struct {
	typ string
	v   event.Value
}

// v2Relations is the relationship validation's state over one log.
type v2Relations struct {
	h       Header
	cut     int64 // the end of an inherited prefix
	n       int
	typeAt  func(i int) string
	eventAt func(i int) (relationEvent, error)

	openTurn, openStep jsv // a number or null
	openStepProvider   jsv // the open request/header's provider
	nextTurn, nextStep int64
	surface            []int64
	open               *compaction
	// stale: compaction/start seqs still open when an inherited prefix ends; they belong to the parent,
	// and the turn boundaries that follow them do not cross them
	stale       map[int64]bool
	keys        keyMaker
	tools       map[sameKey]*toolLifecycle
	toolOrder   []sameKey // insertion order, for the first unresolved call
	toolIDs     map[sameKey]jsv
	ptcRoots    map[sameKey]jsv
	ptcStarts   map[sameKey]*ptcStart
	retries     []event.Value
	retryStarts map[string]bool
	commandRuns map[sameKey]bool
}

// relationships runs the relationship validation over the accepted events. typeAt is event i's type as
// the validation names it; eventAt yields the event as the validation sees it, parsed on demand (titles
// and commands look events up by seq), and only for the types the validation interprets.
func relationships(h Header, cut int64, n int, typeAt func(i int) string, eventAt func(i int) (relationEvent, error)) error {
	r := newV2Relations(h, cut, n, typeAt, eventAt)
	for i := 0; i < n; i++ {
		if err := r.accept(i); err != nil {
			return err
		}
	}
	return nil
}

func newV2Relations(h Header, cut int64, n int, typeAt func(i int) string, eventAt func(i int) (relationEvent, error)) *v2Relations {
	r := &v2Relations{
		h: h, cut: cut, n: n, typeAt: typeAt, eventAt: eventAt,
		openTurn: jsNull, openStep: jsNull, openStepProvider: undefined, nextTurn: 1, nextStep: 1,
		stale: map[int64]bool{}, tools: map[sameKey]*toolLifecycle{}, toolIDs: map[sameKey]jsv{},
		ptcRoots: map[sameKey]jsv{}, ptcStarts: map[sameKey]*ptcStart{}, retryStarts: map[string]bool{},
		commandRuns: map[sameKey]bool{},
	}
	openStart := int64(-1)
	for i := 0; i < n; i++ {
		switch typeAt(i) {
		case "compaction/start":
			openStart = int64(i)
		case "compaction/end":
			openStart = -1
		case "session/end-seed":
			if openStart >= 0 {
				r.stale[openStart] = true
			}
			openStart = -1
		}
	}
	return r
}

// accept checks event i against the state so far and moves the state on.
func (r *v2Relations) accept(i int) error {
	typ, seq := r.typeAt(i), int64(i)
	stepEvent := typ == "assistant/attempt"
	if !isReleasedV0Type(typ) && !stepEvent {
		return nil
	}
	e, err := r.eventAt(i)
	if err != nil {
		return err
	}
	rec := jsv{v: e.v, ok: true}
	dv, _ := rec.prop("data")
	if !isObject(dv.v) || !dv.ok {
		return formatErr(typ + " " + itoa(seq) + " data must be a JSON object")
	}
	data := dv
	if event.IsSurfaceType(typ) {
		if r.surface, err = applySurface(r.surface, rec, typ, seq); err != nil {
			return err
		}
	}
	if (typ == "turn/start" || typ == "turn/end") && r.open != nil && !r.stale[r.open.startSeq] {
		return formatErr(typ + " crosses an open compaction")
	}
	if stepEvent {
		return r.requireOpenStep(typ, data)
	}
	op, _ := rec.prop("surfaceOp")
	switch typ {
	case "turn/start":
		return r.turnStart(data)
	case "turn/end":
		return r.turnEnd(data)
	case "step/start":
		return r.stepStart(data)
	case "step/end":
		return r.stepEnd(typ, data)
	case "assistant/chunk":
		return r.requireOpenStep(typ, data)
	case "assistant/message":
		return r.advertise(typ, seq, data)
	case "tool/call":
		return r.toolCall(typ, data)
	case "tool/result":
		return r.toolResult(typ, seq, rec, op, data)
	case "request/header", "request/context":
		return r.request(typ, data)
	case "tool/code-dispatch-start", "tool/code-dispatch":
		return r.dispatch(typ, data)
	case "llm/retry":
		return r.retry(data)
	case "llm/retry-started":
		return r.retryStarted(data)
	case "session/title", "session/title-llm-request":
		return r.titleSources(typ, seq, data)
	case "command/run":
		return r.commandRun(data)
	case "command/done":
		return r.commandDone(data)
	case "session-log-deepseek/delivery-accepted":
		return r.delivery(seq, data)
	case "compaction/start":
		return r.compactionStart(typ, seq, data)
	case "compaction/summary":
		return r.compactionSummary(typ, data)
	case "compaction/end":
		return r.compactionEnd(typ, data)
	case "compaction/prune":
		return r.span(data, typ)
	case "user/message":
		return r.userMessage(seq, op, data)
	case "session/end-seed":
		r.open = nil
	}
	return nil
}

func (r *v2Relations) clearTools() { clear(r.tools); r.toolOrder = r.toolOrder[:0]; clear(r.toolIDs) }

// unresolved refuses a boundary that leaves an advertised tool call without its result.
func (r *v2Relations) unresolved(boundary string) error {
	for _, k := range r.toolOrder {
		if _, ok := r.tools[k]; ok {
			return formatErr(boundary + " leaves unresolved tool call " + r.toolIDs[k].text())
		}
	}
	return nil
}

func (r *v2Relations) requireOpenStep(typ string, data jsv) error {
	turn, _ := data.prop("turn")
	step, _ := data.prop("step")
	if !turn.eq(r.openTurn) || !step.eq(r.openStep) || r.openTurn.isNull() || r.openStep.isNull() {
		return formatErr(typ + " does not match an open turn and step")
	}
	return nil
}

func (r *v2Relations) turnStart(data jsv) error {
	turn, _ := data.prop("turn")
	if !r.openTurn.isNull() || !turn.eq(num(r.nextTurn)) {
		return formatErr("turn/start " + turn.json() + " does not open expected turn " + itoa(r.nextTurn))
	}
	r.openTurn, r.openStep = turn, jsNull
	r.clearTools()
	r.nextStep = 1
	return nil
}

func (r *v2Relations) turnEnd(data jsv) error {
	turn, _ := data.prop("turn")
	if !r.openTurn.eq(turn) {
		return formatErr("turn/end " + turn.json() + " has no matching open turn")
	}
	if err := r.unresolved("turn/end"); err != nil {
		return err
	}
	if !r.openStep.isNull() {
		return formatErr("turn/end " + turn.json() + " crosses an open step")
	}
	r.openTurn = jsNull
	r.nextTurn++
	return nil
}

func (r *v2Relations) stepStart(data jsv) error {
	turn, _ := data.prop("turn")
	step, _ := data.prop("step")
	if !r.openTurn.eq(turn) || !r.openStep.isNull() || !step.eq(num(r.nextStep)) {
		return formatErr("step/start does not match the open turn and next step")
	}
	r.openStep = step
	return nil
}

func (r *v2Relations) stepEnd(typ string, data jsv) error {
	if err := r.requireOpenStep(typ, data); err != nil {
		return err
	}
	if err := r.unresolved("step/end"); err != nil {
		return err
	}
	r.clearTools()
	r.openStep = jsNull
	r.nextStep++
	return nil
}

// request notes a request's provider, which the step's retries must name.
func (r *v2Relations) request(typ string, data jsv) error {
	if r.openTurn.isNull() {
		return formatErr(typ + " is outside an open turn")
	}
	if typ == "request/header" {
		hdr, _ := data.prop("header")
		cfg, err := hdr.prop("config")
		if err != nil {
			return err
		}
		if r.openStepProvider, err = cfg.prop("provider"); err != nil {
			return err
		}
	}
	return nil
}
