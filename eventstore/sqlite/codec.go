package sqlite

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/klauspost/compress/zstd"
)

// Row limits and the compression rule (docs/harness.md#sqlite-rows-and-compression).
const (
	MinPackedMembers = 3
	MaxPackedMembers = 1024
	MaxPackedData    = 1 << 20 // UTF-8 bytes of a packed row's uncompressed data
	CompressFrom     = 4096    // data of this many bytes or more is stored as zstd when that is smaller
	packedSentinel   = 0       // ignorable = 0 marks a packed row
)

// packLimits are the schema's bounds on a packed row.
var packLimits = event.Limits{MaxMembers: MaxPackedMembers, MaxDataBytes: MaxPackedData}

// row is one physical events row, its columns as SQLite returned them and validated as the harness's
// decodeEventRow validates them: data is string (TEXT) or []byte (BLOB); seqs is nil (NULL) or []byte;
// surface is nil or a string; ignorable is nil, 0 or 1.
type row struct {
	seq       int64
	typ       string
	time      int64
	data      any
	seqs      []byte
	hasSeqs   bool
	surface   *string
	ignorable *int64
	// maxData bounds a scalar row's decompressed data (the store's max_line_bytes; 0: none): the format
	// caps only packed rows, and a hostile BLOB must not make a read allocate without bound.
	maxData int64
	// released is the size of data dropped once the row was decoded (scanRows with release): a load
	// reports a torn tail by its size only, and holding every row's data beside its events took a 500k-event
	// session's load past 256 MiB
	released int64
}

// size is the row's stored size, for reports of what a repair removes.
func (r *row) size() int64 {
	n := int64(len(r.typ)+len(r.seqs)+24) + r.released
	switch d := r.data.(type) {
	case string:
		n += int64(len(d))
	case []byte:
		n += int64(len(d))
	}
	if r.surface != nil {
		n += int64(len(*r.surface))
	}
	return n
}

// release drops the row's data, keeping its size.
func (r *row) release() {
	switch d := r.data.(type) {
	case string:
		r.released += int64(len(d))
	case []byte:
		r.released += int64(len(d))
	}
	r.data = nil
}

const maxSafe = 1<<53 - 1

// fieldError is the harness's text for a column value of the wrong kind.
func fieldError(format string, args ...any) error { return fmt.Errorf(format, args...) }

// newRow validates scanned column values (decodeEventRow, with its texts).
func newRow(seq, typ, tm, data, seqs, surface, ignorable any) (row, error) {
	var r row
	switch v := ignorable.(type) {
	case nil:
	case int64:
		if v != 0 && v != 1 {
			return r, fieldError("stored event ignorable must be 0, 1, or null")
		}
		r.ignorable = &v
	default:
		return r, fieldError("stored ignorable must be a safe integer or null")
	}
	s, ok := seq.(int64)
	if !ok || s > maxSafe || s < -maxSafe {
		return r, fieldError("stored seq must be a safe integer")
	}
	if s < 0 {
		return r, fieldError("stored seq must be non-negative")
	}
	r.seq = s
	t, ok := typ.(string)
	if !ok {
		return r, fieldError("stored type must be a string")
	}
	if t == "" {
		return r, fieldError("stored type must not be empty")
	}
	r.typ = t
	tv, ok := tm.(int64)
	if !ok || tv > maxSafe || tv < -maxSafe {
		return r, fieldError("stored time must be a safe integer")
	}
	r.time = tv
	switch data.(type) {
	case string, []byte:
		r.data = data
	default:
		return r, fieldError("stored data must be a string or blob")
	}
	switch v := seqs.(type) {
	case nil:
	case []byte:
		r.seqs, r.hasSeqs = v, true
	default:
		return r, fieldError("stored source_event_seqs must be a blob or null")
	}
	switch v := surface.(type) {
	case nil:
	case string:
		r.surface = &v
	default:
		return r, fieldError("stored surface_op must be a string or null")
	}
	return r, nil
}

