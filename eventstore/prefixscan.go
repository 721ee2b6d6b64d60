package eventstore

import (
	"fmt"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/load"
)

// PrefixScan keeps the contiguous committed prefix of a stored log, one stored line at a time, as the
// harness's SessionLogScanner does (docs/harness.md#committed-prefix-and-torn-tails): the first line that
// does not decode, or whose events break the seq sequence, is remembered rather than thrown, and it and every
// line after it are left out; the remembered damage is thrown only when a line — a later one, or the gap's
// own — carries a turn/end, which proves a turn was committed after it. Every reader of stored lines goes
// through one: the JSONL and fleet store loads, and sync as it copies a log's lines into the fleet store.
type PrefixScan struct {
	Events []event.Event
	// Next is the seq the next line's first event must carry: the number of events kept, or where a
	// scan resumed
	Next int64
	// Rows marks the events that are members of chunk rows with a safe seq (Prefix.RowMembers)
	Rows []uint64
	// Line is the number of the line taken last, 1 = the first after the header
	Line int
	// Issue is the damage remembered, nil while every line joined the prefix
	Issue error
	// Budget counts the kept events against the session's load budget
	Budget Budget
	// Stream keeps nothing but the scan's place (Next, Line, Issue): Events and Rows stay empty. A scan
	// that hands each kept line on as it goes (a sync copying a log into another store) sets it.
	Stream bool
	// Packed are the chunk rows kept packed (TakePacked), in order: their members are Events' hollow
	// events (Prefix.Packed)
	Packed []event.PackedRow
}

// Take takes the next stored line: the events it decodes to (row: the members of a chunk row), or why it
// does not decode. kept reports whether the line joined the prefix. err is Issue once a turn/end proves it
// committed, or the budget's refusal: the load fails with it. The caller may grow Events beforehand (a
// line's events are appended to it).
func (p *PrefixScan) Take(events []event.Event, row bool, decodeErr error) (kept bool, err error) {
	return p.take(events, row, decodeErr, nil)
}

// TakePacked is Take for a chunk row kept packed: events are its hollow members (event.AppendStoredPacked),
// and a kept row joins Packed, its First the index of its first member in Events.
func (p *PrefixScan) TakePacked(events []event.Event, row event.PackedRow) (kept bool, err error) {
	return p.take(events, true, nil, &row)
}

func (p *PrefixScan) take(events []event.Event, row bool, decodeErr error, packed *event.PackedRow) (kept bool, err error) {
	p.Line++
	if decodeErr != nil {
		if p.Issue == nil {
			p.Issue = fmt.Errorf("corrupt session log: unparsable committed event at line %d", p.Line)
		}
		return false, nil
	}
	if p.Issue != nil {
		if load.HasTurnEnd(events) {
			return false, p.Issue
		}
		return false, nil
	}
	for i, e := range events {
		if e.Seq != p.Next+int64(i) {
			p.Issue = fmt.Errorf("corrupt session log: seq gap in committed region at line %d (expected %d, got %s)", p.Line, p.Next+int64(i), e.SeqText())
			if load.HasTurnEnd(events) {
				return false, p.Issue
			}
			return false, nil
		}
	}
	var rows []event.PackedRow
	if packed != nil {
		packed.First = int(p.Next)
		rows = []event.PackedRow{*packed}
	}
	if err := p.Budget.AddPacked(events, rows); err != nil {
		return false, err
	}
	if !p.Stream {
		p.Events = append(p.Events, events...)
		if row { // every member passed the seq check: its seq is its index, a non-negative safe integer
			p.Rows = markRowMembers(p.Rows, int(p.Next), int(p.Next)+len(events))
		}
		if packed != nil {
			p.Packed = append(p.Packed, *packed)
		}
	}
	p.Next += int64(len(events))
	return true, nil
}

// markRowMembers marks stored events from up to (not including) to as the members of one chunk row in rows
// (Prefix.RowMembers), growing it as needed.
func markRowMembers(rows []uint64, from, to int) []uint64 {
	for i := from; i < to; i++ {
		for i/64 >= len(rows) {
			rows = append(rows, 0)
		}
		rows[i/64] |= 1 << (i % 64)
	}
	return rows
}
