package event

import (
	"strconv"
)

// Packed chunk rows (docs/harness.md#packed-chunk-rows, the harness's chunk-rows.ts) are a storage encoding, not events:
// a run of consecutive streaming-delta assistant/chunk events is stored as one `text-chunks`,
// `reasoning-chunks` or `tool-call-chunks` line and expanded back on read.

// Row type tags.
const (
	TagTextChunks      = "text-chunks"
	TagReasoningChunks = "reasoning-chunks"
	TagToolCallChunks  = "tool-call-chunks"
)

// MinRun is the smallest run the harness packs; shorter runs stay one event per line. A format constant:
// the decoder accepts rows of any length.
const MinRun = 3

// MalformedRowError is the harness's "malformed <tag> storage row: <why>", which its scanner reports as an
// unparsable committed line.
type MalformedRowError struct {
	Tag string
	Why string
}

// Error is the harness's exact diagnostic text.
func (e *MalformedRowError) Error() string { return "malformed " + e.Tag + " storage row: " + e.Why }

// IsRowTag reports whether a type tag marks a packed chunk row.
func IsRowTag(t string) bool {
	return t == TagTextChunks || t == TagReasoningChunks || t == TagToolCallChunks
}

// DecodeStored decodes one stored line (already canonical) into the events it stores: a `text-chunks`,
// `reasoning-chunks` or `tool-call-chunks` row is validated and expanded (failure: *MalformedRowError with
// the harness's texts); anything else is one event, unvalidated. row reports whether the line was a
// chunk row. A row's members are
// records Expand wrote, {type:"assistant/chunk", seq, time, data:{turn, step, chunk}}, and every member's
// time is a safe integer (the row was validated); a member's seq is safe when its Seq is not -1.
func DecodeStored(raw []byte) (events []Event, row bool, err error) {
	return AppendStored(nil, raw, nil)
}

// RowScratch is the memory fastRow reuses from one row to the next: a decoder of many rows keeps one per
// goroutine, so that reading a row allocates nothing but its members' records.
type RowScratch struct {
	dt     []float64
	quoted [][]byte
}

// Release lets go of the rows sc was last used on (a run's tokens alias its row's line), for a scratch kept
// for later rows, say in a pool, that must not keep an old row's text alive.
func (sc *RowScratch) Release() { clear(sc.quoted[:cap(sc.quoted)]) }

// AppendStored is DecodeStored appending the line's events to dst. sc, when not nil, is the caller's
// RowScratch for the rows it decodes one after another.
func AppendStored(dst []Event, raw []byte, sc *RowScratch) (events []Event, row bool, err error) {
	ev := trustedEvent(raw)
	if !IsRowTag(ev.Type) {
		return append(dst, ev), false, nil
	}
	if sc == nil {
		sc = &RowScratch{}
	}
	if run, ok := fastRow(raw, ev.Type, sc); ok {
		return run.AppendExpand(dst), true, nil
	}
	v, err := Parse(raw)
	if err != nil {
		return dst, false, err
	}
	expanded, err := expandRow(v, ev.Type)
	if err != nil {
		return dst, false, err
	}
	return append(dst, expanded...), true, nil
}

