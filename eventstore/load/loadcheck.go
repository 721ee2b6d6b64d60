package load

import (
	"errors"
	"strconv"
	"sync"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/surface"
)

// The harness checks a stored log in whole-log passes, one after another (parse, the retired-vocabulary
// scans, upgrade and message shape, vocabulary, the repair planner's scan, the restore-mode seed checks),
// so the error it reports is the first failing event of the first failing pass. Running the passes that
// way here meant holding every parsed record from the first pass to the last: 131 MB of records for a
// 500k-event log, more than the session itself. So the passes run block by block instead, and an error
// is kept with its pass. A later block still runs the passes before the failed one, because an earlier
// pass failing anywhere wins; the passes after it are skipped, because none of their errors can. A parse
// error wins outright. The result is the same error, and the same events, as whole-log passes give.

// pass is one of the load's whole-log checks, in the harness's order.
type pass int

const (
	passParse       pass = iota // what the checks read of each event (loadRecord)
	passHeaderDelta             // assertSupportedEvents' three scans, one pass each
	passModeSet                 //
	passFallback                //
	passMigrate                 // upgrades and the message-shape check, in log order (adoptStoredEvents)
	passVocabulary              // assertEventsSupported
	passTurns                   // the repair planner's scan (interruptedTurnClosers)
	passSeed                    // the restore-mode constructor's checks of each seed event
	passCount
)

// checkBlock is how many events one block of the passes covers; a variable so tests can make blocks tiny.
var checkBlock = 16384

// logCheck runs the passes over one stored log.
type logCheck struct {
	id, path string
	h        event.Header
	sc       Surface
	feed     *Progress     // where the stored events come from, as they are decoded
	stored   []event.Event // the stored events the passes have reached (and more)
	out      []event.Event // the normalized log; stored itself until an upgrade changes an event
	copied   bool          // out is a copy of stored

	end    pass  // the passes run are those before end: passTurns for ReadStored, passCount for Inspect
	failed pass  // the earliest pass that failed so far (end when none)
	err    error // that pass's first error

	messageIDs map[float64]string // the upgrade pass's memory of message ids, by seq
	turns      *turnScan

	// the current block's parse (parsedBlock)
	recs  []event.Value
	kind  []recKind
	quick []quickMessage
	// spare holds the arrays of blocks the passes are done with, for the next parse: at most three blocks
	// are alive at once (one in the passes, one queued, one being parsed), and allocating each block's
	// anew was 31 MB for a 500k-event load
	spare chan parsedBlock
	// par spreads a block's parse over the program's workers
	par Parallel
}

func newLogCheck(id string, h event.Header, feed *Progress, path string, end pass, par Parallel) *logCheck {
	return &logCheck{id: id, path: path, h: h, feed: feed, end: end, failed: end,
		messageIDs: map[float64]string{}, turns: newTurnScan(), spare: make(chan parsedBlock, 3), par: par}
}

// advance makes the events the feed has delivered so far the ones the passes read.
func (c *logCheck) advance(events []event.Event) {
	c.stored = events
	if !c.copied {
		c.out = events
	} else if len(c.out) < len(events) {
		c.out = append(c.out, events[len(c.out):]...)
	}
}

// run runs the passes over every block, and returns the first error whole-log passes would report
// before passSeed (whose errors rank after the checks of closers; see closers).
//
// The next block is parsed while the passes run over this one: parsing is spread over the cores, the
// passes are serial, and on their own they would leave the other cores idle for a sixth of a large load.
// A block is parsed as soon as the feed has delivered its events, so with a progressive backend the
// checks run while the rest of the log is decoded.
func (c *logCheck) run() error {
	// produce parses the block from lo on, once the load has decoded it: ok is false when the list ended
	// before lo, last is set when nothing can follow the block (the list's end, or a parse error: nothing
	// after one can be reported)
	produce := func(lo int) (b parsedBlock, ok, last bool) {
		events, rows, done, err := c.feed.wait(lo + checkBlock)
		if err == nil && lo >= len(events) {
			return b, false, true
		}
		b.err = err
		if err == nil {
			b = c.parse(events, rows, lo, min(len(events), lo+checkBlock))
		}
		return b, true, b.err != nil || done && b.hi == len(events)
	}
	// consume runs the passes over a block; false: a parse error ended the checks
	consume := func(b parsedBlock) bool {
		c.passes(b)
		if c.failed == passParse {
			return false
		}
		select {
		case c.spare <- b:
		default:
		}
		return true
	}
	if c.feed.finished() {
		// the load is over (a small session's is, before its checks start): there is no overlap to
		// gain, and a goroutine of the parse's own grew a stack for it on every small load
		for lo := 0; ; lo += checkBlock {
			b, ok, last := produce(lo)
			if !ok {
				break
			}
			if !consume(b) {
				return c.err
			}
			if last {
				break
			}
		}
	} else {
		next := make(chan parsedBlock, 1)
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			defer close(next)
			for lo := 0; ; lo += checkBlock {
				b, ok, last := produce(lo)
				if !ok {
					return
				}
				select {
				case next <- b:
				case <-stop:
					return
				}
				if last {
					return
				}
			}
		}()
		for b := range next {
			if !consume(b) {
				return c.err
			}
		}
	}
	c.advance(c.feed.current()) // the whole list: the loop ended at its end
	if c.failed < min(c.end, passSeed) {
		return c.err
	}
	return nil
}

