package generation

import "github.com/dshfs/dshfs/eventstore/event"

// The v2/v3 relationships that span a log beyond its turns and tools: commands that run before they
// finish, current-generation delivery markers, compactions that own their turn and name exact surface
// spans, the surface every replacement must cover, and titles that cite human messages.

func (r *v2Relations) commandRun(data jsv) error {
	id, _ := data.prop("commandId")
	k := r.keys.of(id)
	if r.commandRuns[k] {
		return formatErr("command/run repeats commandId " + id.text())
	}
	r.commandRuns[k] = true
	return nil
}

func (r *v2Relations) commandDone(data jsv) error {
	id, _ := data.prop("commandId")
	if !r.commandRuns[r.keys.of(id)] {
		return formatErr("command/done " + id.text() + " has no prior command/run")
	}
	if src, _ := data.prop("sourceEventSeq"); src.ok {
		kind, _ := data.prop("kind")
		var srcType string
		if j, ok := eventIndex(src, r.n); ok {
			srcType = r.typeAt(j)
		}
		if !kind.isStr("success") || srcType == "command/run" || srcType == "command/done" {
			return formatErr("command/done " + id.text() + " has invalid sourceEventSeq")
		}
	}
	return nil
}

// delivery checks that a current-generation delivery marker outside an inherited prefix names this
// session.
func (r *v2Relations) delivery(seq int64, data jsv) error {
	ver, _ := data.prop("sessionFormatVersion")
	if ver.isNullish() {
		ver = num(0)
	}
	// the relationship view's header is always version 2
	if ver.eq(num(2)) {
		inherited := r.h.ParentSession != nil && seq < r.cut
		if sid, _ := data.prop("sessionId"); !inherited && !sid.isStr(r.h.ID) {
			return formatErr("current-generation delivery marker names the wrong Session")
		}
	}
	return nil
}

func (r *v2Relations) compactionStart(typ string, seq int64, data jsv) error {
	if r.open != nil {
		return formatErr("compaction/start overlaps an open compaction")
	}
	turn, _ := data.prop("turn")
	if err := r.ownerTurn(turn, typ); err != nil {
		return err
	}
	id, _ := data.prop("compactionId")
	src, _ := data.prop("sourceCommandId")
	r.open = &compaction{id: id, sourceCommandID: src, turn: turn, startSeq: seq}
	return nil
}

func (r *v2Relations) compactionSummary(typ string, data jsv) error {
	if err := r.owner(data, typ); err != nil {
		return err
	}
	if err := r.ownerTurn(r.open.turn, typ); err != nil {
		return err
	}
	if r.open.summarized {
		return formatErr("compaction/summary repeats")
	}
	if err := r.span(data, typ); err != nil {
		return err
	}
	r.open.summarized = true
	return nil
}

func (r *v2Relations) compactionEnd(typ string, data jsv) error {
	if err := r.owner(data, typ); err != nil {
		return err
	}
	if turn, _ := data.prop("turn"); !turn.eq(r.open.turn) {
		return formatErr("compaction/end changes its owner turn")
	}
	if err := r.ownerTurn(r.open.turn, typ); err != nil {
		return err
	}
	if errv, _ := data.prop("error"); !errv.ok && !r.open.summarized {
		return formatErr("successful compaction/end requires one summary")
	}
	r.open = nil
	return nil
}

// userMessage checks that a compaction checkpoint (a replacing plugin message of the compact plugin)
// belongs to the open compaction.
func (r *v2Relations) userMessage(seq int64, op, data jsv) error {
	src, _ := data.prop("source")
	if !src.ok || !isObject(src.v) {
		return formatErr("user/message " + itoa(seq) + " source must be a JSON object")
	}
	if !op.isStr("append") && src.optProp("kind").isStr("plugin") && src.optProp("plugin").isStr("compact") {
		if err := r.owner(src, "compaction checkpoint at seq "+itoa(seq)); err != nil {
			return err
		}
	}
	return nil
}

// owner refuses an event that does not name the open compaction and its command.
func (r *v2Relations) owner(data jsv, typ string) error {
	id, _ := data.prop("compactionId")
	src, _ := data.prop("sourceCommandId")
	if r.open == nil || !id.eq(r.open.id) || !src.eq(r.open.sourceCommandID) {
		return formatErr(typ + " has no matching compaction/start")
	}
	return nil
}

// ownerTurn refuses a compaction event whose turn is not the open one (null: outside any turn).
func (r *v2Relations) ownerTurn(turn jsv, typ string) error {
	var bad bool
	if turn.isNull() {
		bad = !r.openTurn.isNull()
	} else {
		bad = !turn.eq(r.openTurn)
	}
	if bad {
		return formatErr(typ + " does not match the open turn")
	}
	return nil
}

// span refuses shadowedSeqs that are not the exact current surface span of shadowedRange.
func (r *v2Relations) span(data jsv, typ string) error {
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
	start, end := indexOf(r.surface, rs), indexOf(r.surface, re)
	var expected []int64
	if start >= 0 && end >= start {
		expected = r.surface[start : end+1]
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

// titleSources checks a title's messageSeqs: empty exactly for a user-given title, and otherwise naming
// human user messages; a title request must frame them as one plugin user message of one text block.
// (v2 preserves the framed text as written, so the text itself is not compared.)
func (r *v2Relations) titleSources(typ string, seq int64, data jsv) error {
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
		j, ok := eventIndex(c, r.n)
		if !ok || r.typeAt(j) != "user/message" {
			return notHuman
		}
		s, err := r.eventAt(j)
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