// fastRow reads a valid chunk row laid out as the harness's encoder writes it — {type, seq0, time0,
// data:{turn, step, index, dt, [id, [name,]] texts|args}}, canonical — straight into its run, without
// building a tree of its members (the rows are most of a large log, and the tree was the largest part of
// what loading one allocated). It returns ok only for a row expandRow accepts, with the run expandRow
// builds (TestFastRowAgreesWithExpandRow); any other layout, and any row expandRow refuses, takes the
// general path, which says what is wrong in the harness's words.
//
// raw must be canonical (the scanner's lines are): a member's string token is then exactly what
// JSON.stringify writes for its text, so the run keeps the tokens and Expand copies them instead of
// decoding each text and quoting it again. The run's DT and tokens live in sc until its next row.
func fastRow(raw []byte, tag string, sc *RowScratch) (ChunkRun, bool) {
	p := getParser(parser{s: raw})
	defer putParser(p)
	lit := func(l string) bool {
		if len(p.s)-p.i < len(l) || string(p.s[p.i:p.i+len(l)]) != l {
			return false
		}
		p.i += len(l)
		return true
	}
	num := func() (float64, bool) {
		if p.i >= len(p.s) || (p.s[p.i] != '-' && (p.s[p.i] < '0' || p.s[p.i] > '9')) {
			return 0, false
		}
		n, err := p.number()
		return n, err == nil
	}
	str := func() (string, bool) {
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return "", false
		}
		s, err := p.str()
		return s, err == nil
	}
	run := ChunkRun{Tag: tag, DT: sc.dt[:0]}
	defer func() { sc.dt = run.DT[:0] }()
	var turn, step, index float64
	ok := lit(`{"type":"`) && lit(tag) && lit(`","seq0":`)
	ok = ok && func() (ok bool) { run.Seq0, ok = num(); return }() && lit(`,"time0":`)
	ok = ok && func() (ok bool) { run.Time0, ok = num(); return }() && lit(`,"data":{"turn":`)
	ok = ok && func() (ok bool) { turn, ok = num(); return }() && lit(`,"step":`)
	ok = ok && func() (ok bool) { step, ok = num(); return }() && lit(`,"index":`)
	ok = ok && func() (ok bool) { index, ok = num(); return }() && lit(`,"dt":[`)
	if !ok {
		return ChunkRun{}, false
	}
	for !lit("]") {
		if len(run.DT) > 0 && !lit(",") {
			return ChunkRun{}, false
		}
		g, ok := num()
		if !ok || !IsSafeInteger(g) {
			return ChunkRun{}, false
		}
		run.DT = append(run.DT, g)
	}
	payload := `,"texts":[`
	if tag == TagToolCallChunks {
		payload = `,"args":[`
		if !lit(`,"id":`) {
			return ChunkRun{}, false
		}
		if run.ID, ok = str(); !ok {
			return ChunkRun{}, false
		}
		if lit(`,"name":`) {
			run.HasName = true
			if run.Name, ok = str(); !ok {
				return ChunkRun{}, false
			}
		}
	}
	if !lit(payload) {
		return ChunkRun{}, false
	}
	run.quoted = sc.quoted[:0]
	defer func() { sc.quoted = run.quoted[:0] }()
	for !lit("]") {
		if len(run.quoted) > 0 && !lit(",") {
			return ChunkRun{}, false
		}
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return ChunkRun{}, false
		}
		end := skipString(p.s, p.i)
		if end < 0 {
			return ChunkRun{}, false
		}
		run.quoted = append(run.quoted, p.s[p.i:end])
		p.i = end
	}
	if !lit("}}") || p.i != len(p.s) {
		return ChunkRun{}, false
	}
	// expandRow's checks of the values, in any order: a row failing one goes the general way for its text
	n := len(run.quoted)
	if run.Seq0 < 0 || !IsSafeInteger(run.Seq0) || !IsSafeInteger(run.Time0) || n == 0 ||
		len(run.DT) != n-1 || !IsSafeInteger(run.Seq0+float64(n)-1) {
		return ChunkRun{}, false
	}
	t := run.Time0
	for _, g := range run.DT {
		t += g
		if !IsSafeInteger(t) {
			return ChunkRun{}, false
		}
	}
	run.Turn, run.Step, run.Index = Number(turn), Number(step), Number(index)
	return run, true
}