// decoders decompress data BLOBs, each refusing more output than its limit (0: none), so that a hostile
// BLOB cannot make a read allocate more than that: MaxPackedData for packed rows, the store's limit for
// scalar rows.
var (
	scalarDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0))
	decoders         sync.Map // limit → *zstd.Decoder
	encoder, _       = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(3)), zstd.WithEncoderConcurrency(1))
)

func decoderFor(limit int64) *zstd.Decoder {
	if limit <= 0 {
		return scalarDecoder
	}
	if d, ok := decoders.Load(limit); ok {
		return d.(*zstd.Decoder)
	}
	d, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(uint64(limit)))
	actual, _ := decoders.LoadOrStore(limit, d)
	return actual.(*zstd.Decoder)
}

// dataText decodes the data column to its JSON text: TEXT as is, a BLOB as a zstd frame of at most limit
// bytes (0: any), strictly UTF-8.
func dataText(v any, limit int64) ([]byte, error) {
	switch d := v.(type) {
	case string:
		return []byte(d), nil
	case []byte:
		out, err := decoderFor(limit).DecodeAll(d, nil)
		if err != nil {
			return nil, fmt.Errorf("zstd data: %w", err)
		}
		if !utf8.Valid(out) {
			//lint:ignore ST1005 the harness's exact text (its TextDecoder's fatal error)
			return nil, errors.New("The encoded data was not valid for encoding utf-8")
		}
		return out, nil
	}
	return nil, errors.New("stored data must be a string or blob")
}

// encodeData is the writer's rule: JSON text under CompressFrom bytes stays TEXT; longer text is stored as
// a zstd frame (level 3) when that is strictly shorter.
func encodeData(text []byte) any {
	if len(text) < CompressFrom {
		return string(text)
	}
	z := encoder.EncodeAll(text, make([]byte, 0, len(text)/2))
	if len(z) < len(text) {
		return z
	}
	return string(text)
}

// decodeRow expands a physical row into its logical events (the harness's decodeRow).
func decodeRow(r *row) ([]event.Event, error) {
	return decodeRowInto(r, nil)
}

// packed reports whether the row is a packed chunk row (by its discriminator; decodeRow validates it).
func (r *row) packed() bool { return r.ignorable != nil && *r.ignorable == packedSentinel }

// decodeRowInto is decodeRow returning a scalar row's event in single (one slot of an array, or nil for
// a list of its own): a long log's scan gives every scalar row a slot of one shared array.
func decodeRowInto(r *row, single []event.Event) ([]event.Event, error) {
	if !r.packed() {
		ev, err := decodeScalar(r)
		if err != nil {
			return nil, err
		}
		if single == nil {
			single = make([]event.Event, 1)
		}
		single[0] = ev
		return single, nil
	}
	if !event.IsRowTag(r.typ) {
		return nil, &event.MalformedRowError{Tag: r.typ, Why: "packed discriminator requires a chunk tag"}
	}
	if r.hasSeqs || r.surface != nil {
		return nil, &event.MalformedRowError{Tag: r.typ, Why: "packed surface fields must be null"}
	}
	text, err := dataText(r.data, MaxPackedData)
	if err != nil {
		return nil, err
	}
	run, err := decodePacked(r.typ, r.seq, r.time, text)
	if err != nil {
		return nil, err
	}
	return run.Expand(), nil
}

// decodeScalar rebuilds a scalar row's event in the harness's key order: type, seq, time, data, then
// sourceEventSeqs, surfaceOp and ignorable when present.
func decodeScalar(r *row) (event.Event, error) {
	text, err := dataText(r.data, r.maxData)
	if err != nil {
		return event.Event{}, err
	}
	data, err := event.Canonical(text)
	if err != nil {
		return event.Event{}, err
	}
	var extra []event.Member
	if r.hasSeqs {
		seqs, err := DecodeSeqs(r.seqs)
		if err != nil {
			return event.Event{}, err
		}
		arr := make([]event.Value, len(seqs))
		for i, s := range seqs {
			arr[i] = event.Int(s)
		}
		extra = append(extra, event.Member{Key: "sourceEventSeqs", Value: event.Array(arr...)})
	}
	if r.surface != nil {
		op, err := event.Parse([]byte(*r.surface))
		if err != nil {
			return event.Event{}, err
		}
		extra = append(extra, event.Member{Key: "surfaceOp", Value: op})
	}
	if r.ignorable != nil && *r.ignorable == 1 {
		extra = append(extra, event.Member{Key: "ignorable", Value: event.Bool(true)})
	}
	return event.NewEventFrom(r.typ, r.seq, r.time, data, extra...), nil
}

