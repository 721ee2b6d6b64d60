package generation

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/dshfs/dshfs/eventstore/event"
)

// Recovery is how a row the codec cannot accept is treated, as the codec's recovery option names it.
type Recovery int

const (
	// Strict refuses the artifact at the first row the codec rejects (what the published decode tool does).
	Strict Recovery = iota
	// Recoverable keeps the accepted prefix: the first rejected row and everything after it are dropped,
	// unless a later row decodes to a `turn/end`, which proves the damage is inside committed history and
	// refuses the artifact with the first issue. v3's structural admission (a retired header.system, a
	// malformed system message, a required predecessor PTC tag) refuses in both modes.
	Recoverable
)

// Header members of the physical v2 header line, as released.
var (
	physicalHeaderRequired = []string{"type", "version", "id", "createdAt", "isSeeded", "delegationDepth"}
	headerOptional         = []string{"cwd", "parentSession", "origin", "agentPreset"}
	eventRequired          = []string{"type", "seq", "time", "data"}
	surfaceOptional        = []string{"ignorable", "sourceEventSeqs", "surfaceOp"}
	logOptional            = []string{"ignorable"}
)

// decodeHeader turns a parsed header line of generation gen into the logical header, with the checks and
// texts of the released codec (v3 reuses v2's with version 3).
func decodeHeader(gen int, v event.Value) (Header, error) {
	if gen == 4 {
		// the v4 codec hands the physical header to the released v2 decoder with its version swapped
		if ver, ok := v.Get("version"); !isObject(v) || !ok || ver.Kind != event.KindNumber || ver.Num != 4 {
			return Header{}, formatErr("expected format v4 physical header")
		}
	}
	if gen == 3 {
		if event.CheckLossless(v) != nil {
			return Header{}, formatErr("format v3 physical header is not lossless JSON")
		}
		if ver, ok := v.Get("version"); !ok || ver.Kind != event.KindNumber || ver.Num != 3 {
			return Header{}, formatErr("expected format v3 physical Session header")
		}
	}
	if event.CheckLossless(v) != nil {
		return Header{}, formatErr("released v2 physical header is not lossless JSON")
	}
	if _, err := record(v, "released v2 physical header"); err != nil {
		return Header{}, err
	}
	if err := exactKeys(v, physicalHeaderRequired, headerOptional, "released v2 physical header", "lacks"); err != nil {
		return Header{}, err
	}
	typ, _ := v.Get("type")
	ver, _ := v.Get("version")
	// v3 reaches the v2 checks with its version rewritten to 2
	if typ.Kind != event.KindString || typ.Str != "session" || ver.Kind != event.KindNumber || ver.Num != float64(gen) {
		return Header{}, formatErr("expected released v2 physical Session header")
	}
	h := Header{Version: gen}
	id, _ := v.Get("id")
	if id.Kind != event.KindString {
		return Header{}, formatErr("released v2 header id must be a string")
	}
	h.ID = id.Str
	var err error
	createdAt, _ := v.Get("createdAt")
	if h.CreatedAt, err = count(createdAt, "released v2 header createdAt"); err != nil {
		return Header{}, err
	}
	depth, _ := v.Get("delegationDepth")
	if h.DelegationDepth, err = count(depth, "released v2 header delegationDepth"); err != nil {
		return Header{}, err
	}
	seeded, _ := v.Get("isSeeded")
	if seeded.Kind != event.KindBool {
		return Header{}, formatErr("released v2 header isSeeded must be boolean")
	}
	h.IsSeeded = seeded.Bool
	for _, f := range []struct {
		key string
		dst **string
	}{{"cwd", &h.Cwd}, {"parentSession", &h.ParentSession}, {"agentPreset", &h.AgentPreset}} {
		x, ok := v.Get(f.key)
		if !ok {
			continue
		}
		if x.Kind != event.KindString {
			return Header{}, formatErr("released v2 header " + f.key + " must be a string")
		}
		s := x.Str
		*f.dst = &s
	}
	if o, ok := v.Get("origin"); ok {
		if o.Kind != event.KindString || o.Str != "subagent" {
			return Header{}, formatErr(`released v2 header origin must be "subagent"`)
		}
		s := o.Str
		h.Origin = &s
	}
	// the logical header's own validation adds one rule the physical checks lack (node:path isAbsolute)
	if h.Cwd != nil && (len(*h.Cwd) == 0 || (*h.Cwd)[0] != '/') {
		if gen == 4 {
			return Header{}, formatErr("format v4 header cwd must be absolute")
		}
		return Header{}, formatErr("format v2 header cwd must be absolute")
	}
	h.Raw = h.logical()
	return h, nil
}