func (c *logCheck) fail(p pass, err error) {
	if p < c.failed {
		c.failed, c.err = p, err
	}
}

// parsedBlock is the parse pass over stored events lo..hi: the records the later passes read, and what
// each event is (recKind). The record of an unparsed event is the zero Value, except for a bracket's:
// its number (bracketEvent), which only the turns pass reads.
type parsedBlock struct {
	lo, hi int
	events []event.Event // the feed's list when the block was parsed, which covers it
	recs   []event.Value
	kind   []recKind
	quick  []quickMessage // what quickEvent read of a recQuick event
	err    error
}

// recKind is what the parse pass made of an event.
type recKind uint8

const (
	recParsed  recKind = iota // parsed (loadRecord): the passes read its record
	recPlain                  // plainEnvelope: unparsed; its position and surface markers remain to check
	recMember                 // a chunk row's member (rowMember): unparsed, and only its position remains
	recBracket                // bracketEvent: its record is its number; it carries no surface markers
	recQuick                  // quickEvent: unparsed; the block's quick entry holds what the passes take
)

// unparsed reports whether the passes must not read k's record as one.
func (k recKind) unparsed() bool { return k != recParsed }

// parse parses events lo..hi of events, whose row members rows marks.
func (c *logCheck) parse(events []event.Event, rows []uint64, lo, hi int) parsedBlock {
	b := parsedBlock{lo: lo, hi: hi, events: events}
	select {
	case old := <-c.spare:
		b.recs, b.kind, b.quick = old.recs[:0], old.kind[:0], old.quick[:0]
	default:
	}
	if b.recs == nil {
		if a, ok := blockArrays.Get().(*parsedBlock); ok {
			b.recs, b.kind, b.quick = a.recs[:0], a.kind[:0], a.quick[:0]
		}
	}
	if cap(b.recs) < hi-lo {
		n := blockCap(hi - lo)
		b.recs, b.kind, b.quick = make([]event.Value, hi-lo, n), make([]recKind, hi-lo, n), make([]quickMessage, hi-lo, n)
	} else {
		b.recs, b.kind, b.quick = b.recs[:hi-lo], b.kind[:hi-lo], b.quick[:hi-lo]
		clear(b.recs) // an unparsed event's record must read as the zero Value
		clear(b.quick)
	}
	// Parsing is independent per event and is most of a large load, so it is spread over the workers; the
	// first failing index wins, as in a sequential pass.
	b.err = c.par.run(hi-lo, 4096, func(x, y int) error {
		for i := x; i < y; i++ {
			// recs[i] stays the zero Value for an unparsed event: nothing below reads more than its
			// Type and Seq
			e := events[lo+i]
			if rowMember(rows, lo+i) {
				b.kind[i] = recMember
				continue
			}
			if plainEnvelope(e) {
				b.kind[i] = recPlain
				continue
			}
			if n, ok := bracketEvent(e); ok {
				b.kind[i] = recBracket
				b.recs[i] = event.Number(n) // not a record: the bracket's number, for the turns pass
				continue
			}
			if q, ok := quickEvent(e); ok {
				b.kind[i], b.quick[i] = recQuick, q
				continue
			}
			rec, err := loadRecord(e)
			if err != nil {
				return err
			}
			b.kind[i], b.recs[i] = recParsed, rec
		}
		return nil
	})
	return b
}

// blockArrays keeps the arrays of parsed blocks between loads. A mount's first walk loads thousands of
// small sessions, one block each, and allocating every block's arrays anew was an eighth of what the walk
// allocated; the collector's work follows it.
var blockArrays sync.Pool

