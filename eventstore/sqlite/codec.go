package sqlite

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"unicode/utf8"

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
