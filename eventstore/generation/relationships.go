package generation

import (
	"strconv"
	"unicode/utf16"

	"github.com/dshfs/dshfs/eventstore/event"
)

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

// ClassTypeError marks a refusal where the harness's validation fails on a payload of the wrong shape
// with a JavaScript TypeError instead of a format error; the text is not the harness's.
const ClassTypeError ErrorClass = "TypeError"

func typeErr(what string) *FormatError {
	return &FormatError{Class: ClassTypeError, Message: "malformed payload: " + what}
}

// jsv is a JavaScript value read from JSON, where ok=false is undefined.
type jsv struct {
	v  event.Value
	ok bool
}

var (
	undefined = jsv{}
	jsNull    = jsv{ok: true}
)

func defined(v event.Value, ok bool) jsv { return jsv{v: v, ok: ok} }

func num(n int64) jsv { return jsv{v: event.Int(n), ok: true} }

func (x jsv) isNullish() bool { return !x.ok || x.v.Kind == event.KindNull }

// isNull is `x === null`.
func (x jsv) isNull() bool { return x.ok && x.v.Kind == event.KindNull }

// prop is `x[key]`: a TypeError on undefined and null, undefined for a missing member.
func (x jsv) prop(key string) (jsv, error) {
	if x.isNullish() {
		return undefined, typeErr("reading " + key + " of " + x.text())
	}
	switch x.v.Kind {
	case event.KindObject:
		v, ok := x.v.Get(key)
		return defined(v, ok), nil
	case event.KindArray:
		if key == "length" {
			return num(int64(len(x.v.Arr))), nil
		}
		if i, err := strconv.Atoi(key); err == nil && i >= 0 && i < len(x.v.Arr) && strconv.Itoa(i) == key {
			return jsv{v: x.v.Arr[i], ok: true}, nil
		}
	case event.KindString:
		units := utf16.Encode([]rune(x.v.Str))
		if key == "length" {
			return num(int64(len(units))), nil
		}
		if i, err := strconv.Atoi(key); err == nil && i >= 0 && i < len(units) && strconv.Itoa(i) == key {
			return jsv{v: event.String(string(utf16.Decode(units[i : i+1]))), ok: true}, nil
		}
	}
	return undefined, nil
}

// optProp is `x?.[key]`.
func (x jsv) optProp(key string) jsv {
	if x.isNullish() {
		return undefined
	}
	p, _ := x.prop(key)
	return p
}

// at is `x[i]` for an index.
func (x jsv) at(i int) (jsv, error) { return x.prop(strconv.Itoa(i)) }

func (x jsv) eq(y jsv) bool { return strictEqual(x.v, x.ok, y.v, y.ok) }

func (x jsv) isStr(s string) bool { return x.ok && x.v.Kind == event.KindString && x.v.Str == s }

// text is `${x}`.
func (x jsv) text() string { return jsString(x.v, x.ok) }

// json is `${JSON.stringify(x)}`: "undefined" for undefined.
func (x jsv) json() string {
	if !x.ok {
		return "undefined"
	}
	return string(event.Stringify(x.v))
}

// elements is what `for (const e of x)` iterates: an array's elements or a string's code points; a
// TypeError for anything else.
func (x jsv) elements(what string) ([]jsv, error) {
	switch {
	case x.ok && x.v.Kind == event.KindArray:
		out := make([]jsv, len(x.v.Arr))
		for i, e := range x.v.Arr {
			out[i] = jsv{v: e, ok: true}
		}
		return out, nil
	case x.ok && x.v.Kind == event.KindString:
		var out []jsv
		for _, r := range x.v.Str {
			out = append(out, jsv{v: event.String(string(r)), ok: true})
		}
		return out, nil
	}
	return nil, typeErr(what + " is not iterable")
}

// sameKey is a JS Map/Set key (SameValueZero): primitives by value; an object or array is a key of its
// own that no lookup finds.
type sameKey struct {
	kind event.Kind
	ok   bool
	s    string
	n    float64
	b    bool
	obj  int // distinct per container value; 0 for primitives
}

