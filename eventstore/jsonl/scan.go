package jsonl

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/dshfs/dshfs/eventstore/event"
)

// scanner consumes the plaintext after the header record and keeps the contiguous event prefix, as the
// harness's SessionLogScanner does (spec/jsonl.md §5.4): lines split only on LF, a final fragment without LF
// is never parsed, the first unparsable line or seq gap is remembered and only thrown when a later line (or
// the offending line itself, for a gap) proves a turn was committed after it by carrying a turn/end.
type scanner struct {
	events    []event.Event
	input     int64 // bytes consumed, header included
	committed int64 // end of the last fully accepted line
	line      int   // event line number, 1 = first line after the header
	issue     error
	frag      []byte // an incomplete final record carried across writes
}

func newScanner(headerLen int64) *scanner {
	return &scanner{input: headerLen, committed: headerLen}
}

// write feeds the next plaintext bytes, which the events keep referencing; it returns the remembered issue once committed damage is proven.
func (s *scanner) write(chunk []byte) error {
	start := s.input
	s.input += int64(len(chunk))
	pos := 0
	for {
		nl := bytes.IndexByte(chunk[pos:], '\n')
		if nl < 0 {
			break
		}
		line := chunk[pos : pos+nl]
		if len(s.frag) > 0 {
			line = append(s.frag, line...)
			s.frag = nil
		}
		if err := s.consume(line, start+int64(pos+nl+1)); err != nil {
			return err
		}
		pos += nl + 1
	}
	if pos < len(chunk) {
		s.frag = append(s.frag, chunk[pos:]...)
	}
	return nil
}

func (s *scanner) consume(line []byte, end int64) error {
	s.line++
	decoded, err := decodeLine(line)
	if err != nil {
		if s.issue == nil {
			s.issue = fmt.Errorf("corrupt session log: unparsable committed event at line %d", s.line)
		}
		return nil
	}
	if s.issue != nil {
		if hasTurnEnd(decoded) {
			return s.issue
		}
		return nil
	}
	rowStart := len(s.events)
	for _, e := range decoded {
		if e.Seq != int64(len(s.events)) {
			expected := len(s.events)
			s.events = s.events[:rowStart]
			s.issue = fmt.Errorf("corrupt session log: seq gap in committed region at line %d (expected %d, got %s)", s.line, expected, e.SeqText())
			if hasTurnEnd(decoded) {
				return s.issue
			}
			return nil
		}
		s.events = append(s.events, e)
	}
	s.committed = end
	return nil
}

// decodeLine parses one complete record and expands a packed chunk row. Canonical lines alias the input
// without copying, so write's callers hand over buffers they never reuse (whole files, decoded frames).
func decodeLine(line []byte) ([]event.Event, error) {
	canon, err := event.Canonical(line)
	if err != nil {
		return nil, err
	}
	return event.DecodeRecord(canon)
}

func hasTurnEnd(events []event.Event) bool {
	for _, e := range events {
		if e.Type == "turn/end" {
			return true
		}
	}
	return false
}

var errHeaderless = errors.New("empty or header-less session log")
