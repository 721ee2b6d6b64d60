package event

import (
	"strconv"
	"sync"
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
	// Every member shares the data prefix; build it once.
	var prefixBuf [160]byte
	prefix := append(prefixBuf[:0], `,"data":{"turn":`...)
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
		seq := r.Seq0 + float64(k)
		share := len(prefix) + r.textBytes(k) + 64
		buf := arena[:0:share]
		arena = arena[share:]
		buf = append(buf, `{"type":"assistant/chunk","seq":`...)
		buf = AppendNumber(buf, seq)
		buf = append(buf, `,"time":`...)
		buf = AppendNumber(buf, t)
		buf = append(buf, prefix...)
		if r.quoted != nil {
			buf = append(buf, r.quoted[k]...)
		} else {
			buf = AppendQuote(buf, r.Members[k])
		}
		buf = append(buf, '}', '}', '}')
		dst = append(dst, Event{Raw: buf, Type: "assistant/chunk", Seq: seqFromInt(int64(seq))})
	}
	return dst
}

// textBytes is the size of member k's text, as stored (a token includes its quotes).
func (r ChunkRun) textBytes(k int) int {
	if r.quoted != nil {
		return len(r.quoted[k])
	}
	return len(r.Members[k])
}

// deltaKind classifies events for packing; kindNone means "store verbatim".
type deltaKind uint8

const (
	kindNone deltaKind = iota
	kindText
	kindReasoning
	kindToolCall
)

// delta is an eligible assistant/chunk event with the fields run continuation compares.
type delta struct {
	ev                Event
	kind              deltaKind
	seq, time         float64
	turn, step, index float64 // numbers (the whitelist requires it)
	id, name          string
	hasName           bool
	payload           string // text or argumentsDelta
}

// classify applies the encoder's whitelist: the ENTIRE shape (envelope, data, chunk; exact keys,
// primitive types, integer seq/time) must match, or the event stays one line. Anything the whitelist
// does not fully recognize losing compression is fine; losing data is not.
func classify(e Event) (delta, bool) {
	if e.Type != "assistant/chunk" {
		return delta{}, false
	}
	v, err := Parse(e.Raw)
	if err != nil {
		return delta{}, false
	}
	return classifyRecord(e, v)
}

// classifyRecord is classify over the event's already parsed record.
func classifyRecord(e Event, v Value) (delta, bool) {
	if e.Type != "assistant/chunk" || !v.HasExactKeys("type", "seq", "time", "data") {
		return delta{}, false
	}
	seq, _ := v.Get("seq")
	tm, _ := v.Get("time")
	if seq.Kind != KindNumber || !IsSafeInteger(seq.Num) || seq.Num < 0 || tm.Kind != KindNumber || !IsSafeInteger(tm.Num) {
		return delta{}, false
	}
	data, _ := v.Get("data")
	if !data.HasExactKeys("turn", "step", "chunk") {
		return delta{}, false
	}
	d := delta{ev: e, seq: seq.Num, time: tm.Num}
	turn, _ := data.Get("turn")
	step, _ := data.Get("step")
	if turn.Kind != KindNumber || step.Kind != KindNumber {
		return delta{}, false
	}
	d.turn, d.step = turn.Num, step.Num
	chunk, _ := data.Get("chunk")
	if chunk.Kind != KindObject && chunk.Kind != KindArray {
		return delta{}, false
	}
	index, _ := chunk.Get("index")
	if index.Kind != KindNumber {
		return delta{}, false
	}
	d.index = index.Num
	ct, _ := chunk.Get("type")
	if ct.Kind != KindString {
		return delta{}, false
	}
	switch ct.Str {
	case "text-delta", "reasoning-delta":
		text, _ := chunk.Get("text")
		if !chunk.HasExactKeys("type", "index", "text") || text.Kind != KindString {
			return delta{}, false
		}
		d.kind = kindText
		if ct.Str == "reasoning-delta" {
			d.kind = kindReasoning
		}
		d.payload = text.Str
	case "tool-call-delta":
		name, hasName := chunk.Get("name")
		shapeOK := chunk.HasExactKeys("type", "index", "id", "argumentsDelta") ||
			(chunk.HasExactKeys("type", "index", "id", "name", "argumentsDelta") && name.Kind == KindString)
		id, _ := chunk.Get("id")
		args, _ := chunk.Get("argumentsDelta")
		if !shapeOK || id.Kind != KindString || args.Kind != KindString {
			return delta{}, false
		}
		d.kind = kindToolCall
		d.id, d.name, d.hasName = id.Str, name.Str, hasName
		d.payload = args.Str
	default:
		return delta{}, false
	}
	return d, true
}

