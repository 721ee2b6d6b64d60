package generation

import (
	"maps"
	"strconv"

	"github.com/dshfs/dshfs/eventstore/event"
)

// The v4 restore (restoreReleasedV4Artifact of the v3-to-v4 package) runs three passes over the decoded
// events, each stopping at its first failure: per-event admission (vocabulary, retired syntax, system
// message fields, tool-role results, fork results, the inherited marker), then producer attribution,
// delivery markers and catalog children, then the lifecycle relationships of v4 (turns, steps, tool
// lifecycles, PTC dispatches, retries, titles, commands, compactions and surface replacements). They run
// here as one walk that keeps each pass's first failure and reports them in the passes' order, which is
// what the three loops report.

// v4Walk is the restore's walk over a v4 log: each pass's state and first failure.
type v4Walk struct {
	h   Header
	cut int64
	rel *v4Relations
	// stream: the walk runs as the events are decoded, before the cut and the later events are known
	// (finish completes it)
	stream           bool
	deferred         []deferredEvent
	last             int64 // the last inherited end-seed marker, -1 when none
	children         map[string]bool
	errA, errB, errL error
	atA, atB, atL    int
}

// step takes event i; an error is one of reading the event itself (it was not canonical JSON).
func (w *v4Walk) step(i int, e event.Event) error {
	if !IsV4Type(e.Type) {
		return w.stepValue(i, e, event.Value{}, false)
	}
	v, err := v4Value(e)
	if err != nil {
		return err
	}
	return w.stepValue(i, e, v, false)
}

// stepValue is step with the event already read (v4Value; ignored for an unknown type). admitted says that
// the codec's row admission passed on this very value: it holds every per-event check of the restore
// and its developer-data check, which are then not run twice (an ignorable developer/message, which the
// admission leaves to the restore, is never admitted).
func (w *v4Walk) stepValue(i int, e event.Event, v event.Value, admitted bool) error {
	admitted = admitted && !(e.Type == "developer/message" && isTrue(v, "ignorable"))
	known := IsV4Type(e.Type)
	if w.errA == nil && !known {
		if ig, _ := e.Member("ignorable"); string(ig) != "true" {
			w.errA, w.atA = unsupportedErr("format v4 contains unknown event type "+quote(e.Type)+" at seq "+strconv.Itoa(i)), i
		}
	}
	if w.stream {
		w.rel.markOrphans([]event.Event{e})
	}
	if !known {
		return nil
	}
	if w.errA == nil {
		if !admitted {
			w.errA, w.atA = v4EventAdmission(v), i
		}
		if w.errA == nil && e.Type == "session/end-seed" {
			if data, _ := v.Get("data"); isObject(data) && isTrue(data, "inherited") {
				w.last = int64(i)
			}
		}
	}
	if w.errB == nil {
		if w.stream && (e.Type == "session-log-deepseek/delivery-accepted" || e.Type == "subagent/catalog") {
			// their checks need the inherited cut, which a decode learns at the end
			w.deferred = append(w.deferred, deferredEvent{i: i, v: v, admitted: admitted})
		} else {
			w.errB, w.atB = v4Attribution(w.h, w.cut, v, int64(i), w.children, admitted), i
		}
	}
	if w.errL == nil {
		w.errL, w.atL = w.rel.accept(e, v), i
	}
	return nil
}

// finish ends a streaming walk (a decode's) of n events once the inherited cut is known: the deferred
// checks run in their place in the order, and a turn boundary that crossed an open compaction is a failure
// unless a later session/end-seed left that compaction open.
func (w *v4Walk) finish(cut int64, n int) (int, error) {
	w.cut = cut
	for _, d := range w.deferred {
		if w.errB != nil && d.i > w.atB {
			break
		}
		if err := v4Attribution(w.h, w.cut, d.v, int64(d.i), w.children, d.admitted); err != nil {
			w.errB, w.atB = err, d.i
			break
		}
	}
	for _, c := range w.rel.crossings {
		if w.rel.orphans[c.start] {
			continue
		}
		if w.errL == nil || c.at < w.atL {
			w.errL, w.atL = formatErr(c.typ+" crosses an open compaction"), c.at
		}
		break
	}
	return w.result(n)
}

// deferredEvent is an event whose check waits for the inherited cut.
type deferredEvent struct {
	i        int
	v        event.Value
	admitted bool
}

// result is the restore's verdict on the n events walked: each pass's first failure, in the passes'
// order, with the inherited-marker checks between the first and the second.
func (w *v4Walk) result(n int) (int, error) {
	switch {
	case w.errA != nil:
		return w.atA, w.errA
	case w.h.IsSeeded && w.last != w.cut:
		return n - 1, formatErr("format v4 seeded header disagrees with its last inherited end-seed marker")
	case !w.h.IsSeeded && w.last >= 0:
		return n - 1, formatErr("format v4 unseeded Session contains an inherited end-seed marker")
	case w.errB != nil:
		return w.atB, w.errB
	}
	return w.atL, w.errL
}