// decodePacked validates a packed row's data as the harness's SQLite codec does, in its order of checks
// and with its texts (they differ from the JSONL codec's: this one bounds rows to 3..1024 members and
// 1 MiB).
func decodePacked(tag string, seq0, time0 int64, text []byte) (event.ChunkRun, error) {
	bad := func(why string) (event.ChunkRun, error) {
		return event.ChunkRun{}, &event.MalformedRowError{Tag: tag, Why: why}
	}
	if len(text) > MaxPackedData {
		return bad("data exceeds " + strconv.Itoa(MaxPackedData) + " UTF-8 bytes")
	}
	data, err := event.ParseStrict(text)
	if err != nil {
		return event.ChunkRun{}, err
	}
	// JS isRecord accepts arrays too; they then fail the exact-keys test below, as in the harness.
	if data.Kind != event.KindObject && data.Kind != event.KindArray {
		return bad("data must be an object")
	}
	run := event.ChunkRun{Tag: tag, Seq0: float64(seq0), Time0: float64(time0)}
	payloadKey := "texts"
	if tag == event.TagToolCallChunks {
		payloadKey = "args"
		run.HasName = data.HasExactKeys("turn", "step", "index", "id", "name", "dt", "args")
		if !run.HasName && !data.HasExactKeys("turn", "step", "index", "id", "dt", "args") {
			return bad("invalid tool-call data fields")
		}
		id, _ := data.Get("id")
		name, _ := data.Get("name")
		if id.Kind != event.KindString || (run.HasName && name.Kind != event.KindString) {
			return bad("id and optional name must be strings")
		}
		run.ID, run.Name = id.Str, name.Str
	} else if !data.HasExactKeys("turn", "step", "index", "dt", "texts") {
		return bad("invalid text data fields")
	}
	run.Turn, _ = data.Get("turn")
	run.Step, _ = data.Get("step")
	run.Index, _ = data.Get("index")
	if run.Turn.Kind != event.KindNumber || run.Step.Kind != event.KindNumber || run.Index.Kind != event.KindNumber {
		return bad("turn/step/index must be numbers")
	}
	payload, _ := data.Get(payloadKey)
	if payload.Kind != event.KindArray || len(payload.Arr) < MinPackedMembers || len(payload.Arr) > MaxPackedMembers {
		return bad(fmt.Sprintf("%s must contain %d..%d strings", payloadKey, MinPackedMembers, MaxPackedMembers))
	}
	run.Members = make([]string, len(payload.Arr))
	for i, p := range payload.Arr {
		if p.Kind != event.KindString {
			return bad(fmt.Sprintf("%s must contain %d..%d strings", payloadKey, MinPackedMembers, MaxPackedMembers))
		}
		run.Members[i] = p.Str
	}
	dt, _ := data.Get("dt")
	if dt.Kind != event.KindArray {
		return bad("dt must be an array of safe integers")
	}
	run.DT = make([]float64, len(dt.Arr))
	for i, g := range dt.Arr {
		if g.Kind != event.KindNumber || !event.IsSafeInteger(g.Num) {
			return bad("dt must be an array of safe integers")
		}
		run.DT[i] = g.Num
	}
	if len(run.DT) != len(run.Members)-1 {
		return bad("dt length must match the member count")
	}
	if !event.IsSafeInteger(float64(seq0) + float64(len(run.Members)) - 1) {
		return bad("member seqs exceed safe integers")
	}
	t := float64(time0)
	for _, g := range run.DT {
		t += g
		if !event.IsSafeInteger(t) {
			return bad("member times exceed safe integers")
		}
	}
	return run, nil
}

// SeqsError is the harness's text for a malformed source_event_seqs value.
type SeqsError struct{ Why string }

func (e *SeqsError) Error() string { return "malformed source_event_seqs storage value: " + e.Why }

