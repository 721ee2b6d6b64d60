package jsonl

import (
	"bytes"
	"errors"
	"sync"
	"unsafe"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
)

// scanner consumes the plaintext after the header record and keeps the contiguous event prefix, as the
// harness's SessionLogScanner does (docs/harness.md#committed-prefix-and-torn-tails): lines split only on LF,
// a final fragment without LF is never parsed, and each complete line goes to the PrefixScan.
type scanner struct {
	eventstore.PrefixScan
	input     int64  // bytes consumed, header included
	committed int64  // end of the last fully accepted line
	frag      []byte // an incomplete final record carried across writes
	// share is the fraction of the whole input consumed once the chunk being written is in (0: unknown);
	// writeChunk sizes the event list from it
	share float64
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
	decoded, row, err := decodeLine(line)
	return s.apply(decoded, row, err, end)
}

// apply takes one complete line's decoding result (decoded elsewhere, possibly in parallel); row says the
// line was a chunk row.
func (s *scanner) apply(decoded []event.Event, row bool, err error, end int64) error {
	kept, err := s.Take(decoded, row, err)
	if kept {
		s.committed = end
	}
	return err
}

// applyPacked is apply for a chunk row kept packed: decoded are its hollow members.
func (s *scanner) applyPacked(decoded []event.Event, row event.PackedRow, end int64) error {
	kept, err := s.TakePacked(decoded, row)
	if kept {
		s.committed = end
	}
	return err
}

// decodeLine parses one complete record and expands a packed chunk row. Canonical lines alias the input
// without copying, so write's callers hand over buffers they never reuse (whole files, decoded frames).
func decodeLine(line []byte) (events []event.Event, row bool, err error) {
	canon, err := event.Canonical(line)
	if err != nil {
		return nil, false, err
	}
	return event.DecodeStored(canon)
}

var errHeaderless = errors.New("empty or header-less session log")

// chunk is a piece of plaintext whose complete lines were decoded ahead of the scanner.
type chunk struct {
	size   int   // bytes of plaintext the chunk covers
	err    error // the chunk could not be produced (a zstd frame failed validation)
	lines  []decodedLine
	events *[]event.Event // every line's events, in order (from chunkEvents; the scanner copies them out)
	// head is the chunk's first line, without its LF, when the chunk has one: a fragment carried over from
	// the previous chunk ends there, and then lines[0], decoded without the fragment, is wrong
	head []byte
	tail []byte // the incomplete record after the last LF
	// rows are the chunk rows kept packed (predecode's packed), in order, First counting the chunk's events
	rows []event.PackedRow
}

type decodedLine struct {
	events int  // how many of the chunk's events are this line's
	row    bool // the line was a chunk row (event.DecodeStored)
	packed bool // the row is kept packed: its events are hollow, and the chunk's next row is it
	err    error
	end    int // offset just after the line's LF (for a run of failures: after the run's last line)
	// count is how many consecutive unparsable lines the entry stands for (1 for a parsed line): a file of
	// a billion empty lines keeps one entry per run, not per line, so its scan stays in bounded memory.
	count int
}

// errUnparsable stands for any line that does not decode; the scanner writes its own message with the
// line number, so one shared value spares an allocation per bad line.
var errUnparsable = errors.New("unparsable line")

// chunkEvents recycles the chunks' event lists: each is copied into the session's list and dropped, and
// a list per line (or per row) was an allocation for every line of a load.
var chunkEvents = sync.Pool{New: func() any { return new([]event.Event) }}

// rowScratch recycles predecode's row reader state: a small session's load is one piece, and a first walk
// loads thousands.
var rowScratch = sync.Pool{New: func() any { return new(event.RowScratch) }}

// maxPooledEvents bounds the lists chunkEvents keeps: a piece of tiny rows can expand to millions of
// events, and the pool would hold that list's memory until the collector empties it.
const maxPooledEvents = 1 << 16

// chunkLines recycles the chunks' line lists, as chunkEvents their event lists. A whole-load command paces
// no collection during its load (cmd/dshfs, wholeLoadCollector), so every piece's list of lines, garbage
// once the scanner has applied it, would stay in memory to the end: 10 MB of a 500k-event session's peak.
var chunkLines = &sync.Pool{New: func() any { return new([]decodedLine) }}

// newLines is an empty line list from chunkLines, with room for at least n lines.
func newLines(n int) []decodedLine {
	l := (*chunkLines.Get().(*[]decodedLine))[:0]
	if cap(l) < n {
		l = make([]decodedLine, 0, n)
	}
	return l
}

