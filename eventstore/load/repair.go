package load

import (
	"strconv"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
)

// This file reproduces the harness's crash repair planner, interruptedTurnClosers
// (session/src/repair.ts): the synthetic events that close a turn a crash left open.

// Recovery codes of the synthetic tool results, as the harness exports them.
const (
	// ToolNotStarted marks an assistant tool request that never reached a recorded tool/call.
	ToolNotStarted = "TOOL_NOT_STARTED"
	// ToolOutcomeUnknown marks a recorded tool/call whose outcome was never durably recorded.
	ToolOutcomeUnknown = "TOOL_OUTCOME_UNKNOWN"
)

// jsSlot holds a JavaScript variable that is null, undefined, or a JSON value; the planner's cursors
// need all three because `event.data.turn` may be absent or JSON null in a damaged log.
type jsSlot struct {
	null    bool // JS null (the initial cursor state, or a JSON null read)
	defined bool // not undefined
	v       event.Value
}

func slotOf(v event.Value, present bool) jsSlot {
	if !present {
		return jsSlot{}
	}
	if v.Kind == event.KindNull {
		return jsSlot{null: true, defined: true}
	}
	return jsSlot{defined: true, v: v}
}

// member renders the slot as an object literal entry (undefined drops out of JSON.stringify).
func (s jsSlot) member(key string) []event.Member {
	if !s.defined {
		return nil
	}
	if s.null {
		return []event.Member{{Key: key, Value: event.Null()}}
	}
	return []event.Member{{Key: key, Value: s.v}}
}

// pendingCall is one unanswered assistant tool request.
type pendingCall struct {
	id      event.Value // the block id as logged (any JSON value)
	idOK    bool        // false when the block had no id (undefined)
	step    jsSlot
	callSeq event.Value // the citing tool/call's seq
	started bool        // a tool/call cited it
}

// callMap is the planner's Map<CallId, …>: insertion-ordered, keyed by JavaScript SameValueZero.
type callMap struct {
	order []string
	calls map[string]*pendingCall
	objs  int
}

// key maps a JSON value to a SameValueZero identity. Objects and arrays are distinct JS values every
// time they are parsed, so each gets a fresh key and never matches another read.
func (m *callMap) key(v event.Value, present bool) string {
	if !present {
		return "u"
	}
	switch v.Kind {
	case event.KindNull:
		return "n"
	case event.KindBool:
		return "b" + strconv.FormatBool(v.Bool)
	case event.KindNumber:
		return "d" + event.FormatNumber(v.Num)
	case event.KindString:
		return "s" + v.Str
	}
	m.objs++
	return "o" + strconv.Itoa(m.objs)
}

func (m *callMap) clear() { m.order, m.calls = nil, map[string]*pendingCall{} }

func (m *callMap) set(k string, c *pendingCall) {
	if _, ok := m.calls[k]; !ok {
		m.order = append(m.order, k)
	}
	m.calls[k] = c
}

func (m *callMap) delete(k string) {
	if _, ok := m.calls[k]; !ok {
		return
	}
	delete(m.calls, k)
	for i, o := range m.order {
		if o == k {
			m.order = append(m.order[:i:i], m.order[i+1:]...)
			break
		}
	}
}

// turnScan is the planner's cursor state after a pass over the log.
type turnScan struct {
	openTurn jsSlot
	openStep jsSlot
	pending  callMap
}

func newTurnScan() *turnScan {
	s := &turnScan{openTurn: jsSlot{null: true, defined: true}, openStep: jsSlot{null: true, defined: true}}
	s.pending.clear()
	return s
}