// EncodeSeqs encodes sourceEventSeqs (§2.4): the first value as an unsigned LEB128 varint, each later one
// as the ZigZag delta from the one before. An empty list is an empty, non-nil slice (an empty BLOB, which
// is not NULL).
func EncodeSeqs(seqs []int64) ([]byte, error) {
	out := make([]byte, 0, len(seqs)+1)
	var prev int64
	for i, v := range seqs {
		if v < 0 || v > maxSafe {
			return nil, errors.New("sourceEventSeqs must contain non-negative safe integers")
		}
		u := uint64(v)
		if i > 0 {
			if v >= prev {
				u = uint64(v-prev) * 2
			} else {
				u = uint64(prev-v)*2 - 1
			}
		}
		for u >= 0x80 {
			out = append(out, byte(u)|0x80)
			u >>= 7
		}
		out = append(out, byte(u))
		prev = v
	}
	return out, nil
}

// DecodeSeqs decodes a source_event_seqs BLOB, refusing what the harness's decoder refuses with its texts.
func DecodeSeqs(b []byte) ([]int64, error) {
	out := make([]int64, 0, len(b))
	var prev int64
	for off := 0; off < len(b); {
		first := len(out) == 0
		limit := uint64(maxSafe)
		if !first {
			limit = 2 * maxSafe
		}
		var u uint64
		shift := uint(0)
		done := false
		for off < len(b) {
			c := b[off]
			off++
			u |= uint64(c&0x7f) << shift
			if c&0x80 == 0 {
				if shift > 0 && c&0x7f == 0 {
					return nil, &SeqsError{"non-canonical varint"}
				}
				if u > limit {
					return nil, &SeqsError{"varint is out of range"}
				}
				done = true
				break
			}
			shift += 7
			if shift > 56 {
				return nil, &SeqsError{"varint is out of range"}
			}
		}
		if !done {
			return nil, &SeqsError{"truncated varint"}
		}
		v := int64(u)
		if !first {
			if u&1 == 0 {
				v = prev + int64(u/2)
			} else {
				v = prev - int64((u+1)/2)
			}
		}
		if v < 0 || v > maxSafe {
			return nil, &SeqsError{"decoded seq is out of range"}
		}
		out = append(out, v)
		prev = v
	}
	return out, nil
}

// scanned is the committed prefix of a run of rows (the harness's scanRows result).
type scanned struct {
	events     []event.Event
	rowMembers []uint64 // bit i: events[i] came from a packed row (eventstore.Prefix.RowMembers)
	tornFrom   int64    // -1: none
	tornRows   []row    // the rows from tornFrom on
}

// CommittedRowError is the harness's refusal of a bad row at or before the last turn/end.
type CommittedRowError struct{ Seq int64 }

func (e *CommittedRowError) Error() string {
	return "corrupt session log: invalid committed physical row at seq " + strconv.FormatInt(e.Seq, 10)
}

// scanRows decides the committed prefix of rows read from base on: a row that fails to decode, or whose
// members do not continue the seqs, is corruption when a later row proves a committed turn/end, and
// otherwise starts the torn tail. With release, a row's data is dropped once it is decoded (its size kept),
// for callers that need no more of the torn rows than their size. t spreads a long run's decoding.
func scanRows(rows []row, base int64, release bool, t eventstore.Tuning) (scanned, error) {
	s := newRowScan(base, lastTurnEnd(rows), release, t)
	if err := s.add(rows); err != nil {
		return scanned{}, err
	}
	return s.scanned, nil
}

// lastTurnEnd is the seq of the last of rows that decodes to a turn/end (-1: none): a malformed row cannot
// prove that an earlier prefix committed. Only a scalar turn/end row can decode to one.
func lastTurnEnd(rows []row) int64 {
	for i := len(rows) - 1; i >= 0; i-- {
		if rows[i].typ != "turn/end" {
			continue
		}
		if evs, err := decodeRow(&rows[i]); err == nil && len(evs) == 1 && evs[0].Type == "turn/end" {
			return rows[i].seq
		}
	}
	return -1
}