// release returns a chunk's event list to chunkEvents, cleared so that it keeps no plaintext alive, and
// its line list to chunkLines.
func (c *chunk) release() {
	c.rows = nil
	if c.lines != nil && cap(c.lines) <= maxPooledEvents {
		clear(c.lines[:cap(c.lines)])
		l := c.lines[:0]
		chunkLines.Put(&l)
	}
	c.lines = nil
	if c.events == nil {
		return
	}
	if cap(*c.events) <= maxPooledEvents {
		clear(*c.events)
		*c.events = (*c.events)[:0]
		chunkEvents.Put(c.events)
	}
	c.events = nil
}

// predecode splits plain into lines and decodes each; it is pure, so chunks can be decoded in parallel.
//
// With own set, the events keep no reference to plain, which the caller may reuse: the bytes of every line
// that is not a chunk row (and of every row kept packed) are copied into one buffer of their exact size. An
// expanded row's bytes are not kept at all, since its events are built afresh.
// Without own, the events alias plain, which must then never change.
// With packed set, the rows the fast reader takes are kept packed (event.AppendStoredPacked).
func predecode(plain []byte, own, packed bool) chunk {
	// Not sized by the LFs: a megabyte of empty lines is one run, not a million entries allocated (and
	// cleared) up front; append grows the list for the lines that parse. But not beyond them either: a
	// small session's one piece has a few dozen lines, and 256 entries for it were most of what its
	// decode allocated.
	c := chunk{size: len(plain), lines: newLines(min(256, bytes.Count(plain, []byte{'\n'})))}
	c.events = chunkEvents.Get().(*[]event.Event)
	evs := *c.events
	sc := rowScratch.Get().(*event.RowScratch)
	defer func() {
		sc.Release()
		rowScratch.Put(sc)
	}()
	pos := 0
	for {
		nl := bytes.IndexByte(plain[pos:], '\n')
		if nl < 0 {
			break
		}
		if pos == 0 {
			c.head = plain[:nl]
		}
		before := len(evs)
		row, kept := false, false
		err := errUnparsable
		if nl > 0 { // an empty line never parses: no need to ask
			var canon []byte
			if canon, err = event.Canonical(plain[pos : pos+nl]); err == nil {
				if packed {
					var pr event.PackedRow
					if evs, row, pr, kept, err = event.AppendStoredPacked(evs, canon, sc); err == nil && kept {
						c.rows = append(c.rows, pr)
					}
				} else {
					evs, row, err = event.AppendStored(evs, canon, sc)
				}
			}
			if err != nil {
				evs, err, kept = evs[:before], errUnparsable, false
			}
		}
		// a run of failures merges, except into the first line: writeChunk may have to replace that one
		if n := len(c.lines); err != nil && n > 1 && c.lines[n-1].err != nil {
			c.lines[n-1].count++
			c.lines[n-1].end = pos + nl + 1
		} else {
			c.lines = append(c.lines, decodedLine{len(evs) - before, row, kept, err, pos + nl + 1, 1})
		}
		pos += nl + 1
	}
	c.tail = plain[pos:]
	*c.events = evs
	if own {
		c.head, c.tail = bytes.Clone(c.head), bytes.Clone(c.tail)
		c.own(plain)
	}
	return c
}

// add appends chunk d, which follows c's text (and begins after an LF: c has no tail), to c, and
// releases d's event list.
func (c *chunk) add(d chunk) {
	if len(c.lines) == 0 && c.size == 0 {
		c.head = d.head
	}
	for _, r := range d.rows {
		r.First += len(*c.events)
		c.rows = append(c.rows, r)
	}
	for _, l := range d.lines {
		l.end += c.size
		// a run of failures merges across the seam too, except into the first line (see predecode)
		if n := len(c.lines); l.err != nil && n > 1 && c.lines[n-1].err != nil {
			c.lines[n-1].count += l.count
			c.lines[n-1].end = l.end
			continue
		}
		c.lines = append(c.lines, l)
	}
	*c.events = append(*c.events, *d.events...)
	c.size += d.size
	d.release()
}

// own moves the events that alias plain into one buffer of their exact size, and the packed rows that do
// into another: a load that expands its rows once checked (Store.Inspect) drops the rows' bytes then,
// which a buffer shared with the events would keep as long as any of them lives.
func (c *chunk) own(plain []byte) {
	evs := *c.events
	kept, rows := 0, 0
	for i := range evs {
		if aliases(evs[i].Raw, plain) {
			kept += len(evs[i].Raw)
		}
	}
	for i := range c.rows {
		if aliases(c.rows[i].Raw, plain) {
			rows += len(c.rows[i].Raw)
		}
	}
	buf := make([]byte, 0, kept)
	move := func(raw []byte) []byte {
		at := len(buf)
		buf = append(buf, raw...)
		return buf[at:len(buf):len(buf)]
	}
	for i := range evs {
		if raw := evs[i].Raw; aliases(raw, plain) {
			evs[i].Raw = move(raw)
		}
	}
	if rows == 0 {
		return
	}
	buf = make([]byte, 0, rows)
	for i := range c.rows {
		if raw := c.rows[i].Raw; aliases(raw, plain) {
			c.rows[i].Raw = move(raw)
		}
	}
}

