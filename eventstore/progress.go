package eventstore

import (
	"context"
	"errors"
	"sync"

	"github.com/dshfs/dshfs/eventstore/event"
)

// ProgressiveBackend is a Backend that decodes a session's events in log order and can say, while it
// runs, which of them are final. Inspect then runs the load checks over the decoded events while the
// rest are still being decoded: decoding and checking a large session each took half of its load, and
// each left part of the other core idle.
type ProgressiveBackend interface {
	Backend
	// LoadStoredProgress is LoadStored reporting to sink as it goes (nil: not at all): the header before
	// any event, then the decoded list as it grows. What it reports is a prefix of the Prefix it
	// returns, or it returns an error.
	LoadStoredProgress(ctx context.Context, id string, sink ProgressSink) (*Prefix, error)
}

// ProgressSink receives a progressive load's reports; Progress is the one Inspect uses.
type ProgressSink interface {
	// Header reports the session's header and where its artifact is (Prefix.Path), before any event.
	Header(h event.Header, path string)
	// Events reports the decoded list so far. The backend must never change events[:len(events)]
	// again, nor the words of rows (Prefix.RowMembers) below len(events)/64, nor (when it grows the
	// list) the arrays it reported before: the sink reads them without a lock.
	Events(events []event.Event, rows []uint64)
}

var _ ProgressSink = (*Progress)(nil)

// Progress carries a load's decoded events from the backend's goroutine to the checks' while the load
// runs. Its zero value is not usable; see newProgress.
type Progress struct {
	mu   sync.Mutex
	cond sync.Cond

	header  *event.Header
	path    string
	events  []event.Event // a prefix of the load's final list
	rows    []uint64      // the row members (Prefix.RowMembers), final in the words below len(events)/64
	done    bool          // the load succeeded: events and rows are the whole list
	aborted bool          // the load failed: nothing more comes
}

func newProgress() *Progress {
	p := &Progress{}
	p.cond.L = &p.mu
	return p
}

// Header is ProgressSink.Header.
func (p *Progress) Header(h event.Header, path string) {
	p.mu.Lock()
	p.header, p.path = &h, path
	p.mu.Unlock()
	p.cond.Broadcast()
}

// Events is ProgressSink.Events.
func (p *Progress) Events(events []event.Event, rows []uint64) {
	p.mu.Lock()
	p.events, p.rows = events, rows
	p.mu.Unlock()
	p.cond.Broadcast()
}

// finish reports the load's result: the whole list.
func (p *Progress) finish(pr *Prefix) {
	p.mu.Lock()
	h := pr.Header
	p.header, p.path, p.events, p.rows, p.done = &h, pr.Path, pr.Events, pr.RowMembers, true
	p.mu.Unlock()
	p.cond.Broadcast()
}

// abort reports that the load failed; the checks stop.
func (p *Progress) abort() {
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

// current is the list reported so far.
func (p *Progress) current() []event.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.events
}

// loaded is a Progress already done: the whole prefix, for a backend that is not progressive.
func loaded(pr *Prefix) *Progress {
	p := newProgress()
	p.finish(pr)
	return p
}