// step moves the scan over the next event; rec is its parsed record (at least recordDepth deep), or nil
// to parse it here when the planner reads it.
func (s *turnScan) step(e event.Event, parsed *event.Value) error {
	switch e.Type {
	case "turn/start", "turn/end", "step/start", "step/end", "assistant/message", "tool/call", "tool/result":
	default:
		return nil
	}
	var rec event.Value
	if parsed != nil {
		rec = *parsed
	} else {
		var err error
		if rec, err = e.Shallow(recordDepth, unreadMembers...); err != nil {
			return err
		}
	}
	data, dataOK := rec.Get("data")
	switch e.Type {
	case "turn/start":
		turn, ok, err := jsGet(data, dataOK, "turn")
		if err != nil {
			return err
		}
		s.startTurn(slotOf(turn, ok))
	case "turn/end":
		s.endTurn()
	case "step/start":
		step, ok, err := jsGet(data, dataOK, "step")
		if err != nil {
			return err
		}
		s.openStep = slotOf(step, ok)
	case "step/end":
		s.endStep()
	case "assistant/message":
		content, contentOK, err := jsPath(data, dataOK, "message", "content")
		if err != nil {
			return err
		}
		if contentOK && content.Kind == event.KindString {
			return nil // iterating a string yields characters, none of them a tool-call block
		}
		if !contentOK || content.Kind != event.KindArray {
			// The harness iterates content with for…of; the shape check has already guaranteed an
			// array on every path that reaches the planner.
			return &TypeError{Message: "event.data.message.content is not iterable"}
		}
		for _, block := range content.Arr {
			bt, btOK, err := jsGet(block, true, "type")
			if err != nil {
				return err
			}
			if !strEq(bt, btOK, "tool-call") {
				continue
			}
			id, idOK := block.Get("id")
			step, stepOK := data.Get("step")
			s.pending.set(s.pending.key(id, idOK), &pendingCall{id: id, idOK: idOK, step: slotOf(step, stepOK)})
		}
	case "tool/call":
		callID, ok, err := jsGet(data, dataOK, "callId")
		if err != nil {
			return err
		}
		if c := s.pending.calls[s.pending.key(callID, ok)]; c != nil {
			c.callSeq, c.started = rec.Get("seq")
		}
	case "tool/result":
		callID, ok, err := jsPath(data, dataOK, "message", "source", "callId")
		if err != nil {
			return err
		}
		s.pending.delete(s.pending.key(callID, ok))
	}
	return nil
}

// stepQuick is step for a message event quickEvent read, q what it read.
func (s *turnScan) stepQuick(e event.Event, q *quickMessage) {
	switch e.Type {
	case "assistant/message":
		for _, id := range q.calls {
			s.pending.set(s.pending.key(event.String(id), true), &pendingCall{id: event.String(id), idOK: true, step: slotOf(event.Number(q.step), true)})
		}
	case "tool/call":
		if c := s.pending.calls[s.pending.key(event.String(q.callID), true)]; c != nil {
			c.callSeq, c.started = event.Int(e.Seq), true
		}
	case "tool/result":
		s.pending.delete(s.pending.key(event.String(q.callID), true))
	}
}

// stepBracket is step for an event the load checks read without parsing: a bracket (bracketEvent, n its
// number) or a chunk row's member (nothing to track).
func (s *turnScan) stepBracket(e event.Event, n float64) {
	switch e.Type {
	case "turn/start":
		s.startTurn(slotOf(event.Number(n), true))
	case "turn/end":
		s.endTurn()
	case "step/start":
		s.openStep = slotOf(event.Number(n), true)
	case "step/end":
		s.endStep()
	}
}

func (s *turnScan) startTurn(turn jsSlot) {
	s.openTurn = turn
	s.openStep = jsSlot{null: true, defined: true}
	s.pending.clear()
}

func (s *turnScan) endTurn() {
	s.openTurn = jsSlot{null: true, defined: true}
	s.endStep()
}

func (s *turnScan) endStep() {
	s.openStep = jsSlot{null: true, defined: true}
	s.pending.clear()
}

// open reports whether the scan ended inside a turn (the harness's `openTurn !== null`).
func (s *turnScan) open() bool { return !s.openTurn.null }