// release hands the block arrays of a finished run to the next load. Nothing the run returned refers to
// them: the passes copy what they keep out of a record, as they must already for the blocks a long load
// reuses (spare).
func (c *logCheck) release() {
	for _, b := range c.finishedBlocks() {
		clear(b.recs[:cap(b.recs)]) // no record's tree outlives its load through the pool
		clear(b.quick[:cap(b.quick)])
		blockArrays.Put(&parsedBlock{recs: b.recs[:0], kind: b.kind[:0], quick: b.quick[:0]})
	}
}

// finishedBlocks takes the block arrays a run holds, the current block's and the spare ones, each once:
// the last block's arrays are usually both.
func (c *logCheck) finishedBlocks() []parsedBlock {
	var out []parsedBlock
	add := func(b parsedBlock) {
		if cap(b.recs) == 0 {
			return
		}
		for _, o := range out {
			if &o.recs[:1][0] == &b.recs[:1][0] {
				return
			}
		}
		out = append(out, b)
	}
	add(parsedBlock{recs: c.recs, kind: c.kind, quick: c.quick})
	c.recs, c.kind, c.quick = nil, nil, nil
	for {
		select {
		case b := <-c.spare:
			add(b)
		default:
			return out
		}
	}
}

// blockCap is the capacity a block's arrays are made with for n events: rounded up, so that arrays a
// small load hands on (release) fit the next small load, which is seldom of exactly the same length.
func blockCap(n int) int {
	c := 128
	for c < n {
		c *= 2
	}
	return max(min(c, checkBlock), n)
}

// rowMember reports whether rows (eventstore.Prefix.RowMembers) marks stored event i as a member of a chunk row
// with a safe seq: an assistant/chunk record Expand wrote, {type, seq, time, data} and nothing else, whose
// envelope plainEnvelope would accept without reading it (TestRowMembersArePlain). No pass but the seed
// check of its position has anything to say about it: it is no retired type, its type is known, the
// repair planner skips it, and it carries no surface markers.
func rowMember(rows []uint64, i int) bool {
	return i/64 < len(rows) && rows[i/64]&(1<<(i%64)) != 0
}

// HasTurnEnd reports whether events hold a turn/end: a stored line carrying one proves a turn was committed
// after it, which turns damage remembered before it into a refusal
// (docs/harness.md#committed-prefix-and-torn-tails).
func HasTurnEnd(events []event.Event) bool {
	for _, e := range events {
		if e.Type == "turn/end" {
			return true
		}
	}
	return false
}

// passes runs the passes after parsing over a parsed block, each over the whole block before the next.
func (c *logCheck) passes(b parsedBlock) {
	if b.err != nil {
		c.fail(passParse, b.err)
		return
	}
	c.advance(b.events)
	c.recs, c.kind, c.quick = b.recs, b.kind, b.quick
	for p := passHeaderDelta; p < c.failed; p++ {
		for i := b.lo; i < b.hi; i++ {
			switch c.kind[i-b.lo] {
			case recMember:
				if p != passSeed {
					continue // see rowMember
				}
			case recQuick:
				if p < passMigrate || p == passVocabulary {
					continue // a message type, none of them retired or unknown
				}
			}
			if err := c.check(p, i, i-b.lo); err != nil {
				c.fail(p, err)
				return
			}
		}
	}
}

// check runs pass p on stored event i, whose record is the block's k-th.
func (c *logCheck) check(p pass, i, k int) error {
	switch p {
	case passHeaderDelta, passModeSet, passFallback:
		return retiredChecks[p-passHeaderDelta](c.stored[i], c.recs[k], c.id)
	case passMigrate:
		if c.kind[k] == recQuick {
			// nothing to upgrade, and the shape passes (quickEvent): only the message id to remember
			if q := &c.quick[k]; q.id != "" {
				c.messageIDs[float64(c.stored[i].Seq)] = q.id
			}
			return nil
		}
		if c.kind[k].unparsed() {
			return nil
		}
		return c.migrate(i, k)
	case passVocabulary:
		return checkKnownType(c.h, c.out[i], c.path)
	case passTurns:
		if c.kind[k] == recQuick {
			c.turns.stepQuick(c.out[i], &c.quick[k])
			return nil
		}
		if c.kind[k].unparsed() {
			c.turns.stepBracket(c.out[i], c.recs[k].Num)
			return nil
		}
		return c.turns.step(c.out[i], &c.recs[k])
	case passSeed:
		switch c.kind[k] {
		case recPlain, recQuick: // the envelope and message checks passed (plainEnvelope, quickEvent)
			return c.seedPlain(i, c.out[i], false)
		case recMember, recBracket:
			return c.seedPlain(i, c.out[i], true)
		}
		return c.seed(i, c.out[i], c.recs[k])
	}
	return nil
}

