package views

import (
	"io"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/dshfs/dshfs/eventstore/event"
)

// packedSegment is how many events one piece of a packed events view holds at least (a piece ends with a
// row, never inside one), and packedParallelMin the list from which the pieces are made on the store's
// workers: the members' lines are most of a large view, and made on the writer's goroutine alone they would
// be a seventh of a cold `cat`'s CPU time with the other core idle.
// (Variables so that tests can make small views take the same paths.)
var (
	packedSegment     = 8192
	packedParallelMin = 4 * 8192
)

// writePackedEvents writes the events view of a session with packed rows: each row's members' lines are
// made as they are written, never kept with the session.
func (s *Session) writePackedEvents(w io.Writer, l *eventList) error {
	workers := 1
	if s.store != nil {
		workers = s.store.Tuning.N()
	}
	if len(l.events) < packedParallelMin || workers < 2 {
		return s.writePackedLines(w, l)
	}
	var cuts []int // where each piece starts, and the list's end
	for lo := 0; lo < len(l.events); {
		cuts = append(cuts, lo)
		hi := min(lo+packedSegment, len(l.events))
		if k := event.RowOf(l.rows, hi-1); k >= 0 {
			hi = l.rows[k].First + l.rows[k].Members
		}
		lo = hi
	}
	cuts = append(cuts, len(l.events))
	pieces := len(cuts) - 1
	// Every piece's buffer holds the largest piece, so that the few in flight are reused from piece to
	// piece: grown by append, or made at each piece's size, they would leave copies behind that a `cat`,
	// which runs no collection, keeps to its end (40 MB of a 500k-event session).
	largest := 0
	for i := range pieces {
		largest = max(largest, l.linesSize(cuts[i], cuts[i+1]))
	}
	results := make([]chan []byte, pieces)
	for i := range results {
		results[i] = make(chan []byte, 1)
	}
	// A worker takes a slot before it takes the next piece, so the pieces in flight are always the lowest
	// ones not written yet: the piece the writer waits for is never behind a full window.
	window := make(chan struct{}, 2*workers)
	free := make(chan []byte, 2*workers+1) // the buffers of pieces written, for the next pieces
	stop := make(chan struct{})
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case window <- struct{}{}:
				case <-stop:
					return
				}
				i := int(next.Add(1) - 1)
				if i >= pieces {
					<-window
					return
				}
				var buf []byte
				select {
				case buf = <-free:
				default:
					buf = make([]byte, 0, largest)
				}
				results[i] <- s.appendPackedLines(buf[:0], l, cuts[i], cuts[i+1])
			}
		})
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	for i := range pieces {
		buf := <-results[i]
		if _, err := w.Write(buf); err != nil {
			return &WriteError{Err: err}
		}
		select {
		case free <- buf:
		default:
		}
		<-window
	}
	return nil
}

// writePackedLines is writePackedEvents on the caller's goroutine: a line at a time, a row's lines at once
// from one buffer.
func (s *Session) writePackedLines(w io.Writer, l *eventList) error {
	scratch := lineScratch.Get().(*packedScratch)
	sc, buf := &scratch.sc, scratch.buf[:0]
	defer func() {
		sc.Release()
		if cap(buf) <= maxLineScratch {
			scratch.buf = buf[:0]
		}
		lineScratch.Put(scratch)
	}()
	nl := []byte{'\n'}
	rows := l.rows
	for i := 0; i < len(l.events); {
		if len(rows) > 0 && rows[0].First == i {
			var err error
			if buf, err = event.AppendPackedLines(buf[:0], rows[0], sc); err != nil {
				s.rowGone(err)
			}
			if _, err := w.Write(buf); err != nil {
				return &WriteError{Err: err}
			}
			i += rows[0].Members
			rows = rows[1:]
			continue
		}
		if _, err := w.Write(l.events[i].Raw); err != nil {
			return &WriteError{Err: err}
		}
		if _, err := w.Write(nl); err != nil {
			return &WriteError{Err: err}
		}
		i++
	}
	return nil
}

// packedScratch is what writePackedLines reuses: a mount's first walk writes the events view of thousands
// of small sessions, and each one's reader state and buffer would otherwise be an allocation.
type packedScratch struct {
	sc  event.RowScratch
	buf []byte
}

var lineScratch = sync.Pool{New: func() any { return new(packedScratch) }}

// maxLineScratch bounds the buffer lineScratch keeps: one row's lines, which a row of huge texts makes
// large.
const maxLineScratch = 1 << 20

// appendPackedLines appends the lines of l's events lo..hi (a range no row straddles) to buf.
func (s *Session) appendPackedLines(buf []byte, l *eventList, lo, hi int) []byte {
	var sc event.RowScratch
	k := sort.Search(len(l.rows), func(k int) bool { return l.rows[k].First >= lo })
	for i := lo; i < hi; {
		if k < len(l.rows) && l.rows[k].First == i {
			var err error
			if buf, err = event.AppendPackedLines(buf, l.rows[k], &sc); err != nil {
				s.rowGone(err)
			}
			i += l.rows[k].Members
			k++
			continue
		}
		buf = append(append(buf, l.events[i].Raw...), '\n')
		i++
	}
	return buf
}

// linesSize is the size of the lines of events lo..hi (a range no row straddles).
func (l *eventList) linesSize(lo, hi int) int {
	size := 0
	k := sort.Search(len(l.rows), func(k int) bool { return l.rows[k].First >= lo })
	for i := lo; i < hi; {
		if k < len(l.rows) && l.rows[k].First == i {
			size += int(l.rows[k].Bytes) + l.rows[k].Members
			i += l.rows[k].Members
			k++
			continue
		}
		size += len(l.events[i].Raw) + 1
		i++
	}
	return size
}
