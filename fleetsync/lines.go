package fleetsync

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
)

// A stored line is one record of a session's log as a JSONL store keeps it, without its LF: an event, or
// a packed chunk row standing for several consecutive events. The fleet store keeps the same lines, so
// that a session reads back from it exactly as it reads from the host's store.

// line is one stored line with the seqs it holds.
type line struct {
	raw         []byte
	first, last int64 // the seq of its first and last event
	events      int
	// proven: the line is byte for byte the fleet store's line of the same seqs (known said so), and was
	// not decoded
	proven bool
}

// knownLine tells a line the fleet store already holds, byte for byte, at seq next: the seq of its last
// event, so that the scanner need not decode it. ok is false for any other line, which is decoded.
type knownLine func(raw []byte, next int64) (last int64, ok bool)

// errStop ends a read early once everything needed was taken (a write error the reader returns as is).
var errStop = errors.New("fleetsync: stop reading")

// corruptError is damage the harness's loader refuses the whole session for: an unparsable line or a seq
// gap followed by a committed turn.
type corruptError struct{ msg string }

func (e *corruptError) Error() string { return e.msg }

// lineScanner splits a session's plaintext into its header and the committed lines, with the harness's
// scanning rules (docs/harness.md#committed-prefix-and-torn-tails): lines split on LF only; a final fragment
// without LF is torn and never read; the first unparsable line or seq gap ends the committed prefix, and is
// corruption of the whole session only when a later line carries a turn/end. emit gets each committed line in
// order; the bytes it gets are its own.
type lineScanner struct {
	header []byte // the first line, once complete
	frag   []byte
	// prefix applies the rule to each line and keeps the scan's place (the seq the next line must start
	// at, the line number); it keeps no events (Stream)
	prefix eventstore.PrefixScan
	emit   func(line) error
	known  knownLine // nil: every line is decoded
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
	if s.known != nil && s.prefix.Issue == nil && len(l) > 0 {
		// a line the fleet store holds as it is: already accepted (decoded, its seqs checked) when it was
		// copied, so only the scan's place moves
		if last, ok := s.known(l, s.prefix.Next); ok {
			first := s.prefix.Next
			s.prefix.Line++
			s.prefix.Next = last + 1
			return s.emitLine(line{raw: l, first: first, last: last, events: int(last - first + 1), proven: true})
		}
	}
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
	first := s.prefix.Next
	kept, err := s.prefix.Take(s.evs, false, err)
	if err != nil {
		return &corruptError{err.Error()} // the budget is unlimited: Take fails only with proven damage
	}
	if !kept {
		return nil
	}
	if len(s.evs) == 0 {
		// a line that stores no event (a chunk row of no members) holds no seq and adds nothing to the
		// log: the fleet store, whose rows are keyed by seq, has no place for it
		s.committed = s.input
		return nil
	}
	return s.emitLine(line{raw: bytes.Clone(l), first: first, last: s.prefix.Next - 1, events: len(s.evs)})
}

func (s *lineScanner) emitLine(l line) error {
	s.committed = s.input
	return s.emit(l)
}

// tornBytes is how many bytes past the committed lines were left behind (a torn fragment, or a tail
// after damage the harness tolerates).
func (s *lineScanner) tornBytes() int64 { return s.input - s.committed }

