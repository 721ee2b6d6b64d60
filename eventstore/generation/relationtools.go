package generation

import "github.com/dshfs/dshfs/eventstore/event"

// The v2/v3 relationships of tool calls (advertised by an assistant message, started, settled by a
// result or the harness's exact repair), of PTC dispatches and their starts, and of retry chains.

// advertise records the tool calls an assistant message advertises.
func (r *v2Relations) advertise(typ string, seq int64, data jsv) error {
	if err := r.requireOpenStep(typ, data); err != nil {
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
		k := r.keys.of(id)
		if _, dup := r.tools[k]; dup {
			return formatErr("assistant/message repeats advertised tool call " + id.text())
		}
		name, _ := b.prop("name")
		args, _ := b.prop("arguments")
		r.tools[k] = &toolLifecycle{name: name, arguments: args}
		r.toolOrder = append(r.toolOrder, k)
		r.toolIDs[k] = id
	}
	return nil
}

func (r *v2Relations) toolCall(typ string, data jsv) error {
	if err := r.requireOpenStep(typ, data); err != nil {
		return err
	}
	id, _ := data.prop("callId")
	name, _ := data.prop("name")
	args, _ := data.prop("arguments")
	l := r.tools[r.keys.of(id)]
	if l == nil || l.started || !l.name.eq(name) || !l.arguments.eq(args) {
		return formatErr("tool/call " + id.text() + " does not match one advertised tool call")
	}
	l.started = true
	return nil
}

// toolResult settles an advertised call with an appended result; a replacement only needs an open turn.
func (r *v2Relations) toolResult(typ string, seq int64, rec, op, data jsv) error {
	if !op.isStr("append") {
		if r.openTurn.isNull() {
			return formatErr("tool/result replacement is outside an open turn")
		}
		return nil
	}
	if err := r.requireOpenStep(typ, data); err != nil {
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
	k := r.keys.of(id)
	l := r.tools[k]
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
	delete(r.tools, k)
	return nil
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

// dispatch pairs a PTC dispatch with its start and keeps every sub-call under one root.
func (r *v2Relations) dispatch(typ string, data jsv) error {
	if r.openTurn.isNull() {
		return formatErr(typ + " is outside an open turn")
	}
	root, _ := data.prop("rootCallId")
	parent, _ := data.prop("parentCallId")
	child, _ := data.prop("subCallId")
	ck := r.keys.of(child)
	if known, ok := r.ptcRoots[ck]; ok && !known.eq(root) {
		return formatErr(typ + " changes its rootCallId")
	}
	if !parent.eq(root) {
		if rt, ok := r.ptcRoots[r.keys.of(parent)]; !ok || !rt.eq(root) {
			return formatErr(typ + " parentCallId does not belong to rootCallId")
		}
	}
	name, _ := data.prop("name")
	args, _ := data.prop("arguments")
	if typ == "tool/code-dispatch-start" {
		if _, dup := r.ptcStarts[ck]; dup {
			return formatErr("tool/code-dispatch-start repeats subCallId")
		}
		r.ptcStarts[ck] = &ptcStart{root: root, parent: parent, name: name, arguments: args}
	} else {
		s := r.ptcStarts[ck]
		if s == nil || s.settled {
			return formatErr("tool/code-dispatch has no unique start")
		}
		if !s.root.eq(root) || !s.parent.eq(parent) || !s.name.eq(name) || !deepEqual(s.arguments, args) {
			return formatErr("tool/code-dispatch does not match its start")
		}
		s.settled = true
	}
	r.ptcRoots[ck] = root
	return nil
}

// retry checks a scheduled retry against the current step and its request's provider, then its chain.
func (r *v2Relations) retry(data jsv) error {
	turn, _ := data.prop("turn")
	step, _ := data.prop("step")
	current := r.openStep
	if current.isNullish() {
		current = num(r.nextStep - 1)
	}
	if !r.openTurn.eq(turn) || !step.eq(current) || r.openTurn.isNull() {
		return formatErr("llm/retry does not match the current turn and step")
	}
	if p, _ := data.prop("provider"); !p.eq(r.openStepProvider) {
		return formatErr("llm/retry provider does not match the open request/header")
	}
	if err := retryChain(r.retries, data); err != nil {
		return err
	}
	r.retries = append(r.retries, data.v)
	return nil
}

// retryStarted pairs a started retry with one scheduled attempt, once.
func (r *v2Relations) retryStarted(data jsv) error {
	id, _ := data.prop("retryId")
	try, _ := data.prop("retry")
	var prior *jsv
	for _, rv := range r.retries {
		c := jsv{rv, true}
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
	if r.retryStarts[key] {
		return formatErr("llm/retry-started repeats one scheduled attempt")
	}
	r.retryStarts[key] = true
	return nil
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