// continues reports whether next extends a run ending in prev (same kind checked by the caller).
func continues(prev, next *delta) bool {
	if next.seq != prev.seq+1 {
		return false
	}
	// The gap must survive float subtraction exactly, or the row would decode to another timestamp.
	if !IsSafeInteger(next.time - prev.time) {
		return false
	}
	if next.turn != prev.turn || next.step != prev.step || next.index != prev.index {
		return false
	}
	if next.kind != kindToolCall {
		return true
	}
	return prev.id == next.id && prev.hasName == next.hasName && prev.name == next.name
}

// Packing is what PackBatchOf needs to know of one event, computed from its parsed record when it is
// accepted (so that writing a batch parses nothing).
type Packing struct {
	d *delta // nil: the event stays one line
}

// PackingOf classifies an event for packing from its parsed record (the value Parse(e.Raw) gives).
func PackingOf(e Event, rec Value) Packing {
	d, ok := classifyRecord(e, rec)
	if !ok {
		return Packing{}
	}
	d.ev = Event{} // PackBatchOf puts the batch's own event back
	return Packing{&d}
}

// PackBatch encodes one durable batch as the harness's JSONL writer does with packChunks=true: runs of at
// least MinRun eligible consecutive assistant/chunk deltas become one row; everything else is one line
// (its Raw). Returns the lines without LFs. workers spread the classification of a large batch.
func PackBatch(events []Event, workers int) [][]byte {
	return jsonlLines(PackRecords(events, nil, Limits{}, workers))
}

// PackBatchOf is PackBatch over events classified beforehand (PackingOf, one per event).
func PackBatchOf(events []Event, packing []Packing) [][]byte {
	return jsonlLines(PackRecords(events, packing, Limits{}, 1))
}

// jsonlLines renders records as JSONL lines: a row becomes {"type":TAG,"seq0":S,"time0":T,"data":DATA}.
func jsonlLines(recs []Record) [][]byte {
	out := make([][]byte, len(recs))
	for i, r := range recs {
		if r.Data == nil {
			out[i] = r.Event.Raw
			continue
		}
		line := make([]byte, 0, len(r.Data)+64)
		line = append(line, `{"type":"`...)
		line = append(line, r.Tag...)
		line = append(line, `","seq0":`...)
		line = AppendNumber(line, r.Seq0)
		line = append(line, `,"time0":`...)
		line = AppendNumber(line, r.Time0)
		line = append(line, `,"data":`...)
		line = append(line, r.Data...)
		out[i] = append(line, '}')
	}
	return out
}

// Record is one stored record of a packed batch: an event stored alone (Data == nil), or a packed chunk
// row of Members consecutive events.
type Record struct {
	Event       Event   // the event, when stored alone
	Tag         string  // the row's type tag
	Seq0, Time0 float64 // the row's first member's seq and time
	Data        []byte  // the row's data JSON, {"turn",...,"texts"|"args"}, as JSON.stringify writes it
	Members     int
}

// Limits bound a packed row; zero means unbounded. The JSONL codec has none; the SQLite schema bounds a
// row to 1024 members and 1 MiB of data (docs/harness.md#packed-chunk-rows).
type Limits struct {
	MaxMembers   int
	MaxDataBytes int
}

// PackRecords packs one append batch into records with the harness's run rule (runs never cross the
// batch). packing, when not nil, is each event's classification (PackingOf); nil classifies here. A run
// longer than the limits allow is cut as the harness's bounded encoder does: the most members that fit,
// found by binary search, and a member too large to share a row with two others stays alone. workers
// spread the classification of a large batch given without its packing (below 2: inline).
func PackRecords(events []Event, packing []Packing, lim Limits, workers int) []Record {
	var ds []delta
	var oks []bool
	if packing == nil {
		ds, oks = classifyAll(events, workers)
	} else {
		ds = make([]delta, len(events))
		oks = make([]bool, len(events))
		for i, p := range packing {
			if p.d != nil {
				ds[i], oks[i] = *p.d, true
				ds[i].ev = events[i]
			}
		}
	}
	out := make([]Record, 0, len(events))
	var run []delta
	flush := func() {
		out = emitRun(out, run, lim)
		run = run[:0]
	}
	for i, e := range events {
		d, ok := ds[i], oks[i]
		if !ok {
			flush()
			out = append(out, Record{Event: e})
			continue
		}
		if n := len(run); n > 0 && run[0].kind == d.kind && continues(&run[n-1], &d) {
			run = append(run, d)
			continue
		}
		flush()
		run = append(run, d)
	}
	flush()
	return out
}