// rowScan assembles the committed prefix of rows given in seq order, in one run (scanRows) or block by
// block as a query returns them (LoadStored), so that a long log's rows need not be held beside its
// events.
type rowScan struct {
	scanned
	base      int64   // the seq the first event must have
	committed int64   // the seq of the last row that decodes to a turn/end (lastTurnEnd); -1: none
	release   bool    // drop each row's data once decoded (row.release)
	share     float64 // the fraction of all rows given once this block is in (0: unknown), to size the list
	// a block's decoding, reused by the next block
	decoded [][]event.Event
	singles []event.Event // the events of scalar rows, a slot per row
	errs    []error
	done    []bool
	tuning  eventstore.Tuning // how a long run's rows are decoded
}

func newRowScan(base, committed int64, release bool, t eventstore.Tuning) *rowScan {
	return &rowScan{scanned: scanned{tornFrom: -1}, base: base, committed: committed, release: release, tuning: t}
}

// add scans the next rows. Once a row starts the torn tail, tornRows holds it and the rest of this block,
// and later rows are for the caller to count.
func (s *rowScan) add(rows []row) error {
	if s.tornFrom >= 0 {
		return nil
	}
	n := len(rows)
	if cap(s.decoded) < n {
		s.decoded, s.singles = make([][]event.Event, n), make([]event.Event, n)
		s.errs, s.done = make([]error, n), make([]bool, n)
	}
	decoded, singles, errs, done := s.decoded[:n], s.singles[:n], s.errs[:n], s.done[:n]
	clear(done)
	decode := func(i int) ([]event.Event, error) {
		if !done[i] {
			decoded[i], errs[i] = decodeRowInto(&rows[i], singles[i:i+1:i+1])
			done[i] = true
			if s.release && errs[i] == nil {
				rows[i].release()
			}
		}
		return decoded[i], errs[i]
	}
	if n >= 1024 {
		// a long run: every row decoded on every worker first (rows are independent); the pass below then
		// only looks the results up
		_ = s.tuning.Parallel(n, 1024, func(lo, hi int) error {
			for i := lo; i < hi; i++ {
				decode(i)
			}
			return nil
		})
	}
	total := len(s.events)
	for i := range rows {
		if done[i] && errs[i] == nil {
			total += len(decoded[i])
		} else {
			total++
		}
	}
	s.events = eventstore.GrowTo(s.events, total, s.share)
	expected := s.base + int64(len(s.events))
	for i := range rows {
		evs, err := decode(i)
		ok := err == nil
		for _, e := range evs {
			if !ok || e.Seq != expected {
				ok = false
				break
			}
			expected++
		}
		if !ok {
			if rows[i].seq <= s.committed {
				return &CommittedRowError{Seq: rows[i].seq}
			}
			s.tornFrom, s.tornRows = rows[i].seq, rows[i:]
			break
		}
		if rows[i].packed() && s.base == 0 { // a member's seq is then its index (checked above)
			for k := len(s.events); k < len(s.events)+len(evs); k++ {
				for k/64 >= len(s.rowMembers) {
					s.rowMembers = append(s.rowMembers, 0)
				}
				s.rowMembers[k/64] |= 1 << (k % 64)
			}
		}
		s.events = append(s.events, evs...)
	}
	clear(decoded) // the prefix holds the events now; singles are copied, and overwritten by the next block
	return nil
}

// bound is one physical row ready to insert, in the column order of the insert statement.
type bound struct {
	seq       int64
	typ       string
	time      int64
	data      any // string (TEXT) or []byte (BLOB)
	seqs      any // nil (NULL) or []byte, possibly empty (an empty list is an empty BLOB)
	surface   any // nil or string
	ignorable any // nil, or int64 0 (packed) / 1
}