// expandRow validates a row-tagged value in the harness's order of checks and expands it.
func expandRow(v Value, tag string) ([]Event, error) {
	bad := func(why string) ([]Event, error) { return nil, &MalformedRowError{Tag: tag, Why: why} }
	if !v.HasExactKeys("type", "seq0", "time0", "data") {
		return bad("envelope must be exactly {type, seq0, time0, data}")
	}
	seq0, _ := v.Get("seq0")
	if seq0.Kind != KindNumber || !IsSafeInteger(seq0.Num) || seq0.Num < 0 {
		return bad("seq0 must be a non-negative safe integer")
	}
	time0, _ := v.Get("time0")
	if time0.Kind != KindNumber || !IsSafeInteger(time0.Num) {
		return bad("time0 must be a safe integer")
	}
	data, _ := v.Get("data")
	// JS isRecord accepts arrays too; they then fail the exact-keys test below, as in the harness.
	if data.Kind != KindObject && data.Kind != KindArray {
		return bad("data must be an object")
	}
	payloadKey := "texts"
	var id, name Value
	hasName := false
	if tag == TagToolCallChunks {
		payloadKey = "args"
		hasName = data.HasExactKeys("turn", "step", "index", "id", "name", "dt", "args")
		if !hasName && !data.HasExactKeys("turn", "step", "index", "id", "dt", "args") {
			return bad("data must be exactly {turn, step, index, id, name?, dt, args}")
		}
		id, _ = data.Get("id")
		name, _ = data.Get("name")
		if id.Kind != KindString || (hasName && name.Kind != KindString) {
			return bad("id (and name when present) must be strings")
		}
	} else if !data.HasExactKeys("turn", "step", "index", "dt", "texts") {
		return bad("data must be exactly {turn, step, index, dt, texts}")
	}
	turn, _ := data.Get("turn")
	step, _ := data.Get("step")
	index, _ := data.Get("index")
	if turn.Kind != KindNumber || step.Kind != KindNumber || index.Kind != KindNumber {
		return bad("turn/step/index must be numbers")
	}
	payload, _ := data.Get(payloadKey)
	if payload.Kind != KindArray || len(payload.Arr) == 0 {
		return bad(payloadKey + " must be a non-empty string array")
	}
	for _, p := range payload.Arr {
		if p.Kind != KindString {
			return bad(payloadKey + " must be a non-empty string array")
		}
	}
	dt, _ := data.Get("dt")
	if dt.Kind != KindArray {
		return bad("dt must be an array of safe integers")
	}
	for _, g := range dt.Arr {
		if g.Kind != KindNumber || !IsSafeInteger(g.Num) {
			return bad("dt must be an array of safe integers")
		}
	}
	if len(dt.Arr) != len(payload.Arr)-1 {
		return bad("dt length " + strconv.Itoa(len(dt.Arr)) + " does not match " + strconv.Itoa(len(payload.Arr)) + " members")
	}
	// Reconstruction bounds, computed in float64 as JS does: leaving the safe range would make the
	// harness's arithmetic round, so such a row is outside any encoder's image.
	if !IsSafeInteger(seq0.Num + float64(len(payload.Arr)) - 1) {
		return bad("member seqs must stay safe integers")
	}
	t := time0.Num
	for _, g := range dt.Arr {
		t += g.Num
		if !IsSafeInteger(t) {
			return bad("member times must stay safe integers")
		}
	}

	run := ChunkRun{Tag: tag, Seq0: seq0.Num, Time0: time0.Num, Turn: turn, Step: step, Index: index,
		HasName: hasName, DT: make([]float64, len(dt.Arr)), Members: make([]string, len(payload.Arr))}
	if tag == TagToolCallChunks {
		run.ID, run.Name = id.Str, name.Str
	}
	for i, g := range dt.Arr {
		run.DT[i] = g.Num
	}
	for i, p := range payload.Arr {
		run.Members[i] = p.Str
	}
	return run.Expand(), nil
}

// ChunkRun is one validated packed chunk row, whatever stores it (a JSONL line or a SQLite row): the
// fields shared by its members and one payload string per member.
type ChunkRun struct {
	Tag               string  // TagTextChunks, TagReasoningChunks or TagToolCallChunks
	Seq0, Time0       float64 // the first member's seq and time
	Turn, Step, Index Value   // numbers, kept as parsed so that they render as they were written
	ID, Name          string  // tool-call rows only; Name when HasName
	HasName           bool
	DT                []float64 // time gaps between consecutive members (len(Members)-1)
	Members           []string  // texts or argument deltas
	// quoted, when not nil, stands for Members: each member's JSON string token as JSON.stringify writes
	// it (fastRow's runs, read from canonical lines)
	quoted [][]byte
}

