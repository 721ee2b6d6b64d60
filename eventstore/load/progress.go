package load

import (
	"errors"
	"strconv"
	"sync"

	"github.com/dshfs/dshfs/eventstore/event"
)

// Progress carries a load's decoded events from the backend's goroutine to the checks' while the load
// runs: the eventstore.ProgressSink the store hands a progressive backend. Its zero value is not usable;
// see NewProgress.
type Progress struct {
	mu   sync.Mutex
	cond sync.Cond

	header  *event.Header
	path    string
	events  []event.Event     // a prefix of the load's final list
	rows    []uint64          // the row members (eventstore.Prefix.RowMembers), final in the words below len(events)/64
	packed  []event.PackedRow // the rows kept packed (eventstore.Prefix.Packed), once done
	done    bool              // the load succeeded: events and rows are the whole list
	aborted bool              // the load failed: nothing more comes
}

// NewProgress is a Progress no load has reported to yet.
func NewProgress() *Progress {
	p := &Progress{}
	p.cond.L = &p.mu
	return p
}

// Header is eventstore.ProgressSink.Header.
func (p *Progress) Header(h event.Header, path string) {
	p.mu.Lock()
	p.header, p.path = &h, path
	p.mu.Unlock()
	p.cond.Broadcast()
}

// Events is eventstore.ProgressSink.Events.
func (p *Progress) Events(events []event.Event, rows []uint64) {
	p.mu.Lock()
	p.events, p.rows = events, rows
	p.mu.Unlock()
	p.cond.Broadcast()
}

// Finish reports the load's result: the whole list, its header, its artifact's path and its row members.
func (p *Progress) Finish(h event.Header, path string, events []event.Event, rows []uint64) {
	p.FinishPacked(h, path, events, rows, nil)
}

// FinishPacked is Finish for a list with chunk rows kept packed (eventstore.Prefix.Packed).
func (p *Progress) FinishPacked(h event.Header, path string, events []event.Event, rows []uint64, packed []event.PackedRow) {
	p.mu.Lock()
	p.header, p.path, p.events, p.rows, p.packed, p.done = &h, path, events, rows, packed, true
	p.mu.Unlock()
	p.cond.Broadcast()
}

// record is event i of events (the finished list, or the checks' copy of it) with its record: a hollow
// member of a packed row is expanded from the row. The checks read no member's record but the log's last
// event's, whose seq and time the repair's closers take.
func (p *Progress) record(events []event.Event, i int) (event.Event, error) {
	p.mu.Lock()
	packed := p.packed
	p.mu.Unlock()
	e, err := event.MemberAt(events, packed, i)
	if err != nil {
		return event.Event{}, errors.New("load: event " + strconv.Itoa(i) + ": " + err.Error())
	}
	return e, nil
}

// Abort reports that the load failed; the checks stop.
func (p *Progress) Abort() {
	p.mu.Lock()
	p.aborted = true
	p.mu.Unlock()
	p.cond.Broadcast()
}

// errAborted ends the checks of a load that failed; the load's own error is the one reported.
var errAborted = errors.New("load aborted")

// waitHeader returns the header and path once reported.
func (p *Progress) waitHeader() (event.Header, string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.header == nil && !p.aborted {
		p.cond.Wait()
	}
	if p.aborted {
		return event.Header{}, "", errAborted
	}
	return *p.header, p.path, nil
}

// wait returns the list once it covers [0, hi) with whole words of rows, or once the load is done (then
// done is set and the list is the final one, which may be shorter than hi).
func (p *Progress) wait(hi int) (events []event.Event, rows []uint64, done bool, err error) {
	need := (hi + 63) &^ 63 // the word holding event hi-1 is final only when the list has passed it
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.done && !p.aborted && len(p.events) < need {
		p.cond.Wait()
	}
	if p.aborted {
		return nil, nil, false, errAborted
	}
	return p.events, p.rows, p.done, nil
}

// finished reports whether the load is over: done, or aborted.
func (p *Progress) finished() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done || p.aborted
}

// current is the list reported so far.
func (p *Progress) current() []event.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.events
}

// Stored is a Progress already done: the whole stored prefix, for a backend that is not progressive.
func Stored(h event.Header, path string, events []event.Event, rows []uint64) *Progress {
	p := NewProgress()
	p.Finish(h, path, events, rows)
	return p
}
