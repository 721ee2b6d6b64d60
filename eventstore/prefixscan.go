package eventstore

import (
	"fmt"

	"github.com/dshfs/dshfs/eventstore/event"
)

// PrefixScan keeps the contiguous committed prefix of a stored log, one stored line at a time, as the
// harness's SessionLogScanner does (spec/jsonl.md §5.4): the first line that does not decode, or whose
// events break the seq sequence, is remembered rather than thrown, and it and every line after it are
// left out; the remembered damage is thrown only when a line — a later one, or the gap's own — carries a
// turn/end, which proves a turn was committed after it. Every backend that stores lines (JSONL files, the
// fleet store's rows) loads through one.
type PrefixScan struct {
	Events []event.Event
	// Rows marks the events that are members of chunk rows with a safe seq (Prefix.RowMembers)
	Rows []uint64
	// Line is the number of the line taken last, 1 = the first after the header
	Line int
	// Issue is the damage remembered, nil while every line joined the prefix
	Issue error
	// Budget counts the kept events against the session's load budget
	Budget Budget
}

// Take takes the next stored line: the events it decodes to (row: the members of a chunk row), or why it
// does not decode. kept reports whether the line joined the prefix. err is Issue once a turn/end proves it
// committed, or the budget's refusal: the load fails with it. The caller may grow Events beforehand (a
// line's events are appended to it).
func (p *PrefixScan) Take(events []event.Event, row bool, decodeErr error) (kept bool, err error) {
	p.Line++
	if decodeErr != nil {
		if p.Issue == nil {
			p.Issue = fmt.Errorf("corrupt session log: unparsable committed event at line %d", p.Line)
		}
		return false, nil
	}
	if p.Issue != nil {
		if HasTurnEnd(events) {
			return false, p.Issue
		}
		return false, nil
	}
	start := len(p.Events)
	for _, e := range events {
		if e.Seq != int64(len(p.Events)) {
			expected := len(p.Events)
			p.Events = p.Events[:start]
			p.Issue = fmt.Errorf("corrupt session log: seq gap in committed region at line %d (expected %d, got %s)", p.Line, expected, e.SeqText())
			if HasTurnEnd(events) {
				return false, p.Issue
			}
			return false, nil
		}
		p.Events = append(p.Events, e)
	}
	if err := p.Budget.Add(p.Events[start:]); err != nil {
		return false, err
	}
	if row { // every member passed the seq check: its seq is its index, a non-negative safe integer
		p.Rows = markRowMembers(p.Rows, start, len(p.Events))
	}
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
