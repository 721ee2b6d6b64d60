package fleetsync

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
)

// A stored line is one record of a session's log as a JSONL store keeps it, without its LF: an event, or
// a packed chunk row standing for several consecutive events. The fleet store keeps the same lines, so
// that a session reads back from it exactly as it reads from the host's store.

// line is one stored line with the seqs it holds.
type line struct {
	raw         []byte
	first, last int64 // the seq of its first and last event
	events      int
}

// errStop ends a read early once everything needed was taken (a write error the reader returns as is).
var errStop = errors.New("fleetsync: stop reading")

// corruptError is damage the harness's loader refuses the whole session for: an unparsable line or a seq
// gap followed by a committed turn.
type corruptError struct{ msg string }

func (e *corruptError) Error() string { return e.msg }

// lineScanner splits a session's plaintext into its header and the committed lines, with the harness's
// scanning rules (spec/jsonl.md §5.4): lines split on LF only; a final fragment without LF is torn and
// never read; the first unparsable line or seq gap ends the committed prefix, and is corruption of the
// whole session only when a later line carries a turn/end. emit gets each committed line in order; the
// bytes it gets are its own.
type lineScanner struct {
	header []byte // the first line, once complete
	frag   []byte
	next   int64 // the seq the next line must start at
	lineNo int   // event line number, 1 = the first line after the header
	issue  string
	emit   func(line) error
	sc     event.RowScratch
	evs    []event.Event
	// bytes of plaintext consumed through the last committed line, header included
	committed int64
	input     int64
}

// Write takes the next plaintext bytes.
func (s *lineScanner) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		nl := bytes.IndexByte(p, '\n')
		if nl < 0 {
			s.frag = append(s.frag, p...)
			s.input += int64(len(p))
			break
		}
		l := p[:nl]
		if len(s.frag) > 0 {
			l = append(s.frag, l...)
			s.frag = nil
		}
		s.input += int64(nl + 1)
		p = p[nl+1:]
		if err := s.consume(l); err != nil {
			return n, err
		}
	}
	return n, nil
}

func (s *lineScanner) consume(l []byte) error {
	if s.header == nil {
		s.header = bytes.Clone(l)
		s.committed = s.input
		return nil
	}
	s.lineNo++
	var err error
	s.evs = s.evs[:0]
	if len(l) > 0 {
		var canon []byte
		if canon, err = event.Canonical(l); err == nil {
			s.evs, _, err = event.AppendStored(s.evs, canon, &s.sc)
		}
	} else {
		err = errors.New("empty line")
	}
	if s.issue != "" {
		// past the damage nothing is committed; a turn/end proves the damage was in the committed region
		if err == nil && hasTurnEnd(s.evs) {
			return &corruptError{s.issue}
		}
		return nil
	}
	if err != nil {
		s.issue = fmt.Sprintf("corrupt session log: unparsable committed event at line %d", s.lineNo)
		return nil
	}
	for i, e := range s.evs {
		if e.Seq != s.next+int64(i) {
			s.issue = fmt.Sprintf("corrupt session log: seq gap in committed region at line %d (expected %d, got %s)",
				s.lineNo, s.next+int64(i), e.SeqText())
			if hasTurnEnd(s.evs) {
				return &corruptError{s.issue}
			}
			return nil
		}
	}
	if len(s.evs) == 0 {
		// a line that stores no event (a chunk row of no members) holds no seq and adds nothing to the
		// log: the fleet store, whose rows are keyed by seq, has no place for it
		s.committed = s.input
		return nil
	}
	ln := line{raw: bytes.Clone(l), first: s.next, last: s.next + int64(len(s.evs)) - 1, events: len(s.evs)}
	s.next = ln.last + 1
	return s.emitLine(ln)
}

func (s *lineScanner) emitLine(l line) error {
	s.committed = s.input
	return s.emit(l)
}

func hasTurnEnd(evs []event.Event) bool {
	for _, e := range evs {
		if e.Type == "turn/end" {
			return true
		}
	}
	return false
}

// tornBytes is how many bytes past the committed lines were left behind (a torn fragment, or a tail
// after damage the harness tolerates).
func (s *lineScanner) tornBytes() int64 { return s.input - s.committed }