// closers are the events that balance the scanned log, whose last event is final (none: an empty log).
// Only the last event's record is read of the log: its seq and time.
func (s *turnScan) closers(final *event.Event) ([]event.Event, error) {
	if !s.open() || final == nil {
		return nil, nil
	}
	last, err := final.Record()
	if err != nil {
		return nil, err
	}
	lastSeq, _ := last.Get("seq")
	seq := lastSeq.Num + 1 // contiguous numeric seqs are guaranteed by every backend scan
	if lastSeq.Kind != event.KindNumber {
		seq = 0
	}
	lastTime, timeOK := last.Get("time")
	timeMember := optMember("time", lastTime, timeOK)
	envelope := func(typ string, data event.Value, extra ...event.Member) event.Event {
		ms := []event.Member{
			{Key: "type", Value: event.String(typ)},
			{Key: "seq", Value: event.Number(seq)},
		}
		ms = append(ms, timeMember...)
		ms = append(ms, event.Member{Key: "data", Value: data})
		ms = append(ms, extra...)
		seq++
		e, err := event.NewEvent(event.Stringify(event.Object(ms...)))
		if err != nil {
			panic("eventstore: synthetic closer is not canonical JSON: " + err.Error())
		}
		return e
	}

	var closers []event.Event
	for _, k := range s.pending.order {
		c := s.pending.calls[k]
		text, errName, errCode := generation.NotStartedText, "ToolNotStartedError", ToolNotStarted
		if c.started {
			text, errName, errCode = generation.OutcomeUnknownText, "ToolOutcomeUnknownError", ToolOutcomeUnknown
		}
		msgID := generation.InterruptedResultPrefix + JSString(c.id, c.idOK) + "-" + event.FormatNumber(seq)
		block := []event.Member{{Key: "type", Value: event.String("tool-result")}}
		block = append(block, optMember("toolCallId", c.id, c.idOK)...)
		block = append(block,
			event.Member{Key: "isError", Value: event.Bool(true)},
			event.Member{Key: "content", Value: event.Array(event.Object(
				event.Member{Key: "type", Value: event.String("text")},
				event.Member{Key: "text", Value: event.String(text)},
			))},
		)
		source := []event.Member{{Key: "kind", Value: event.String("tool")}}
		source = append(source, optMember("callId", c.id, c.idOK)...)
		message := event.Object(
			event.Member{Key: "id", Value: event.String(msgID)},
			event.Member{Key: "role", Value: event.String("user")},
			event.Member{Key: "source", Value: event.Object(source...)},
			event.Member{Key: "content", Value: event.Array(event.Object(block...))},
		)
		var data []event.Member
		data = append(data, s.openTurn.member("turn")...)
		data = append(data, c.step.member("step")...)
		data = append(data,
			event.Member{Key: "message", Value: message},
			event.Member{Key: "error", Value: event.Object(
				event.Member{Key: "name", Value: event.String(errName)},
				event.Member{Key: "code", Value: event.String(errCode)},
			)},
		)
		extra := []event.Member{{Key: "surfaceOp", Value: event.String("append")}}
		if c.started {
			extra = append(extra, event.Member{Key: "sourceEventSeqs", Value: event.Array(c.callSeq)})
		}
		closers = append(closers, envelope("tool/result", event.Object(data...), extra...))
	}
	if !s.openStep.null {
		data := append(s.openTurn.member("turn"), s.openStep.member("step")...)
		closers = append(closers, envelope("step/end", event.Object(data...)))
	}
	data := append(s.openTurn.member("turn"), event.Member{Key: "reason", Value: event.Object(
		event.Member{Key: "kind", Value: event.String("interrupted")},
	)})
	closers = append(closers, envelope("turn/end", event.Object(data...)))
	return closers, nil
}

// Balanced reports whether the log needs no repair: its last turn bracket is a turn/end, or it has no
// turn/start at all (a turn/start whose turn is JSON null also leaves it balanced, as in the harness).
func Balanced(events []event.Event) bool {
	_, open := OpenTurn(events)
	return !open
}

// OpenTurn returns the turn number of the turn the log ends inside, if any. The number is -1 when the
// open turn/start does not carry a safe-integer turn (the harness still treats the turn as open).
func OpenTurn(events []event.Event) (int64, bool) {
	turn := jsSlot{null: true, defined: true}
	for _, e := range events {
		switch e.Type {
		case "turn/start":
			v, ok := e.Member("data")
			var t event.Value
			present := false
			if ok {
				if data, err := event.Parse(v); err == nil {
					t, present = data.Get("turn")
				}
			}
			turn = slotOf(t, present)
		case "turn/end":
			turn = jsSlot{null: true, defined: true}
		}
	}
	if turn.null {
		return 0, false
	}
	if isSafeInt(turn.v, turn.defined) {
		return int64(turn.v.Num), true
	}
	return -1, true
}