// emitRun appends a complete run as bounded rows, leaving the 0–2 members no row can take alone.
func emitRun(out []Record, run []delta, lim Limits) []Record {
	row := func(members []delta) Record {
		return Record{Tag: tagOf(members[0].kind), Seq0: members[0].seq, Time0: members[0].time,
			Data: buildRowData(members), Members: len(members)}
	}
	fits := func(r Record) bool { return lim.MaxDataBytes == 0 || len(r.Data) <= lim.MaxDataBytes }
	off := 0
	for len(run)-off >= MinRun {
		high := len(run) - off
		if lim.MaxMembers > 0 {
			high = min(high, lim.MaxMembers)
		}
		if r := row(run[off : off+high]); fits(r) {
			out = append(out, r)
			off += high
			continue
		}
		var best Record
		for low, hi := MinRun, high-1; low <= hi; {
			mid := (low + hi) / 2
			if r := row(run[off : off+mid]); fits(r) {
				best, low = r, mid+1
			} else {
				hi = mid - 1
			}
		}
		if best.Members == 0 {
			out = append(out, Record{Event: run[off].ev})
			off++
			continue
		}
		out = append(out, best)
		off += best.Members
	}
	for _, d := range run[off:] {
		out = append(out, Record{Event: d.ev})
	}
	return out
}

func tagOf(k deltaKind) string {
	switch k {
	case kindText:
		return TagTextChunks
	case kindReasoning:
		return TagReasoningChunks
	}
	return TagToolCallChunks
}

// classifyAll classifies every event of a batch; a large batch is split over the workers, since each
// candidate chunk is parsed whole.
func classifyAll(events []Event, workers int) ([]delta, []bool) {
	ds := make([]delta, len(events))
	oks := make([]bool, len(events))
	work := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			ds[i], oks[i] = classify(events[i])
		}
	}
	if len(events) < 512 || workers < 2 {
		work(0, len(events))
		return ds, oks
	}
	var wg sync.WaitGroup
	for p := 0; p < workers; p++ {
		lo, hi := len(events)*p/workers, len(events)*(p+1)/workers
		wg.Add(1)
		go func() { defer wg.Done(); work(lo, hi) }()
	}
	wg.Wait()
	return ds, oks
}

// buildRowData encodes a run's row data in the harness's key order.
func buildRowData(run []delta) []byte {
	first := &run[0]
	buf := make([]byte, 0, 96+32*len(run))
	buf = append(buf, `{"turn":`...)
	buf = AppendNumber(buf, first.turn)
	buf = append(buf, `,"step":`...)
	buf = AppendNumber(buf, first.step)
	buf = append(buf, `,"index":`...)
	buf = AppendNumber(buf, first.index)
	buf = append(buf, `,"dt":[`...)
	for i := 1; i < len(run); i++ {
		if i > 1 {
			buf = append(buf, ',')
		}
		buf = AppendStringify(buf, Number(run[i].time-run[i-1].time))
	}
	buf = append(buf, ']')
	if first.kind == kindToolCall {
		buf = append(buf, `,"id":`...)
		buf = AppendQuote(buf, first.id)
		if first.hasName {
			buf = append(buf, `,"name":`...)
			buf = AppendQuote(buf, first.name)
		}
		buf = append(buf, `,"args":[`...)
	} else {
		buf = append(buf, `,"texts":[`...)
	}
	for i := range run {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = AppendQuote(buf, run[i].payload)
	}
	return append(buf, ']', '}')
}

// Chunk is what the live writer takes from an assistant/chunk event ReadChunk read: its data's turn and
// step (the numbers the harness's invariant companions compare with the open step) and how a flush packs
// it.
type Chunk struct {
	Turn, Step float64
	Packing    Packing
}