// migrate upgrades stored event i and checks its message shape; the block's record becomes the upgraded one.
func (c *logCheck) migrate(i, k int) error {
	rec, changed, err := MigrateEvent(c.recs[k], c.id, c.messageIDs)
	if err != nil {
		return err
	}
	if changed {
		// The record may have been parsed shallowly; an upgrade re-encodes it, so redo it on the whole
		// record. The migrations decide from members near the top, so the outcome is the same.
		full, err := c.stored[i].Record()
		if err != nil {
			return err
		}
		if rec, _, err = MigrateEvent(full, c.id, c.messageIDs); err != nil {
			return err
		}
	}
	seq, seqOK := rec.Get("seq")
	if err := CheckMessageEventShape(rec, func() string { return "session event at seq " + JSString(seq, seqOK) }); err != nil {
		return err
	}
	if mid, ok := eventMessageID(rec); ok && seqOK && seq.Kind == event.KindNumber {
		c.messageIDs[seq.Num] = mid
	}
	c.recs[k] = rec
	if !changed {
		return nil
	}
	e, err := event.NewEvent(event.Stringify(rec))
	if err != nil {
		return err
	}
	if !c.copied {
		c.out, c.copied = append([]event.Event(nil), c.stored...), true // the stored slice stays as it was
	}
	c.out[i] = e
	return nil
}

// seedPlain is the seed check of an event whose envelope and message shape are known to pass
// CheckEnvelope (recKind: every kind but recParsed): only its position remains to check, and the
// surface. unmarked says the event carries no surface markers.
func (c *logCheck) seedPlain(index int, e event.Event, unmarked bool) error {
	if e.Seq != int64(index) {
		return errors.New(seedAt(index) + " has seq " + e.SeqText() + " (expected " + strconv.Itoa(index) + "); seed must be contiguous from 0")
	}
	if u, ok := c.sc.(*surface.Folder); ok && unmarked {
		if err := u.PushUnmarked(e); err != nil {
			return errors.New("invalid " + seedAt(index) + ": " + err.Error())
		}
		return nil
	}
	return c.surface(index, e)
}

// seedAt names seed event index in the harness's messages.
func seedAt(index int) string { return "seed event at index " + strconv.Itoa(index) }

// seed is the restore-mode constructor's check of seed event index: its envelope, request header and
// message shape, its position, and the surface.
func (c *logCheck) seed(index int, e event.Event, rec event.Value) error {
	if err := CheckEnvelope(rec, index); err != nil {
		return err
	}
	if err := CheckSupportedRequestHeader(rec, func() string { return seedAt(index) }); err != nil {
		return err
	}
	if seq, _ := rec.Get("seq"); seq.Num != float64(index) {
		return errors.New(seedAt(index) + " has seq " + event.FormatNumber(seq.Num) + " (expected " + strconv.Itoa(index) + "); seed must be contiguous from 0")
	}
	return c.surface(index, e)
}

// surface feeds seed event index to the surface checker. The event's name in the message is made only for
// a failure: made for every event, it was half a million strings for a large session's load.
func (c *logCheck) surface(index int, e event.Event) error {
	if c.sc == nil {
		return nil
	}
	if err := c.sc.Push(e); err != nil {
		return errors.New("invalid " + seedAt(index) + ": " + err.Error())
	}
	return nil
}

// events is the normalized log, capped so that an append by a caller never writes into stored.
func (c *logCheck) events() []event.Event { return c.out[:len(c.out):len(c.out)] }

// closers finishes an Inspect run: the repair plan and the checks after it (the closers' message shape,
// the header, the closers' seed checks), with a stored event's seed error ranking after the header's.
func (c *logCheck) closers() ([]event.Event, error) {
	events := c.events()
	var final *event.Event
	if n := len(events); n > 0 && c.turns.open() { // closers take the last event's seq and time
		last, err := c.feed.record(events, n-1)
		if err != nil {
			return nil, err
		}
		final = &last
	}
	closers, err := c.turns.closers(final)
	if err != nil {
		return nil, err
	}
	for _, cl := range closers {
		rec, err := cl.Record()
		if err != nil {
			return nil, err
		}
		seq, seqOK := rec.Get("seq")
		if err := CheckMessageEventShape(rec, func() string { return "session event at seq " + JSString(seq, seqOK) }); err != nil {
			return nil, err
		}
	}
	if err := checkRestoredHeader(c.id, c.h); err != nil {
		return nil, err
	}
	if c.failed == passSeed {
		return nil, c.err
	}
	for j, cl := range closers {
		rec, err := cl.Record()
		if err != nil {
			return nil, err
		}
		if err := c.seed(len(events)+j, cl, rec); err != nil {
			return nil, err
		}
	}
	return closers, nil
}