type keyMaker struct{ next int }

func (k *keyMaker) of(x jsv) sameKey {
	key := sameKey{kind: x.v.Kind, ok: x.ok}
	switch x.v.Kind {
	case event.KindString:
		key.s = x.v.Str
	case event.KindNumber:
		key.n = x.v.Num
	case event.KindBool:
		key.b = x.v.Bool
	case event.KindArray, event.KindObject:
		k.next++
		key.obj = k.next
	}
	if !x.ok {
		key.kind = event.KindNull
	}
	return key
}

// deepEqual is the harness's deepEqualJson: identical primitives, or containers of equal members.
func deepEqual(a, b jsv) bool {
	if a.eq(b) {
		return true
	}
	if !a.ok || !b.ok || a.v.Kind != b.v.Kind {
		return false
	}
	switch a.v.Kind {
	case event.KindArray:
		if len(a.v.Arr) != len(b.v.Arr) {
			return false
		}
		for i := range a.v.Arr {
			if !deepEqual(jsv{a.v.Arr[i], true}, jsv{b.v.Arr[i], true}) {
				return false
			}
		}
		return true
	case event.KindObject:
		if len(a.v.Obj) != len(b.v.Obj) {
			return false
		}
		for _, m := range a.v.Obj {
			y, ok := b.v.Get(m.Key)
			if !ok || !deepEqual(jsv{m.Value, true}, jsv{y, true}) {
				return false
			}
		}
		return true
	}
	return false
}

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

