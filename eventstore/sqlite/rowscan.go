package sqlite

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
)

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
