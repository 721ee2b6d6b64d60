package generation

import (
	"strconv"

	"github.com/dshfs/dshfs/eventstore/event"
)

// The lifecycle relationships that span a log beyond its turns and steps: the tools a developer message
// adds, PTC dispatches, retry chains, compactions and the spans they shadow, and titles.

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