// decodeEvent is the v2 codec's row decoding: envelope admission, then the expansion of range-encoded
// sourceEventSeqs. changed reports that the event differs from the row (so its bytes must be re-encoded).
// eventCount is the number of events accepted so far: see expandSeqs.
func decodeEvent(v event.Value, row int, eventCount int64) (ev event.Value, changed bool, err error) {
	// the label names the row in a refusal only: built when one is, as this runs on every row of a log
	label := func() string { return "released v2 row " + strconv.Itoa(row) }
	if !isObject(v) {
		_, err := record(v, label())
		return v, false, err
	}
	if !hasExactKeys(v, eventRequired, surfaceOptional) {
		return v, false, exactKeys(v, eventRequired, surfaceOptional, label(), "lacks required field")
	}
	if t, _ := v.Get("type"); t.Kind != event.KindString {
		return v, false, formatErr(label() + " type must be a string")
	}
	if tm, _ := v.Get("time"); tm.Kind != event.KindNumber || !event.IsSafeInteger(tm.Num) || isNegZero(tm) {
		return v, false, safeInteger(tm, label()+" time")
	}
	if ig, ok := v.Get("ignorable"); ok && (ig.Kind != event.KindBool || !ig.Bool) {
		return v, false, formatErr(label() + " ignorable must be true when present")
	}
	src, ok := v.Get("sourceEventSeqs")
	if !ok {
		return v, false, nil
	}
	seqv, _ := v.Get("seq")
	seq, err := count(seqv, label()+" seq")
	if err != nil {
		return v, false, err
	}
	seqs, err := expandSeqs(src, seq, seq == eventCount)
	if err != nil {
		return v, false, err
	}
	if seqs == nil { // a plain list already, or a row that cannot be accepted: the row is the event
		return v, false, nil
	}
	out := v
	out.Obj = append([]event.Member(nil), v.Obj...)
	for i := range out.Obj {
		if out.Obj[i].Key == "sourceEventSeqs" {
			out.Obj[i].Value = event.Value{Kind: event.KindArray, Arr: seqs}
		}
	}
	return out, true, nil
}

// expandSeqs decodes a physical sourceEventSeqs list of plain seqs and [start, end] ranges, all unique
// and below max (the event's own seq); a list with a range must be strictly increasing. It returns nil
// when the list holds no range (the value is then its own expansion).
//
// The checks run on the runs themselves, never on an expansion: a range may claim up to the row's seq
// entries, and a row whose seq is not the next event's (expand false) is never accepted, so only the
// row that can be accepted is expanded, and its expansion is bounded by the events before it.
func expandSeqs(v event.Value, max int64, expand bool) ([]event.Value, error) {
	if v.Kind != event.KindArray {
		return nil, formatErr("sourceEventSeqs must be an array")
	}
	type run struct{ start, end int64 }
	runs := make([]run, 0, len(v.Arr))
	hasRange := false
	var n int64 // entries so far
	for _, e := range v.Arr {
		if e.Kind != event.KindArray {
			s, err := count(e, "sourceEventSeqs member")
			if err != nil {
				return nil, err
			}
			runs = append(runs, run{s, s})
			n++
			continue
		}
		if len(e.Arr) != 2 {
			return nil, formatErr("sourceEventSeqs range must be a [start, end] pair")
		}
		start, err := count(e.Arr[0], "sourceEventSeqs range start")
		if err != nil {
			return nil, err
		}
		end, err := count(e.Arr[1], "sourceEventSeqs range end")
		if err != nil {
			return nil, err
		}
		if start > end || end >= max || end-start+1 > max-n {
			return nil, formatErr("sourceEventSeqs range exceeds its event seq")
		}
		runs = append(runs, run{start, end})
		n += end - start + 1
		hasRange = true
	}
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(a, b run) int { return cmp.Compare(a.start, b.start) })
	for i, r := range sorted {
		if r.end >= max || (i > 0 && r.start <= sorted[i-1].end) {
			return nil, formatErr("sourceEventSeqs ranges must contain unique earlier seqs")
		}
	}
	if !hasRange {
		return nil, nil
	}
	for i := 1; i < len(runs); i++ {
		if runs[i].start <= runs[i-1].end {
			return nil, formatErr("sourceEventSeqs ranges must be strictly increasing")
		}
	}
	if !expand {
		return nil, nil
	}
	vals := make([]event.Value, 0, n)
	for _, r := range runs {
		for s := r.start; s <= r.end; s++ {
			vals = append(vals, event.Int(s))
		}
	}
	return vals, nil
}

func gapError(row int, expected int64, got event.Value, gotOK bool) error {
	return formatErr("released v2 row " + strconv.Itoa(row) + " has seq gap (expected " +
		strconv.FormatInt(expected, 10) + ", got " + jsString(got, gotOK) + ")")
}

// accepted is one logical event the decoder let through: the row as stored (canonical bytes), its
// value as the checks read it (see rowValue), and whether the event differs from the row (expanded
// provenance ranges, so that its bytes must be re-encoded).
type accepted struct {
	row     event.Event
	v       event.Value
	changed bool
}