// bindScalar encodes one event as a scalar row, refusing an event the schema cannot hold as written: its
// envelope must be exactly type, seq, time, data and the optional sourceEventSeqs, surfaceOp and ignorable
// (true), in that order, with an integer time — anything else would not read back byte for byte (the
// harness's writer would silently drop it). The row is decoded back and compared, so a refusal is never
// missed.
func bindScalar(e event.Event) (bound, error) {
	var b bound
	v, err := e.Envelope()
	if err != nil {
		return b, err
	}
	keys := v.Keys()
	if len(keys) < 4 || !equalStrings(keys[:4], []string{"type", "seq", "time", "data"}) {
		return b, errors.New("its envelope does not start with type, seq, time, data")
	}
	typ, _ := v.Get("type")
	seq, _ := v.Get("seq")
	tm, _ := v.Get("time")
	if typ.Kind != event.KindString || typ.Str == "" {
		return b, errors.New("its type is not a non-empty string")
	}
	if seq.Kind != event.KindNumber || !event.IsSafeInteger(seq.Num) || seq.Num < 0 {
		return b, errors.New("its seq is not a non-negative safe integer")
	}
	if tm.Kind != event.KindNumber || !event.IsSafeInteger(tm.Num) {
		return b, errors.New("its time is not a safe integer (the time column is INTEGER)")
	}
	b.typ, b.seq, b.time = typ.Str, int64(seq.Num), int64(tm.Num)
	data, _ := e.Member("data")
	b.data = encodeData(data)
	// The optional members come back in the harness's order (sourceEventSeqs, surfaceOp, ignorable)
	// whatever order they were written in — the harness's own closers put surfaceOp first — so only that
	// reordering is allowed; expect is the event as the row will read back.
	var extra [3]*event.Member
	for _, k := range keys[4:] {
		val, _ := v.Get(k)
		raw, _ := e.Member(k)
		switch k {
		case "sourceEventSeqs":
			if val.Kind != event.KindArray {
				return b, errors.New("its sourceEventSeqs is not an array")
			}
			seqs := make([]int64, len(val.Arr))
			for i, s := range val.Arr {
				if s.Kind != event.KindNumber || !event.IsSafeInteger(s.Num) || s.Num < 0 {
					return b, errors.New("sourceEventSeqs must contain non-negative safe integers")
				}
				seqs[i] = int64(s.Num)
			}
			enc, err := EncodeSeqs(seqs)
			if err != nil {
				return b, err
			}
			b.seqs = enc
			extra[0] = &event.Member{Key: k, Value: val}
		case "surfaceOp":
			b.surface = string(raw)
			extra[1] = &event.Member{Key: k, Value: val}
		case "ignorable":
			if !bytes.Equal(raw, []byte("true")) {
				return b, errors.New("its ignorable is " + string(raw) + "; the schema stores only ignorable: true")
			}
			b.ignorable = int64(1)
			extra[2] = &event.Member{Key: k, Value: val}
		default:
			return b, errors.New("its envelope has the member " + strconv.Quote(k) + ", which the SQLite schema has no column for")
		}
	}
	var members []event.Member
	for _, m := range extra {
		if m != nil {
			members = append(members, *m)
		}
	}
	expect := event.NewEventFrom(b.typ, b.seq, b.time, data, members...)
	r, err := newRow(b.seq, b.typ, b.time, b.data, b.seqs, b.surface, b.ignorable)
	if err == nil {
		var back event.Event
		if back, err = decodeScalar(&r); err == nil && !bytes.Equal(back.Raw, expect.Raw) {
			err = errors.New("it would not read back as written")
		}
	}
	if err != nil {
		return b, errors.New("it does not round-trip through a row: " + err.Error())
	}
	return b, nil
}

// Stored is an event as a SQLite session database gives it back once stored: the same event, its optional
// envelope members in the harness's order. An error says why the schema cannot hold it.
func Stored(e event.Event) (event.Event, error) {
	b, err := bindScalar(e)
	if err != nil {
		return event.Event{}, err
	}
	r, err := newRow(b.seq, b.typ, b.time, b.data, b.seqs, b.surface, b.ignorable)
	if err != nil {
		return event.Event{}, err
	}
	return decodeScalar(&r)
}

// bindRecord encodes one packed record (a row, or an event stored alone).
func bindRecord(r event.Record) (bound, error) {
	if r.Data == nil {
		return bindScalar(r.Event)
	}
	return bound{seq: int64(r.Seq0), typ: r.Tag, time: int64(r.Time0), data: encodeData(r.Data), ignorable: int64(packedSentinel)}, nil
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