// aliases reports whether b lies within buf.
func aliases(b, buf []byte) bool {
	if len(b) == 0 || len(buf) == 0 {
		return false
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= start && p < start+uintptr(len(buf))
}

// writeChunk is write for a predecoded chunk. A fragment carried over from the previous chunk ends at
// the chunk's first LF, so in that rare case the first line is decoded again with the fragment before it.
func (s *scanner) writeChunk(c chunk) error {
	defer c.release()
	start := s.input
	s.input += int64(c.size)
	evs, lines, rows := *c.events, c.lines, c.rows
	if need := len(s.Events) + len(evs); need > cap(s.Events) {
		s.grow(need)
	}
	if len(s.frag) > 0 && len(lines) > 0 {
		line := append(s.frag, c.head...)
		s.frag = nil
		if err := s.consume(line, start+int64(lines[0].end)); err != nil {
			return err
		}
		if lines[0].packed {
			rows = rows[1:]
		}
		evs, lines = evs[lines[0].events:], lines[1:]
	}
	for _, l := range lines {
		var err error
		if l.packed {
			err = s.applyPacked(evs[:l.events], rows[0], start+int64(l.end))
			rows = rows[1:]
		} else {
			err = s.apply(evs[:l.events], l.row, l.err, start+int64(l.end))
		}
		if err != nil {
			return err
		}
		evs = evs[l.events:]
		s.Line += l.count - 1 // the rest of a run of unparsable lines
	}
	if len(c.tail) > 0 {
		s.frag = append(s.frag, c.tail...)
	}
	return nil
}

// grow makes room for need events, sized by how much of the input the scan has consumed (see
// eventstore.GrowTo for why not slices.Grow).
func (s *scanner) grow(need int) { s.Events = eventstore.GrowTo(s.Events, need, s.share) }

// list is the events scanned, without more than a quarter of slack: the list lives as long as the
// session, and grow can leave room that was not needed.
func (s *scanner) list() []event.Event { return eventstore.Trim(s.Events) }

// decodeParallel produces the chunks for n pieces of input in order, running produce on up to workers
// goroutines; consume sees chunk i only after chunks 0..i-1 and may stop the run by
// returning an error (pieces still in flight are then finished and discarded).
func decodeParallel(workers, n int, produce func(i int) chunk, consume func(chunk) error) error {
	if workers > n {
		workers = n
	}
	if workers <= 1 {
		for i := 0; i < n; i++ {
			if err := consume(produce(i)); err != nil {
				return err
			}
		}
		return nil
	}
	results := make([]chan chunk, n)
	for i := range results {
		results[i] = make(chan chunk, 1)
	}
	// The dispatcher takes a window slot before handing out an index, so work never runs more than the
	// window ahead of the consumer and the index the consumer waits for is always already dispatched.
	window := make(chan struct{}, 4*workers)
	next := make(chan int)
	done := make(chan struct{})
	// On an early return the pieces in flight are finished before it, not abandoned: produce reads the
	// caller's input, which may go as soon as this returns (scanZstd's offHeap mapping).
	var working sync.WaitGroup
	defer working.Wait()
	defer close(done)
	go func() {
		defer close(next)
		for i := 0; i < n; i++ {
			select {
			case window <- struct{}{}:
			case <-done:
				return
			}
			select {
			case next <- i:
			case <-done:
				return
			}
		}
	}()
	for w := 0; w < workers; w++ {
		working.Go(func() {
			for i := range next {
				results[i] <- produce(i)
			}
		})
	}
	for i := 0; i < n; i++ {
		c := <-results[i]
		<-window
		if err := consume(c); err != nil {
			return err
		}
	}
	return nil
}

// splitLines cuts b into about n pieces that end just after an LF (the last piece takes the rest).
func splitLines(b []byte, n int) [][]byte {
	if n < 1 {
		n = 1
	}
	size := len(b)/n + 1
	var out [][]byte
	for len(b) > 0 {
		if len(b) <= size {
			out = append(out, b)
			break
		}
		nl := bytes.IndexByte(b[size:], '\n')
		if nl < 0 {
			out = append(out, b)
			break
		}
		cut := size + nl + 1
		out = append(out, b[:cut])
		b = b[cut:]
	}
	return out
}