// clone is a copy of a walk without failures that more events cannot change.
func (w *v4Walk) clone() *v4Walk {
	c := *w
	c.rel = w.rel.clone()
	c.children = maps.Clone(w.children)
	return &c
}

// v4EventAdmission is the restore's per-event checks of a known event.
func v4EventAdmission(v event.Value) error {
	if err := v4RetiredSyntax(v); err != nil {
		return err
	}
	if err := v4SystemMessageFields(v); err != nil {
		return err
	}
	if err := v4ToolResultMessage(v); err != nil {
		return err
	}
	return v4ForkResult(v)
}

// v4Attribution is the second pass over a known event: developer data, producer-owned message sources,
// the delivery marker's session and catalog children named once.
func v4Attribution(h Header, cut int64, v event.Value, seq int64, children map[string]bool, admitted bool) error {
	if !admitted {
		if err := v4DeveloperData(v); err != nil {
			return err
		}
	}
	if err := v4MessageSources(v); err != nil {
		return err
	}
	typ := typeOf(v)
	data, _ := v.Get("data")
	switch typ {
	case "session-log-deepseek/delivery-accepted":
		id, err := v4Delivery(data, seq)
		if err != nil {
			return err
		}
		if id != nil && !(h.ParentSession != nil && seq < cut) && *id != h.ID {
			return formatErr("current-generation delivery marker names the wrong Session")
		}
	case "subagent/catalog":
		if seq < cut {
			return nil
		}
		if err := catalogFact(data); err != nil {
			return err
		}
		id, _ := data.Get("childId")
		if children[id.Str] {
			return formatErr("duplicate catalog child " + id.Str)
		}
		children[id.Str] = true
	}
	return nil
}

// v4MessageSources requires a producer-owned source in every durable message slot.
func v4MessageSources(v event.Value) error {
	typ := typeOf(v)
	data, _ := v.Get("data")
	if !isObject(data) {
		return nil
	}
	check := func(m event.Value) error {
		src, ok := m.Get("source")
		if !producerOwned(src, ok) {
			return formatErr(errProducerSource)
		}
		return nil
	}
	switch typ {
	case "user/message":
		return check(data)
	case "developer/message", "system/message", "assistant/message", "tool/result":
		m, _ := data.Get("message")
		if !isObject(m) {
			return formatErr(typ + " requires a message")
		}
		return check(m)
	case "agent/inbox/spliced", "session/title-llm-request":
		ms, _ := data.Get(messagesKey(typ))
		if ms.Kind != event.KindArray {
			return formatErr(typ + " requires message array")
		}
		for _, m := range ms.Arr {
			if !isObject(m) {
				return formatErr(typ + " requires message objects")
			}
			if err := check(m); err != nil {
				return err
			}
		}
	}
	return nil
}

// v4Delivery is validateDeliveryAccepted for generation 4: the session a current delivery marker names,
// nil for a marker of another generation.
func v4Delivery(data event.Value, seq int64) (*string, error) {
	if !isObject(data) {
		return nil, formatErr("delivery-accepted data must be an object")
	}
	ver, ok := data.Get("sessionFormatVersion")
	if !ok {
		ver = event.Int(0)
	}
	n, err := count(ver, "delivery sessionFormatVersion")
	if err != nil || n != 4 {
		return nil, err
	}
	through, _ := data.Get("throughSeq")
	t, err := count(through, "delivery throughSeq")
	if err != nil {
		return nil, err
	}
	if t >= seq {
		return nil, formatErr("delivery throughSeq must precede its marker")
	}
	id, _ := data.Get("sessionId")
	if id.Kind != event.KindString || id.Str == "" {
		return nil, formatErr("delivery requires a nonempty Session id")
	}
	return &id.Str, nil
}

// catalogFact is the catalog payload check of a subagent/catalog event.
func catalogFact(v event.Value) error {
	bad := formatErr("subagent/catalog requires a supported versioned catalog fact")
	if !isObject(v) {
		return bad
	}
	ver, _ := v.Get("version")
	mode, _ := v.Get("mode")
	label, labelOK := v.Get("label")
	v0, v1 := ver.Kind == event.KindNumber && ver.Num == 0, ver.Kind == event.KindNumber && ver.Num == 1
	modeIs := func(s string) bool { return mode.Kind == event.KindString && mode.Str == s }
	switch {
	case !v0 && !v1, !isString(v, "childId"),
		!modeIs("continuable") && !modeIs("one-shot") && !modeIs("unknown"),
		v0 && modeIs("unknown"),
		modeIs("continuable") && (!labelOK || label.Kind != event.KindString),
		labelOK && label.Kind != event.KindString:
		return bad
	}
	created, _ := v.Get("childCreatedAt")
	_, err := count(created, "catalog child creation time")
	return err
}
