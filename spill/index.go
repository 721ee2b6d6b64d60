package spill

import (
	"fmt"
	"strconv"

	"github.com/dshfs/dshfs/eventstore/event"
)

// Row is one spill/index.json row (docs/tree.md), fields in the file's key order.
type Row struct {
	Row      int    // position in the index, from 0; also the <row> of the file name
	CallID   string // the citing call (see Locator.CallID)
	Seq      int64  // the citing event
	Locator  string // the path as the text wrote it
	Status   Status
	Bytes    int64  // the target's size when Status is Present; written as null otherwise
	Shadowed bool   // the citing event is shadowed (e.g. the original of a pruned result)
	File     string // "spill/" + FileName(Row, CallID) when Present, "" (null) otherwise: only a present target is served
}

// FileName is the name, inside a session's spill/ directory, under which row's content is served:
// <row> zero-padded to 10 digits, "-", and the call id encoded with NameSegment.
func FileName(row int, callID string) string {
	return fmt.Sprintf("%010d-%s", row, NameSegment(callID))
}

// Index classifies every locator against r, in order, and numbers the rows. shadowed tells whether a
// citing seq is shadowed in the session's surface; nil means none is. A nil r treats every path as
// outside the roots.
func Index(locs []Locator, r *Roots, shadowed func(seq int64) bool) []Row {
	rows := make([]Row, 0, len(locs))
	for i, l := range locs {
		status, _, size := r.Resolve(l.Path)
		row := Row{
			Row:      i,
			CallID:   l.CallID,
			Seq:      l.Seq,
			Locator:  l.Path,
			Status:   status,
			Shadowed: shadowed != nil && shadowed(l.Seq),
		}
		if status == Present {
			row.Bytes = size
			row.File = "spill/" + FileName(i, l.CallID)
		}
		rows = append(rows, row)
	}
	return rows
}

// IndexJSON renders rows as spill/index.json: one compact JSON array and a line feed, keys in docs/tree.md
// order, strings escaped as the harness's JSON.stringify would escape them (the CLI prints the same
// bytes).
func IndexJSON(rows []Row) []byte {
	b := make([]byte, 0, 64+160*len(rows))
	b = append(b, '[')
	for i, r := range rows {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"row":`...)
		b = strconv.AppendInt(b, int64(r.Row), 10)
		b = append(b, `,"callId":`...)
		b = event.AppendQuote(b, r.CallID)
		b = append(b, `,"seq":`...)
		b = strconv.AppendInt(b, r.Seq, 10)
		b = append(b, `,"locator":`...)
		b = event.AppendQuote(b, r.Locator)
		b = append(b, `,"status":`...)
		b = event.AppendQuote(b, string(r.Status))
		b = append(b, `,"bytes":`...)
		if r.Status == Present {
			b = strconv.AppendInt(b, r.Bytes, 10)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, `,"shadowed":`...)
		b = strconv.AppendBool(b, r.Shadowed)
		b = append(b, `,"file":`...)
		if r.File != "" {
			b = event.AppendQuote(b, r.File)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, '}')
	}
	return append(b, ']', '\n')
}
