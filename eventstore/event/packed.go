package event

import (
	"errors"
	"sort"
)

// A loaded session's chunk rows are most of its memory once expanded: the 500k-event bench session's
// members are 56 MB of records, beside 32 MB of plaintext, written once and read again only by the views
// that print them. A load that keeps a row packed puts its members in the event list as hollow events (Type
// and Seq set, Raw nil: all that the load checks and the surface fold read of a row member) and keeps the
// row itself as a PackedRow; a reader that needs the members' bytes asks for them (ExpandPacked,
// AppendPackedLines), and the bytes are what AppendExpand makes of the row.

// PackedRow is a chunk row a loaded event list keeps as stored. Its members are the list's hollow events
// from index First on, one per member.
type PackedRow struct {
	First int    // the list index of the row's first member
	Raw   []byte // the row's canonical line, as the load read it
	// Members is how many events the row stands for.
	Members int
	// Bytes is the size of the members' records (what their Raw would hold): a load's budget counts it.
	Bytes int64
	// Newest is the latest time of a member, in whole milliseconds.
	Newest int64
}

// RowOf is the index in rows (in list order) of the row whose members include list index i, or -1.
func RowOf(rows []PackedRow, i int) int {
	k := sort.Search(len(rows), func(k int) bool { return rows[k].First+rows[k].Members > i })
	if k == len(rows) || rows[k].First > i {
		return -1
	}
	return k
}

// MemberAt is event i of a list whose packed rows are rows, with its record: events[i] itself unless it is
// a hollow member, which is expanded from its row alone.
func MemberAt(events []Event, rows []PackedRow, i int) (Event, error) {
	if e := events[i]; len(rows) == 0 || !e.IsHollow() {
		return e, nil
	}
	k := RowOf(rows, i)
	if k < 0 {
		return Event{}, errNoRow
	}
	members, err := ExpandPacked(nil, rows[k], nil)
	if err != nil {
		return Event{}, err
	}
	return members[i-rows[k].First], nil
}

// errNoRow says that a hollow event stands in a list where no packed row covers it.
var errNoRow = errors.New("hollow event outside every packed row")

// IsHollow reports whether e stands for a packed row's member: it has no bytes of its own.
func (e Event) IsHollow() bool { return e.Raw == nil }

// errPackedRow says that a row kept packed no longer reads as one, which only a changed Raw can cause.
var errPackedRow = errors.New("packed chunk row no longer reads as a chunk row")

// AppendStoredPacked is AppendStored keeping a row packed: a row the fast reader takes (one laid out as the
// harness's encoder writes it, valid) appends its members as hollow events and returns the row (packed
// true; First is the index of its first member in the list returned); any other line decodes as
// AppendStored decodes it. raw is kept by the row, so it must not change.
func AppendStoredPacked(dst []Event, raw []byte, sc *RowScratch) (events []Event, row bool, pr PackedRow, packed bool, err error) {
	ev := trustedEvent(raw)
	if !IsRowTag(ev.Type) {
		return append(dst, ev), false, PackedRow{}, false, nil
	}
	if sc == nil {
		sc = &RowScratch{}
	}
	run, ok := fastRow(raw, ev.Type, sc)
	if !ok {
		events, row, err = AppendStored(dst, raw, sc)
		return events, row, PackedRow{}, false, err
	}
	pr = PackedRow{First: len(dst), Raw: raw, Members: run.members()}
	pr.Bytes, pr.Newest = run.recordSizes()
	for k := range pr.Members {
		dst = append(dst, Event{Type: "assistant/chunk", Seq: seqFromInt(int64(run.Seq0 + float64(k)))})
	}
	return dst, true, pr, true, nil
}

// recordSizes is the total size of the records AppendExpand makes of r, and its latest member time.
func (r ChunkRun) recordSizes() (bytes, newest int64) {
	var prefixBuf [160]byte
	prefix := len(r.memberPrefix(prefixBuf[:0]))
	const envelope = len(`{"type":"assistant/chunk","seq":`) + len(`,"time":`) + len(`}}}`)
	t := r.Time0
	newest = int64(t)
	for k := range r.members() {
		if k > 0 {
			t += r.DT[k-1]
			newest = max(newest, int64(t))
		}
		bytes += int64(envelope + prefix + r.textBytes(k) + integerLen(r.Seq0+float64(k)) + integerLen(t))
	}
	return bytes, newest
}

// integerLen is the length of AppendNumber's spelling of f, a safe integer (a fast reader's row has only
// those): its digits and a sign.
func integerLen(f float64) int {
	n := int64(f)
	l := 1
	if n < 0 {
		l, n = 2, -n
	}
	for ; n >= 10; n /= 10 {
		l++
	}
	return l
}

// packedRun reads a packed row again, with sc's memory (nil: its own).
func packedRun(row PackedRow, sc *RowScratch) (ChunkRun, error) {
	if sc == nil {
		sc = &RowScratch{}
	}
	run, ok := fastRow(row.Raw, trustedEvent(row.Raw).Type, sc)
	if !ok || run.members() != row.Members {
		return ChunkRun{}, errPackedRow
	}
	return run, nil
}

// ExpandPacked appends the events a packed row stands for to dst, each with its record, as AppendExpand
// makes them. sc, when not nil, is reused from one row to the next.
func ExpandPacked(dst []Event, row PackedRow, sc *RowScratch) ([]Event, error) {
	run, err := packedRun(row, sc)
	if err != nil {
		return dst, err
	}
	return run.AppendExpand(dst), nil
}

// AppendPackedLines appends the records of a packed row's members to buf, each followed by a line feed:
// the lines events.jsonl holds for them, written without making the members' events.
func AppendPackedLines(buf []byte, row PackedRow, sc *RowScratch) ([]byte, error) {
	run, err := packedRun(row, sc)
	if err != nil {
		return buf, err
	}
	var prefixBuf [160]byte
	prefix := run.memberPrefix(prefixBuf[:0])
	t := run.Time0
	for k := range run.members() {
		if k > 0 {
			t += run.DT[k-1]
		}
		buf = append(run.appendMember(buf, prefix, k, t), '\n')
	}
	return buf, nil
}

// Materialize returns events with every packed row's members given their records: a new list when rows is
// not empty (events itself is not written: a reader may be walking it), events itself otherwise.
func Materialize(events []Event, rows []PackedRow) ([]Event, error) {
	if len(rows) == 0 {
		return events, nil
	}
	out := make([]Event, len(events))
	copy(out, events)
	if err := MaterializeInPlace(out, rows); err != nil {
		return nil, err
	}
	return out, nil
}

// MaterializeInPlace is Materialize writing the records into events itself, for a list nothing else reads
// yet (a load's, before it is returned).
func MaterializeInPlace(events []Event, rows []PackedRow) error {
	var sc RowScratch
	var members []Event
	for _, row := range rows {
		var err error
		if members, err = ExpandPacked(members[:0], row, &sc); err != nil {
			return err
		}
		if row.First < 0 || row.First+len(members) > len(events) {
			return errPackedRow
		}
		for k, m := range members {
			events[row.First+k].Raw = m.Raw
		}
	}
	return nil
}