// relationships runs the relationship validation over the accepted events. typeAt is event i's type as
// the validation names it; eventAt yields the event as the validation sees it, parsed on demand (titles
// and commands look events up by seq), and only for the types the validation interprets.
func relationships(h Header, cut int64, n int, typeAt func(i int) string, eventAt func(i int) (relationEvent, error)) error {
	var (
		openTurn, openStep = jsNull, jsNull
		openStepProvider   = undefined
		nextTurn, nextStep = int64(1), int64(1)
		surface            []int64
		open               *compaction
		keys               keyMaker
		tools              = map[sameKey]*toolLifecycle{}
		toolOrder          []sameKey // insertion order, for the first unresolved call
		toolIDs            = map[sameKey]jsv{}
		ptcRoots           = map[sameKey]jsv{}
		ptcStarts          = map[sameKey]*ptcStart{}
		retries            []event.Value
		retryStarts        = map[string]bool{}
		commandRuns        = map[sameKey]bool{}
	)
	// A compaction still open when an inherited prefix ends belongs to the parent: the turn boundaries
	// that follow it do not cross it.
	stale := map[int64]bool{}
	openStart := int64(-1)
	for i := 0; i < n; i++ {
		switch typeAt(i) {
		case "compaction/start":
			openStart = int64(i)
		case "compaction/end":
			openStart = -1
		case "session/end-seed":
			if openStart >= 0 {
				stale[openStart] = true
			}
			openStart = -1
		}
	}
	clearTools := func() { clear(tools); toolOrder = toolOrder[:0]; clear(toolIDs) }
	unresolved := func(boundary string) error {
		for _, k := range toolOrder {
			if _, ok := tools[k]; ok {
				return formatErr(boundary + " leaves unresolved tool call " + toolIDs[k].text())
			}
		}
		return nil
	}
	requireOpenStep := func(typ string, data jsv) error {
		turn, _ := data.prop("turn")
		step, _ := data.prop("step")
		if !turn.eq(openTurn) || !step.eq(openStep) || openTurn.isNull() || openStep.isNull() {
			return formatErr(typ + " does not match an open turn and step")
		}
		return nil
	}
	span := func(data jsv, typ string) error {
		rng, _ := data.prop("shadowedRange")
		seqs, _ := data.prop("shadowedSeqs")
		rs, err := rng.prop("start")
		if err != nil {
			return err
		}
		re, err := rng.prop("end")
		if err != nil {
			return err
		}
		start, end := indexOf(surface, rs), indexOf(surface, re)
		var expected []int64
		if start >= 0 && end >= start {
			expected = surface[start : end+1]
		}
		length, err := seqs.prop("length")
		if err != nil {
			return err
		}
		if !length.eq(num(int64(len(expected)))) {
			return formatErr(typ + " shadowedSeqs do not name an exact current surface span")
		}
		for i, s := range expected {
			x, _ := seqs.at(i)
			if !x.eq(num(s)) {
				return formatErr(typ + " shadowedSeqs do not name an exact current surface span")
			}
		}
		return nil
	}
	owner := func(data jsv, typ string) error {
		id, _ := data.prop("compactionId")
		src, _ := data.prop("sourceCommandId")
		if open == nil || !id.eq(open.id) || !src.eq(open.sourceCommandID) {
			return formatErr(typ + " has no matching compaction/start")
		}
		return nil
	}
	ownerTurn := func(turn jsv, typ string) error {
		var bad bool
		if turn.isNull() {
			bad = !openTurn.isNull()
		} else {
			bad = !turn.eq(openTurn)
		}
		if bad {
			return formatErr(typ + " does not match the open turn")
		}
		return nil
	}

	for i := 0; i < n; i++ {
		typ, seq := typeAt(i), int64(i)
		stepEvent := typ == "assistant/attempt"
		if !isReleasedV0Type(typ) && !stepEvent {
			continue
		}
		e, err := eventAt(i)
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
			if surface, err = applySurface(surface, rec, typ, seq); err != nil {
				return err
			}
		}
		if (typ == "turn/start" || typ == "turn/end") && open != nil && !stale[open.startSeq] {
			return formatErr(typ + " crosses an open compaction")
		}
		if stepEvent {
			if err := requireOpenStep(typ, data); err != nil {
				return err
			}
			continue
		}
		op, _ := rec.prop("surfaceOp")
		switch typ {
		case "turn/start":
			turn, _ := data.prop("turn")
			if !openTurn.isNull() || !turn.eq(num(nextTurn)) {
				return formatErr("turn/start " + turn.json() + " does not open expected turn " + itoa(nextTurn))
			}
			openTurn, openStep = turn, jsNull
			clearTools()
			nextStep = 1
		case "turn/end":
			turn, _ := data.prop("turn")
			if !openTurn.eq(turn) {
				return formatErr("turn/end " + turn.json() + " has no matching open turn")
			}
			if err := unresolved("turn/end"); err != nil {
				return err
			}
			if !openStep.isNull() {
				return formatErr("turn/end " + turn.json() + " crosses an open step")
			}
			openTurn = jsNull
			nextTurn++
		case "step/start":
			turn, _ := data.prop("turn")
			step, _ := data.prop("step")
			if !openTurn.eq(turn) || !openStep.isNull() || !step.eq(num(nextStep)) {
				return formatErr("step/start does not match the open turn and next step")
			}
			openStep = step
		case "step/end":
			if err := requireOpenStep(typ, data); err != nil {
				return err
			}
			if err := unresolved("step/end"); err != nil {
				return err
			}
			clearTools()
			openStep = jsNull
			nextStep++
		case "assistant/chunk":
			if err := requireOpenStep(typ, data); err != nil {
				return err
			}
		case "assistant/message":
			if err := requireOpenStep(typ, data); err != nil {
				return err
			}
			msg, _ := data.prop("message")
			if !msg.ok || !isObject(msg.v) {
				return formatErr("assistant/message " + itoa(seq) + " message must be a JSON object")
			}
			content, _ := msg.prop("content")
			blocks, err := content.elements("assistant message content")
			if err != nil {
				return err
			}
			for _, b := range blocks {
				bt, err := b.prop("type")
				if err != nil {
					return err
				}
				if !bt.isStr("tool-call") {
					continue
				}
				id, _ := b.prop("id")
				k := keys.of(id)
				if _, dup := tools[k]; dup {
					return formatErr("assistant/message repeats advertised tool call " + id.text())
				}
				name, _ := b.prop("name")
				args, _ := b.prop("arguments")
				tools[k] = &toolLifecycle{name: name, arguments: args}
				toolOrder = append(toolOrder, k)
				toolIDs[k] = id
			}
		case "tool/call":
			if err := requireOpenStep(typ, data); err != nil {
				return err
			}
			id, _ := data.prop("callId")
			name, _ := data.prop("name")
			args, _ := data.prop("arguments")
			l := tools[keys.of(id)]
			if l == nil || l.started || !l.name.eq(name) || !l.arguments.eq(args) {
				return formatErr("tool/call " + id.text() + " does not match one advertised tool call")
			}
			l.started = true
		case "tool/result":
			if op.isStr("append") {
				if err := requireOpenStep(typ, data); err != nil {
					return err
				}
				msg, _ := data.prop("message")
				if !msg.ok || !isObject(msg.v) {
					return formatErr("tool/result " + itoa(seq) + " message must be a JSON object")
				}
				src, _ := msg.prop("source")
				if !src.ok || !isObject(src.v) {
					return formatErr("tool/result " + itoa(seq) + " source must be a JSON object")
				}
				id, _ := src.prop("callId")
				content, _ := msg.prop("content")
				errv, _ := data.prop("error")
				if errv.ok && !isObject(errv.v) {
					return formatErr("tool/result " + itoa(seq) + " error must be a JSON object")
				}
				k := keys.of(id)
				l := tools[k]
				if l == nil {
					return formatErr("tool/result " + id.text() + " has no advertised tool lifecycle")
				}
				if !l.started {
					repair, err := exactRepair(rec, msg, id, content, errv, seq)
					if err != nil {
						return err
					}
					if !repair {
						return formatErr("tool/result " + id.text() + " is not the exact TOOL_NOT_STARTED repair")
					}
				}
				delete(tools, k)
			} else if openTurn.isNull() {
				return formatErr("tool/result replacement is outside an open turn")
			}
		case "request/header", "request/context":
			if openTurn.isNull() {
				return formatErr(typ + " is outside an open turn")
			}
			if typ == "request/header" {
				hdr, _ := data.prop("header")
				cfg, err := hdr.prop("config")
				if err != nil {
					return err
				}
				if openStepProvider, err = cfg.prop("provider"); err != nil {
					return err
				}
			}
		case "tool/code-dispatch-start", "tool/code-dispatch":
			if openTurn.isNull() {
				return formatErr(typ + " is outside an open turn")
			}
			root, _ := data.prop("rootCallId")
			parent, _ := data.prop("parentCallId")
			child, _ := data.prop("subCallId")
			ck := keys.of(child)
			if known, ok := ptcRoots[ck]; ok && !known.eq(root) {
				return formatErr(typ + " changes its rootCallId")
			}
			if !parent.eq(root) {
				if r, ok := ptcRoots[keys.of(parent)]; !ok || !r.eq(root) {
					return formatErr(typ + " parentCallId does not belong to rootCallId")
				}
			}
			name, _ := data.prop("name")
			args, _ := data.prop("arguments")
			if typ == "tool/code-dispatch-start" {
				if _, dup := ptcStarts[ck]; dup {
					return formatErr("tool/code-dispatch-start repeats subCallId")
				}
				ptcStarts[ck] = &ptcStart{root: root, parent: parent, name: name, arguments: args}
			} else {
				s := ptcStarts[ck]
				if s == nil || s.settled {
					return formatErr("tool/code-dispatch has no unique start")
				}
				if !s.root.eq(root) || !s.parent.eq(parent) || !s.name.eq(name) || !deepEqual(s.arguments, args) {
					return formatErr("tool/code-dispatch does not match its start")
				}
				s.settled = true
			}
			ptcRoots[ck] = root
		case "llm/retry":
			turn, _ := data.prop("turn")
			step, _ := data.prop("step")
			current := openStep
			if current.isNullish() {
				current = num(nextStep - 1)
			}
			if !openTurn.eq(turn) || !step.eq(current) || openTurn.isNull() {
				return formatErr("llm/retry does not match the current turn and step")
			}
			if p, _ := data.prop("provider"); !p.eq(openStepProvider) {
				return formatErr("llm/retry provider does not match the open request/header")
			}
			if err := retryChain(retries, data); err != nil {
				return err
			}
			retries = append(retries, data.v)
		case "llm/retry-started":
			id, _ := data.prop("retryId")
			try, _ := data.prop("retry")
			var prior *jsv
			for _, r := range retries {
				c := jsv{r, true}
				if c.optProp("retryId").eq(id) && c.optProp("retry").eq(try) {
					prior = &c
					break
				}
			}
			if prior == nil {
				return formatErr("llm/retry-started pairs no prior scheduled attempt")
			}
			turn, _ := data.prop("turn")
			step, _ := data.prop("step")
			if !prior.optProp("turn").eq(turn) || !prior.optProp("step").eq(step) {
				return formatErr("llm/retry-started does not match its scheduled turn and step")
			}
			key := id.json() + "\x00" + try.json()
			if retryStarts[key] {
				return formatErr("llm/retry-started repeats one scheduled attempt")
			}
			retryStarts[key] = true
		case "session/title", "session/title-llm-request":
			if err := titleSources(typ, seq, data, n, typeAt, eventAt); err != nil {
				return err
			}
		case "command/run":
			id, _ := data.prop("commandId")
			k := keys.of(id)
			if commandRuns[k] {
				return formatErr("command/run repeats commandId " + id.text())
			}
			commandRuns[k] = true
		case "command/done":
			id, _ := data.prop("commandId")
			if !commandRuns[keys.of(id)] {
				return formatErr("command/done " + id.text() + " has no prior command/run")
			}
			if src, _ := data.prop("sourceEventSeq"); src.ok {
				kind, _ := data.prop("kind")
				var srcType string
				if j, ok := eventIndex(src, n); ok {
					srcType = typeAt(j)
				}
				if !kind.isStr("success") || srcType == "command/run" || srcType == "command/done" {
					return formatErr("command/done " + id.text() + " has invalid sourceEventSeq")
				}
			}
		case "session-log-deepseek/delivery-accepted":
			ver, _ := data.prop("sessionFormatVersion")
			if ver.isNullish() {
				ver = num(0)
			}
			// the relationship view's header is always version 2
			if ver.eq(num(2)) {
				inherited := h.ParentSession != nil && seq < cut
				if sid, _ := data.prop("sessionId"); !inherited && !sid.isStr(h.ID) {
					return formatErr("current-generation delivery marker names the wrong Session")
				}
			}
		case "compaction/start":
			if open != nil {
				return formatErr("compaction/start overlaps an open compaction")
			}
			turn, _ := data.prop("turn")
			if err := ownerTurn(turn, typ); err != nil {
				return err
			}
			id, _ := data.prop("compactionId")
			src, _ := data.prop("sourceCommandId")
			open = &compaction{id: id, sourceCommandID: src, turn: turn, startSeq: seq}
		case "compaction/summary":
			if err := owner(data, typ); err != nil {
				return err
			}
			if err := ownerTurn(open.turn, typ); err != nil {
				return err
			}
			if open.summarized {
				return formatErr("compaction/summary repeats")
			}
			if err := span(data, typ); err != nil {
				return err
			}
			open.summarized = true
		case "compaction/end":
			if err := owner(data, typ); err != nil {
				return err
			}
			if turn, _ := data.prop("turn"); !turn.eq(open.turn) {
				return formatErr("compaction/end changes its owner turn")
			}
			if err := ownerTurn(open.turn, typ); err != nil {
				return err
			}
			if errv, _ := data.prop("error"); !errv.ok && !open.summarized {
				return formatErr("successful compaction/end requires one summary")
			}
			open = nil
		case "compaction/prune":
			if err := span(data, typ); err != nil {
				return err
			}
		case "user/message":
			src, _ := data.prop("source")
			if !src.ok || !isObject(src.v) {
				return formatErr("user/message " + itoa(seq) + " source must be a JSON object")
			}
			if !op.isStr("append") && src.optProp("kind").isStr("plugin") && src.optProp("plugin").isStr("compact") {
				if err := owner(src, "compaction checkpoint at seq "+itoa(seq)); err != nil {
					return err
				}
			}
		case "session/end-seed":
			open = nil
		}
	}
	return nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// indexOf is Array.prototype.indexOf over surface seqs (=== comparison).