// ReadChunk reads, without building a tree, the data of an assistant/chunk event at seq and time laid out
// as Expand writes it and the harness's Session.append stores it:
//
//	{"turn":N,"step":M,"chunk":C}
//
// with N and M non-negative safe integers spelled as digits, and C either a streaming delta in the
// encoder's layout —
//
//	{"type":"text-delta","index":I,"text":X}           (and "reasoning-delta")
//	{"type":"tool-call-delta","index":I,"id":D,["name":A,]"argumentsDelta":X}
//
// with I as the others, which packs (its Packing is the one PackingOf gives the event) — or an object whose
// first member is a type that no delta has (block-start, usage, finish, …), which never packs. data must be
// canonical (IsCanonical), and seq and time non-negative safe integers. ok is false for every other layout,
// a delta's type in any other shape included, which the caller parses (TestReadChunk).
func ReadChunk(data []byte, seq, time int64) (Chunk, bool) {
	cur := NewCursor(data)
	lit, digits, str := cur.Lit, cur.Digits, cur.Str
	var c Chunk
	var ok bool
	var turn, step, index int64
	if !lit(`{"turn":`) {
		return c, false
	}
	if turn, ok = digits(); !ok || !lit(`,"step":`) {
		return c, false
	}
	if step, ok = digits(); !ok || !lit(`,"chunk":`) {
		return c, false
	}
	c.Turn, c.Step = float64(turn), float64(step)
	d := delta{}
	switch {
	case lit(`{"type":"text-delta","index":`):
		d.kind = kindText
	case lit(`{"type":"reasoning-delta","index":`):
		d.kind = kindReasoning
	case lit(`{"type":"tool-call-delta","index":`):
		d.kind = kindToolCall
	default:
		// another chunk: its type (its first member, which no other member repeats in canonical JSON)
		// must be no delta's, whatever the rest of it holds
		chunk := cur.Rest()
		if !lit(`{"type":`) {
			return c, false
		}
		switch typ, ok := str(); {
		case !ok, typ == "text-delta", typ == "reasoning-delta", typ == "tool-call-delta":
			return c, false
		}
		end := skipValue(chunk, 0)
		if end < 0 || string(chunk[end:]) != "}" {
			return c, false
		}
		return c, true
	}
	if index, ok = digits(); !ok {
		return c, false
	}
	if d.kind == kindToolCall {
		if !lit(`,"id":`) {
			return c, false
		}
		if d.id, ok = str(); !ok {
			return c, false
		}
		if lit(`,"name":`) {
			if d.name, ok = str(); !ok {
				return c, false
			}
			d.hasName = true
		}
		ok = lit(`,"argumentsDelta":`)
	} else {
		ok = lit(`,"text":`)
	}
	if !ok {
		return c, false
	}
	if d.payload, ok = str(); !ok || !lit("}}") || len(cur.Rest()) != 0 {
		return c, false
	}
	d.seq, d.time = float64(seq), float64(time)
	d.turn, d.step, d.index = c.Turn, c.Step, float64(index)
	c.Packing = Packing{&d}
	return c, true
}

// Cursor reads a line laid out as expected, piece by piece, for the paths that read the harness's own
// layouts without building a tree: each method consumes what it reads, or nothing and reports false.
type Cursor struct{ rest []byte }

// NewCursor starts a cursor at the beginning of b.
func NewCursor(b []byte) *Cursor { return &Cursor{rest: b} }

// Rest is what the cursor has not read.
func (c *Cursor) Rest() []byte { return c.rest }

// Lit reads the literal bytes l.
func (c *Cursor) Lit(l string) bool {
	if len(c.rest) < len(l) || string(c.rest[:len(l)]) != l {
		return false
	}
	c.rest = c.rest[len(l):]
	return true
}

// Digits reads a non-negative safe integer spelled as JSON.stringify spells it: digits, no leading zero.
func (c *Cursor) Digits() (int64, bool) {
	i := 0
	for i < len(c.rest) && i <= 16 && c.rest[i] >= '0' && c.rest[i] <= '9' {
		i++
	}
	if i == 0 || i > 16 || (i > 1 && c.rest[0] == '0') {
		return 0, false
	}
	var n int64
	for _, d := range c.rest[:i] {
		n = n*10 + int64(d-'0')
	}
	if n > MaxSafeInteger {
		return 0, false
	}
	c.rest = c.rest[i:]
	return n, true
}

// Str reads a string token and returns its contents; the token must be canonical (as in a line
// IsCanonical accepts) for them to be its value.
func (c *Cursor) Str() (string, bool) {
	if len(c.rest) == 0 || c.rest[0] != '"' {
		return "", false
	}
	end := skipString(c.rest, 0)
	if end < 0 {
		return "", false
	}
	tok := c.rest[:end]
	c.rest = c.rest[end:]
	return decodeCanonicalString(tok), true
}