// members is how many events the run holds.
func (r ChunkRun) members() int {
	if r.quoted != nil {
		return len(r.quoted)
	}
	return len(r.Members)
}

// Expand builds the run's member events: {type:"assistant/chunk", seq, time, data:{turn, step, chunk}},
// the chunk in the harness's key order for the tag.
func (r ChunkRun) Expand() []Event {
	return r.AppendExpand(make([]Event, 0, r.members()))
}

// AppendExpand is Expand appending the member events to dst: a decoder putting many rows into one list
// builds no list per row.
func (r ChunkRun) AppendExpand(dst []Event) []Event {
	var prefixBuf [160]byte
	prefix := r.memberPrefix(prefixBuf[:0])

	// One allocation for all the members' records (they live and die with the session together); a record
	// that outgrows its share (a text with many characters to escape) moves out on its own. The 64 bytes
	// are the envelope around prefix and text: the type, a seq and a time of up to 16 digits each, the
	// quotes and the closing braces.
	n := r.members()
	size := 0
	for k := range n {
		size += len(prefix) + r.textBytes(k) + 64
	}
	arena := make([]byte, size)
	t := r.Time0
	for k := range n {
		if k > 0 {
			t += r.DT[k-1]
		}
		share := len(prefix) + r.textBytes(k) + 64
		buf := r.appendMember(arena[:0:share], prefix, k, t)
		arena = arena[share:]
		dst = append(dst, Event{Raw: buf, Type: "assistant/chunk", Seq: seqFromInt(int64(r.Seq0 + float64(k)))})
	}
	return dst
}

// memberPrefix appends what every member's record holds after its time: the data up to the payload
// string, the chunk in the harness's key order for the tag.
func (r ChunkRun) memberPrefix(prefix []byte) []byte {
	prefix = append(prefix, `,"data":{"turn":`...)
	prefix = AppendStringify(prefix, r.Turn)
	prefix = append(prefix, `,"step":`...)
	prefix = AppendStringify(prefix, r.Step)
	prefix = append(prefix, `,"chunk":{"type":`...)
	switch r.Tag {
	case TagTextChunks:
		prefix = append(prefix, `"text-delta"`...)
	case TagReasoningChunks:
		prefix = append(prefix, `"reasoning-delta"`...)
	default:
		prefix = append(prefix, `"tool-call-delta"`...)
	}
	prefix = append(prefix, `,"index":`...)
	prefix = AppendStringify(prefix, r.Index)
	if r.Tag == TagToolCallChunks {
		prefix = append(prefix, `,"id":`...)
		prefix = AppendQuote(prefix, r.ID)
		if r.HasName {
			prefix = append(prefix, `,"name":`...)
			prefix = AppendQuote(prefix, r.Name)
		}
		prefix = append(prefix, `,"argumentsDelta":`...)
	} else {
		prefix = append(prefix, `,"text":`...)
	}
	return prefix
}

// appendMember appends member k's record, whose time is t, to buf.
func (r ChunkRun) appendMember(buf, prefix []byte, k int, t float64) []byte {
	buf = append(buf, `{"type":"assistant/chunk","seq":`...)
	buf = AppendNumber(buf, r.Seq0+float64(k))
	buf = append(buf, `,"time":`...)
	buf = AppendNumber(buf, t)
	buf = append(buf, prefix...)
	if r.quoted != nil {
		buf = append(buf, r.quoted[k]...)
	} else {
		buf = AppendQuote(buf, r.Members[k])
	}
	return append(buf, '}', '}', '}')
}

// textBytes is the size of member k's text, as stored (a token includes its quotes).
func (r ChunkRun) textBytes(k int) int {
	if r.quoted != nil {
		return len(r.quoted[k])
	}
	return len(r.Members[k])
}