// sqliteLines turns a session's stored events (a backend of rows: SQLite) into stored lines: the lines
// the JSONL writer writes for them, in batches of at most rowBatch events (packed chunk rows where the
// harness packs), each row checked to expand back to exactly the events it stands for. A row that would
// not (an event whose bytes the row encoding does not keep) is stored as its events, one line each, so
// that the copy is lossless whatever the source holds.
func sqliteLines(events []event.Event, t eventstore.Tuning) ([]line, error) {
	var out []line
	for i := 0; i < len(events); i += rowBatch {
		batch := events[i:min(len(events), i+rowBatch)]
		at := i
		for _, r := range event.PackRecords(batch, nil, event.Limits{}, t.N()) {
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

// cursor is where a read of a JSONL artifact ended cleanly — after a complete frame (zstd) or line (raw),
// every line before it committed — so that the next read of the same artifact starts there instead of at
// its beginning: a live session is read once, not once per batch appended to it.
type cursor struct {
	identity string // the artifact's storage: a replaced artifact is read from its start
	offset   int64  // file bytes through the last committed line (raw) or the complete frame ending it (zstd)
	next     int64  // the seq after the last line before offset
	lineNo   int    // event lines before offset
	header   []byte
	// tail is the SHA-256 of the artifact's bytes just before offset (at most tailWindow of them): a file
	// replaced by another copy of itself (a restored backup) can reuse the inode, but not the bytes that
	// end its log, which carry the events' own times and ids
	tail [32]byte
	v4   *v4State // a v4 artifact's: the log before offset (nil for any other)
}

// sealed is at with the hash of the bytes before its offset (nil when they do not read).
func sealed(f *os.File, at *cursor) *cursor {
	if at == nil {
		return nil
	}
	sum, ok := tailSum(f, at.offset)
	if !ok {
		return nil
	}
	at.tail = sum
	return at
}

// tailWindow is how many bytes before a cursor's offset are compared before a read resumes there.
const tailWindow = 4096

// tailSum hashes the tailWindow bytes of f before offset; ok is false when they cannot be read whole.
func tailSum(f *os.File, offset int64) (sum [32]byte, ok bool) {
	lo := max(0, offset-tailWindow)
	buf := make([]byte, offset-lo)
	if n, err := f.ReadAt(buf, lo); n != len(buf) && err != nil {
		return sum, false
	}
	return sha256.Sum256(buf), true
}

// readResult is what one read of a session found.
type readResult struct {
	torn int64   // bytes left behind after the committed lines
	at   *cursor // where the next read may start (nil: from the beginning)
}

// lineReader is where a session's stored lines come from.
type lineReader interface {
	// read sends the session's header line and then its committed lines past from (nil: all of them), in
	// order, to header and emit; errStop from either ends the read early without error.
	read(ctx context.Context, e eventstore.Entry, from *cursor, known knownLine, header func([]byte) error, emit func(line) error) (readResult, error)
	// resumes reports whether a read may start at from: the artifact is the one from was taken of, grown
	// only, its bytes before from's offset those the cursor saw.
	resumes(ctx context.Context, e eventstore.Entry, from *cursor) bool
}

// artifactOpener is a JSONL backend's safe open of an artifact (regular files inside the root only).
type artifactOpener interface {
	OpenArtifact(ctx context.Context, path string) (*os.File, eventstore.Artifact, error)
	Compression() jsonl.Compression
}

// fileReader reads a JSONL store's artifacts: raw mode a line at a time, zstd mode its complete frames
// (a torn final frame is never decoded), each from where the last clean read ended when the artifact is
// the same one and has only grown.
type fileReader struct {
	b artifactOpener
}

func (r fileReader) resumes(ctx context.Context, e eventstore.Entry, from *cursor) bool {
	f, art, err := r.b.OpenArtifact(ctx, e.Path)
	if err != nil {
		return false
	}
	defer f.Close()
	return resumable(f, art, from)
}

// resumable is resumes on an open artifact.
func resumable(f *os.File, art eventstore.Artifact, from *cursor) bool {
	if from.identity == "" || from.identity != art.Identity || art.Size < from.offset {
		return false
	}
	sum, ok := tailSum(f, from.offset)
	return ok && sum == from.tail
}

func (r fileReader) read(ctx context.Context, e eventstore.Entry, from *cursor, known knownLine, header func([]byte) error, emit func(line) error) (readResult, error) {
	f, art, err := r.b.OpenArtifact(ctx, e.Path)
	if err != nil {
		return readResult{}, err
	}
	defer f.Close()
	if from != nil && !resumable(f, art, from) {
		from = nil // replaced or cut back: read it whole
	}
	s := &lineScanner{prefix: eventstore.PrefixScan{Stream: true}, known: known}
	headerSent := false
	start := int64(0)
	if from != nil {
		s.header, s.prefix.Next, s.prefix.Line, start = from.header, from.next, from.lineNo, from.offset
		s.committed, s.input = start, start
		headerSent = true
		if err := header(from.header); err != nil {
			return readResult{}, stopped(err)
		}
	}
	s.emit = func(l line) error {
		if !headerSent {
			headerSent = true
			if err := header(s.header); err != nil {
				return err
			}
		}
		return emit(l)
	}
	// at is the cursor after the last clean boundary: nothing pending, nothing damaged
	var at *cursor
	zstd := r.b.Compression() == jsonl.Zstd
	mark := func(offset int64) {
		// raw: offset is where the committed lines end, a fragment after it is read again next time;
		// zstd: offset is a frame's end, clean only when its text ended with a complete line
		if (len(s.frag) == 0 || !zstd) && s.prefix.Issue == nil && s.header != nil {
			at = &cursor{identity: art.Identity, offset: offset, next: s.prefix.Next, lineNo: s.prefix.Line, header: s.header}
		}
	}
	mark(start)
	if zstd {
		err = r.readFrames(f, start, art.Size, s, mark)
	} else {
		err = r.readLines(f, start, s, mark)
	}
	if err != nil {
		return readResult{at: sealed(f, at)}, stopped(err)
	}
	if s.header == nil {
		return readResult{}, &corruptError{"empty or header-less session log"}
	}
	if !headerSent {
		if err := header(s.header); err != nil {
			return readResult{}, stopped(err)
		}
	}
	return readResult{torn: s.tornBytes(), at: sealed(f, at)}, nil
}

// stopped is err, or nil when it is errStop (an early end the caller asked for).
func stopped(err error) error {
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// readLines feeds a raw artifact from offset start to the scanner through a small buffer.
func (r fileReader) readLines(f *os.File, start int64, s *lineScanner, mark func(int64)) error {
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return &eventstore.IOError{Err: err}
	}
	buf := make([]byte, 256<<10)
	for {
		n, rerr := f.Read(buf)
		if n > 0 {
			if _, err := s.Write(buf[:n]); err != nil {
				return err
			}
			mark(s.committed) // raw: the plaintext offset is the file offset
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return &eventstore.IOError{Err: rerr}
		}
	}
}

// readFrames decodes the complete frames of a zstd artifact from offset start (a frame boundary) with the
// harness's rules and feeds their text to the scanner, a frame at a time.
func (r fileReader) readFrames(f *os.File, start, size int64, s *lineScanner, mark func(int64)) error {
	buf := make([]byte, size-start)
	n, err := f.ReadAt(buf, start)
	if err != nil && err != io.EOF {
		return &eventstore.IOError{Err: err}
	}
	buf = buf[:n]
	frames, _, err := jsonl.ScanFrames(buf, 0)
	if err != nil {
		return err
	}
	for _, fr := range frames {
		text, err := jsonl.RawText(buf[fr.Start:fr.End])
		if err != nil {
			return err
		}
		if _, err := s.Write(text); err != nil {
			return err
		}
		mark(start + fr.End)
	}
	return nil
}

// rowReader reads a backend of rows (SQLite) through its stored prefix.
type rowReader struct {
	b eventstore.Backend
	t eventstore.Tuning // the source store's: how parallel a batch's packing runs
}

func (rowReader) resumes(context.Context, eventstore.Entry, *cursor) bool { return false }

func (r rowReader) read(ctx context.Context, e eventstore.Entry, _ *cursor, _ knownLine, header func([]byte) error, emit func(line) error) (readResult, error) {
	p, err := r.b.LoadStored(ctx, e.ID)
	if err != nil {
		return readResult{}, err
	}
	var res readResult
	if p.Torn != nil {
		res.torn = p.Torn.Bytes
	}
	if err := header(p.Header.Line()); err != nil {
		return res, stopped(err)
	}
	lines, err := sqliteLines(p.Events, r.t)
	if err != nil {
		return readResult{}, &corruptError{"not representable in the fleet store: " + err.Error()}
	}
	for _, l := range lines {
		if err := emit(l); err != nil {
			return res, stopped(err)
		}
	}
	return res, nil
}