func indexOf(surface []int64, x jsv) int {
	if !x.ok || x.v.Kind != event.KindNumber {
		return -1
	}
	for i, s := range surface {
		if float64(s) == x.v.Num {
			return i
		}
	}
	return -1
}

// eventIndex is the event `events[x]` names, if any.
func eventIndex(x jsv, n int) (int, bool) {
	if !x.ok {
		return 0, false
	}
	var key string
	switch x.v.Kind {
	case event.KindNumber:
		key = event.FormatNumber(x.v.Num)
	case event.KindString:
		key = x.v.Str
	default:
		key = x.text()
	}
	i, err := strconv.Atoi(key)
	if err != nil || i < 0 || i >= n || strconv.Itoa(i) != key {
		return 0, false
	}
	return i, true
}

// applySurface moves the surface by one surface event: an append adds it, a replacement swaps the span
// between its endpoints (surface order) for it and must cite every node it shadows.
func applySurface(surface []int64, rec jsv, typ string, seq int64) ([]int64, error) {
	op, _ := rec.prop("surfaceOp")
	if !op.ok {
		return nil, formatErr(typ + " requires a surfaceOp marker")
	}
	if op.isStr("append") {
		return append(surface, seq), nil
	}
	rs, err := op.prop("start")
	if err != nil {
		return nil, err
	}
	re, err := op.prop("end")
	if err != nil {
		return nil, err
	}
	start, end := indexOf(surface, rs), indexOf(surface, re)
	if start < 0 || end < start {
		return nil, formatErr(typ + " replacement range is not on the current surface")
	}
	src, _ := rec.prop("sourceEventSeqs")
	for _, s := range surface[start : end+1] {
		cited := false
		if src.ok && src.v.Kind == event.KindArray {
			for _, x := range src.v.Arr {
				if x.Kind == event.KindNumber && x.Num == float64(s) {
					cited = true
					break
				}
			}
		}
		if !cited {
			return nil, formatErr(typ + " replacement sourceEventSeqs omit a shadowed surface node")
		}
	}
	out := make([]int64, 0, len(surface)-(end-start))
	out = append(out, surface[:start]...)
	out = append(out, seq)
	return append(out, surface[end+1:]...), nil
}