// v2Decoder is the released v2 row decoder's state: rows seen, events accepted, the inherited cut found
// so far and the first issue a recoverable read set aside.
type v2Decoder struct {
	seeded     bool
	recovery   Recovery
	row        int
	eventCount int64
	cut        int64 // -1 until an inherited end-seed is accepted
	issue      error
}

// atLine ties a format refusal to the artifact line (1 = the first line after the header) of the row
// that caused it.
func atLine(err error, line int) error {
	if fe, ok := err.(*FormatError); ok && fe.Line == 0 {
		fe.Line = line
	}
	return err
}

// unparsable takes a complete line that is not JSON; the codec never sees one (the framing parses rows),
// so it is the row decoder's malformed-row case with the v0 reader's text.
func (d *v2Decoder) unparsable(line int) error {
	d.row++
	err := &CorruptError{Message: "corrupt session log: unparsable committed event at line " + strconv.Itoa(line)}
	if d.recovery == Strict {
		return err
	}
	if d.issue == nil {
		d.issue = err
	}
	return nil
}

// decodeRow runs one parsed row through the v2 codec and hands an accepted event to emit.
func (d *v2Decoder) decodeRow(v event.Value, row event.Event, line int, emit func(accepted) error) error {
	n := d.row
	d.row++
	ev, changed, err := decodeEvent(v, n, d.eventCount)
	if err != nil {
		err = atLine(err, line)
		if d.recovery == Strict {
			return err
		}
		if d.issue == nil {
			d.issue = err
		}
		return nil
	}
	typ, _ := ev.Get("type")
	turnEnd := typ.Str == "turn/end"
	if d.issue != nil {
		if turnEnd {
			return d.issue
		}
		return nil
	}
	seq, ok := ev.Get("seq")
	if !ok || seq.Kind != event.KindNumber || seq.Num != float64(d.eventCount) {
		gap := atLine(gapError(n, d.eventCount, seq, ok), line)
		if d.recovery == Strict {
			return gap
		}
		d.issue = gap
		if turnEnd {
			return gap
		}
		return nil
	}
	d.eventCount++
	if typ.Str == "session/end-seed" {
		data, _ := ev.Get("data")
		if !isObject(data) {
			return atLine(formatErr("session/end-seed "+strconv.FormatInt(d.eventCount-1, 10)+" data must be an object"), line)
		}
		if isTrue(data, "inherited") {
			d.cut = d.eventCount - 1
		}
	}
	return emit(accepted{row: row, v: ev, changed: changed})
}

func (d *v2Decoder) finish() (int64, error) {
	if d.seeded && d.cut < 0 {
		return 0, formatErr("released v2 seeded Session lacks an inherited end-seed marker")
	}
	if !d.seeded && d.cut >= 0 {
		return 0, formatErr("released v2 unseeded Session contains an inherited end-seed marker")
	}
	return max(d.cut, 0), nil
}

// v3Decoder wraps the v2 decoder as the released v3 codec does: structural admission of every raw row
// before recovery can discard it, and canonical envelope validation of every decoded event, with its own
// recoverable issue and accepted inherited cut.
type v3Decoder struct {
	v2    v2Decoder
	issue error
	cut   int64
}

func (d *v3Decoder) decodeRow(v event.Value, row event.Event, line int, emit func(accepted) error) error {
	if err := structuralRow(v); err != nil {
		return atLine(err, line)
	}
	if err := eventAdmission(v); err != nil {
		return atLine(err, line)
	}
	return d.v2.decodeRow(v, row, line, func(a accepted) error {
		if err := eventAdmission(a.v); err != nil {
			return atLine(err, line)
		}
		if d.issue == nil {
			if err := v3Event(a.v); err != nil {
				err = atLine(err, line)
				if d.v2.recovery == Strict {
					return err
				}
				d.issue = err
			}
		}
		if d.issue != nil {
			if t, _ := a.v.Get("type"); t.Str == "turn/end" {
				return d.issue
			}
			return nil
		}
		if t, _ := a.v.Get("type"); t.Str == "session/end-seed" {
			if data, _ := a.v.Get("data"); isObject(data) && isTrue(data, "inherited") {
				seq, _ := a.v.Get("seq")
				d.cut = int64(seq.Num)
			}
		}
		return emit(a)
	})
}

func (d *v3Decoder) finish() (int64, error) {
	if d.issue == nil {
		return d.v2.finish()
	}
	if d.v2.seeded && d.cut < 0 {
		return 0, formatErr("format v3 seeded Session lacks an accepted inherited end-seed marker")
	}
	if !d.v2.seeded && d.cut >= 0 {
		return 0, formatErr("format v3 unseeded Session contains an inherited end-seed marker")
	}
	return max(d.cut, 0), nil
}
