package event

import (
	"sync"
)

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