// repairText is the content of the harness's TOOL_NOT_STARTED repair result.
const repairText = "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."

// exactRepair reports whether a result for a call that never started is the harness's exact repair.
func exactRepair(rec, msg, callID, content, errv jsv, seq int64) (bool, error) {
	block, err := content.at(0)
	if err != nil {
		return false, err
	}
	inner := block.optProp("content")
	if !errv.optProp("name").isStr("ToolNotStartedError") || !errv.optProp("code").isStr("TOOL_NOT_STARTED") {
		return false, nil
	}
	if src, _ := rec.prop("sourceEventSeqs"); src.ok {
		return false, nil
	}
	if id, _ := msg.prop("id"); !id.isStr("interrupted-tool-result-" + callID.text() + "-" + itoa(seq)) {
		return false, nil
	}
	if !block.optProp("isError").eq(jsv{event.Bool(true), true}) || !inner.optProp("length").eq(num(1)) {
		return false, nil
	}
	first := inner.optProp("0")
	return first.optProp("type").isStr("text") && first.optProp("text").isStr(repairText), nil
}

// retryChain checks one scheduled retry against the earlier ones of its policy chain (same turn, step,
// provider and policy key): numbered on from the last, under the same retry id; a new chain's id unused.
func retryChain(retries []event.Value, data jsv) error {
	var prior *jsv
	for i := len(retries) - 1; i >= 0; i-- {
		c := jsv{retries[i], true}
		same := true
		for _, k := range []string{"turn", "step", "provider", "policyKey"} {
			x, _ := data.prop(k)
			if !c.optProp(k).eq(x) {
				same = false
				break
			}
		}
		if same {
			prior = &c
			break
		}
	}
	expected := num(1)
	expectedText := "1"
	if prior != nil {
		switch r := prior.optProp("retry"); {
		case r.ok && r.v.Kind == event.KindNumber:
			expected = jsv{event.Number(r.v.Num + 1), true}
			expectedText = event.FormatNumber(r.v.Num + 1)
		case r.ok && r.v.Kind == event.KindString: // `+ 1` concatenates
			expected = jsv{event.String(r.v.Str + "1"), true}
			expectedText = r.v.Str + "1"
		case r.ok && r.v.Kind != event.KindNull:
			return typeErr("llm/retry retry is not a number")
		}
	}
	id, _ := data.prop("retryId")
	if try, _ := data.prop("retry"); !try.eq(expected) {
		return formatErr("llm/retry must use retry " + expectedText)
	}
	if prior != nil && !prior.optProp("retryId").eq(id) {
		return formatErr("llm/retry must preserve retryId across one policy chain")
	}
	if prior == nil {
		for _, r := range retries {
			if (jsv{r, true}).optProp("retryId").eq(id) {
				return formatErr("llm/retry reuses retryId " + id.json() + " across policy chains")
			}
		}
	}
	return nil
}