// sqliteLines turns a session's stored events (a backend of rows: SQLite) into stored lines: the lines
// the JSONL writer writes for them, in batches of at most rowBatch events (packed chunk rows where the
// harness packs), each row checked to expand back to exactly the events it stands for. A row that would
// not (an event whose bytes the row encoding does not keep) is stored as its events, one line each, so
// that the copy is lossless whatever the source holds.
func sqliteLines(events []event.Event) ([]line, error) {
	var out []line
	for i := 0; i < len(events); i += rowBatch {
		batch := events[i:min(len(events), i+rowBatch)]
		at := i
		for _, r := range event.PackRecords(batch, nil, event.Limits{}) {
			if r.Data == nil {
				if event.IsRowTag(r.Event.Type) {
					return nil, fmt.Errorf("event %d has the type %s of a packed row: no JSONL line stores it", at, stringify(r.Event.Type))
				}
				out = append(out, line{raw: r.Event.Raw, first: int64(at), last: int64(at), events: 1})
				at++
				continue
			}
			raw := rowLine(r)
			members := events[at : at+r.Members]
			if evs, _, err := event.DecodeStored(raw); err == nil && len(evs) == r.Members && sameEvents(evs, members) {
				out = append(out, line{raw: raw, first: int64(at), last: int64(at + r.Members - 1), events: r.Members})
				at += r.Members
				continue
			}
			for _, e := range members {
				out = append(out, line{raw: e.Raw, first: int64(at), last: int64(at), events: 1})
				at++
			}
		}
	}
	return out, nil
}

// rowBatch is how many events of a backend of rows are packed together: the JSONL converter's batch
// bound (a zstd frame's worth).
const rowBatch = 4096

// rowLine is a packed row as its JSONL line: {"type":TAG,"seq0":S,"time0":T,"data":DATA}.
func rowLine(r event.Record) []byte {
	b := make([]byte, 0, len(r.Data)+64)
	b = append(b, `{"type":`...)
	b = event.AppendQuote(b, r.Tag)
	b = append(b, `,"seq0":`...)
	b = event.AppendNumber(b, r.Seq0)
	b = append(b, `,"time0":`...)
	b = event.AppendNumber(b, r.Time0)
	b = append(b, `,"data":`...)
	b = append(b, r.Data...)
	return append(b, '}')
}

// sameEvents reports whether got are the first len(got) events of want, byte for byte.
func sameEvents(got, want []event.Event) bool {
	if len(got) > len(want) {
		return false
	}
	for i := range got {
		if !bytes.Equal(got[i].Raw, want[i].Raw) {
			return false
		}
	}
	return true
}

// stringify quotes a string as JSON for a message.
func stringify(s string) string { return string(event.Stringify(event.String(s))) }

// lineReader is where a session's stored lines come from.
type lineReader interface {
	// read sends the session's header line and then its committed lines, in order, to emit (returning
	// errStop from emit ends the read without error); torn is the bytes left behind after them.
	read(ctx context.Context, id string, header func([]byte) error, emit func(line) error) (torn int64, err error)
}

// rawReader reads a JSONL store's artifact text (zstd: its complete frames decoded) as it streams it.
type rawReader struct {
	st *eventstore.Store
}

func (r rawReader) read(ctx context.Context, id string, header func([]byte) error, emit func(line) error) (int64, error) {
	headerSent := false
	s := &lineScanner{}
	s.emit = func(l line) error {
		if !headerSent {
			headerSent = true
			if err := header(s.header); err != nil {
				return err
			}
		}
		return emit(l)
	}
	err := r.st.WriteRaw(ctx, id, s)
	if errors.Is(err, errStop) {
		return 0, nil
	}
	if err != nil {
		var we *eventstore.WriteError
		if errors.As(err, &we) {
			err = we.Err
			if errors.Is(err, errStop) {
				return 0, nil
			}
		}
		return 0, err
	}
	if s.header == nil {
		return 0, &corruptError{"empty or header-less session log"}
	}
	if !headerSent {
		if err := header(s.header); err != nil && !errors.Is(err, errStop) {
			return 0, err
		}
	}
	return s.tornBytes(), nil
}

// rowReader reads a backend of rows (SQLite) through its stored prefix.
type rowReader struct {
	b eventstore.Backend
}

func (r rowReader) read(ctx context.Context, id string, header func([]byte) error, emit func(line) error) (int64, error) {
	p, err := r.b.LoadStored(ctx, id)
	if err != nil {
		return 0, err
	}
	var torn int64
	if p.Torn != nil {
		torn = p.Torn.Bytes
	}
	if err := header(p.Header.Line()); err != nil {
		if errors.Is(err, errStop) {
			return torn, nil
		}
		return 0, err
	}
	lines, err := sqliteLines(p.Events)
	if err != nil {
		return 0, &corruptError{"not representable in the fleet store: " + err.Error()}
	}
	for _, l := range lines {
		if err := emit(l); err != nil {
			if errors.Is(err, errStop) {
				return torn, nil
			}
			return 0, err
		}
	}
	return torn, nil
}

// seqText is a seq for a message.
func seqText(n int64) string { return strconv.FormatInt(n, 10) }