// titleSources checks a title's messageSeqs: empty exactly for a user-given title, and otherwise naming
// human user messages; a title request must frame them as one plugin user message of one text block.
// (v2 preserves the framed text as written, so the text itself is not compared.)
func titleSources(typ string, seq int64, data jsv, n int, typeAt func(int) string, eventAt func(int) (relationEvent, error)) error {
	seqs, _ := data.prop("messageSeqs")
	if typ == "session/title" {
		src, _ := data.prop("source")
		if !src.ok || !isObject(src.v) {
			return formatErr("session/title " + itoa(seq) + " source must be a JSON object")
		}
		length, err := seqs.prop("length")
		if err != nil {
			return err
		}
		if length.eq(num(0)) != src.optProp("kind").isStr("user") {
			return formatErr("session/title " + itoa(seq) + " messageSeqs must be empty exactly for a user title")
		}
	}
	cited, err := seqs.elements("messageSeqs")
	if err != nil {
		return err
	}
	notHuman := formatErr(typ + " " + itoa(seq) + " messageSeqs must cite earlier human user/message events")
	for _, c := range cited {
		j, ok := eventIndex(c, n)
		if !ok || typeAt(j) != "user/message" {
			return notHuman
		}
		s, err := eventAt(j)
		if err != nil {
			return err
		}
		sd := (jsv{s.v, true}).optProp("data")
		if !sd.ok || !isObject(sd.v) {
			return formatErr(s.typ + " " + c.text() + " data must be a JSON object")
		}
		ss := sd.optProp("source")
		if !ss.ok || !isObject(ss.v) {
			return formatErr(s.typ + " " + c.text() + " source must be a JSON object")
		}
		if !ss.optProp("kind").isStr("user") {
			return notHuman
		}
		content := sd.optProp("content")
		if !content.ok || content.v.Kind != event.KindArray {
			return typeErr("user/message content is not an array")
		}
	}
	if typ != "session/title-llm-request" {
		return nil
	}
	msgs, _ := data.prop("messages")
	first, err := msgs.at(0)
	if err != nil {
		return err
	}
	content := first.optProp("content")
	var source jsv
	if first.ok {
		source = first.optProp("source")
		if !source.ok || !isObject(source.v) {
			return formatErr("session/title-llm-request message source must be a JSON object")
		}
	}
	bad := formatErr("session/title-llm-request messages do not represent messageSeqs")
	if length, _ := msgs.prop("length"); !length.eq(num(1)) || !first.optProp("role").isStr("user") ||
		!content.optProp("length").eq(num(1)) || !source.optProp("kind").isStr("plugin") ||
		!source.optProp("plugin").isStr("dsh-session-title-llm") {
		return bad
	}
	framed, err := content.at(0)
	if err != nil {
		return err
	}
	if !framed.ok || !framed.optProp("type").isStr("text") {
		return bad
	}
	return nil
}
