package generation

import (
	"strconv"
	"strings"

	"github.com/dshfs/dshfs/eventstore/event"
)

// ReleasedV2Types is the frozen released-v2 event inventory (RELEASED_V2_EVENT_TYPES of
// @deepseek-ai/dsh-session-format-v1-to-v2 0.1.3-alpha.2), sorted as the package sorts it. The interop
// test compares it with the installed package's.
var ReleasedV2Types = []string{
	"agent-preset/selected",
	"agent/inbox/spliced",
	"approval/asked",
	"approval/decided",
	"approval/policy",
	"assistant/attempt",
	"assistant/message",
	"command/done",
	"command/run",
	"compaction/end",
	"compaction/prune",
	"compaction/start",
	"compaction/summary",
	"feedback/record",
	"goal/change",
	"hook/invoked",
	"hook/result",
	"llm/retry",
	"llm/retry-started",
	"model/selection",
	"permission/preset",
	"plan/mode",
	"request/context",
	"request/header",
	"sandbox/mode",
	"schedule/change",
	"session-log-deepseek/delivery-accepted",
	"session/end-seed",
	"session/title",
	"session/title-llm-request",
	"step/end",
	"step/start",
	"subagent/descriptor",
	"subagent/model-selection-policy",
	"team/member",
	"team/message/delivered",
	"team/message/queued",
	"team/task",
	"todo/write",
	"tool-workflow/agent-end",
	"tool-workflow/agent-start",
	"tool-workflow/run-end",
	"tool-workflow/run-start",
	"tool/call",
	"tool/code-dispatch",
	"tool/code-dispatch-start",
	"tool/result",
	"turn/end",
	"turn/start",
	"user/message",
	"web/deepseek-search-llm-request",
}

var releasedV2 = func() map[string]bool {
	m := make(map[string]bool, len(ReleasedV2Types))
	for _, t := range ReleasedV2Types {
		m[t] = true
	}
	return m
}()

func isReleasedV2Type(t string) bool { return releasedV2[t] }

// restorer runs the released restore's checks over the decoded events as they are accepted, so that no
// event's value outlives its row. The restore runs after the codec has read every row, and its v3 part
// over all events before its v2 part: the first failure of each part is kept and reported in that order
// once the codec has finished.
type restorer struct {
	h Header
	n int // events observed

	// v3: the open step, the protected system head, whether any surface event was seen
	stepTurn, stepStep     event.Value
	stepTurnOK, stepStepOK bool
	inStep                 bool
	head                   int64
	hasSurface             bool
	v3Err                  error

	// v2: the last inherited end-seed marker
	last  int64
	v2Err error
}

func newRestorer(h Header) *restorer { return &restorer{h: h, head: -1, last: -1} }

// observe checks one accepted event.
func (r *restorer) observe(v event.Value, typ string) {
	i := r.n
	r.n++
	if r.h.Version == 3 {
		if r.v3Err == nil {
			r.v3Err = r.v3Event(v, typ, int64(i))
		}
		typ = relationshipType(typ)
		if r.v2Err == nil {
			r.v2Err = r.v2Event(v, typ, i, isV3Known)
		}
		return
	}
	if r.v2Err == nil {
		r.v2Err = r.v2Event(v, typ, i, isReleasedV2Type)
	}
}

// finish reports the restore's first failure, given the inherited cut the codec derived and the accepted
// events.
func (r *restorer) finish(cut int64, events []event.Event) error {
	if r.v3Err != nil {
		return r.v3Err
	}
	if cut > int64(r.n) {
		return formatErr("format v2 inherited event count exceeds its events")
	}
	if !r.h.IsSeeded && cut != 0 {
		return formatErr("unseeded format v2 Session has inherited events")
	}
	if r.v2Err != nil {
		return r.v2Err
	}
	if r.h.IsSeeded && r.last != cut {
		return formatErr("format v2 seeded header disagrees with its last inherited end-seed marker")
	}
	if !r.h.IsSeeded && r.last >= 0 {
		return formatErr("format v2 unseeded Session contains an inherited end-seed marker")
	}
	typeAt := func(i int) string { return events[i].Type }
	if r.h.Version == 3 {
		typeAt = func(i int) string { return relationshipType(events[i].Type) }
	}
	return relationships(r.h, cut, len(events), typeAt, func(i int) (relationEvent, error) {
		return relationView(r.h.Version, events[i])
	})
}

// relationView is event e as the relationship validation reads it. v3 hands it a view under v2's names:
// a system message as a user message whose data is the message with role "user", replacements spelled
// {op,start,end}, PTC dispatches under their predecessors' names, an ignorable predecessor as opaque, and
// a TOOL_NOT_STARTED repair result with the canonical repair id for its own seq. An assistant event's embedded stream is never read.
func relationView(gen int, e event.Event) (relationEvent, error) {
	typ := e.Type
	var v event.Value
	var err error
	if typ == "assistant/message" || typ == "assistant/attempt" {
		v, err = e.Shallow(0, "stream")
	} else {
		v, err = e.Record()
	}
	if err != nil || gen != 3 {
		return relationEvent{typ: typ, v: v}, err
	}
	typ = relationshipType(typ)
	switch e.Type {
	case "system/message":
		data, _ := v.Get("data")
		msg, _ := data.Get("message")
		v = setMember(setMember(v, "type", event.String(typ)), "data", setMember(msg, "role", event.String("user")))
	case "tool/result":
		data, _ := v.Get("data")
		errv, hasErr := data.Get("error")
		if !hasErr || !isString(errv, "code") {
			break
		}
		if code, _ := errv.Get("code"); code.Str != "TOOL_NOT_STARTED" {
			break
		}
		msg, _ := data.Get("message")
		src, _ := msg.Get("source")
		callID, _ := src.Get("callId")
		id, _ := msg.Get("id")
		if callID.Kind != event.KindString || id.Kind != event.KindString || !isRepairID(id.Str, callID.Str) {
			break
		}
		msg = setMember(msg, "id", event.String("interrupted-tool-result-"+callID.Str+"-"+strconv.FormatInt(e.Seq, 10)))
		v = setMember(v, "data", setMember(data, "message", msg))
	default:
		if typ != e.Type {
			v = setMember(v, "type", event.String(typ))
		}
	}
	if op, ok := v.Get("surfaceOp"); ok && isObject(op) && isV3Surface(e.Type) {
		start, _ := op.Get("startSeq")
		end, _ := op.Get("endSeq")
		v = setMember(v, "surfaceOp", event.Object(
			event.Member{Key: "op", Value: event.String("replace")},
			event.Member{Key: "start", Value: start},
			event.Member{Key: "end", Value: end}))
	}
	return relationEvent{typ: typ, v: v}, nil
}

// isRepairID reports whether id is a TOOL_NOT_STARTED repair's historical id for the call:
// "interrupted-tool-result-<callId>-<n>" with n a canonical non-negative safe integer (the number is a
// historical seq, not one of this artifact's).
func isRepairID(id, callID string) bool {
	suffix, ok := strings.CutPrefix(id, InterruptedResultPrefix+callID+"-")
	if !ok {
		return false
	}
	_, ok = seqSuffix(suffix)
	return ok
}

// v2Event is the envelope part of the released v2 validation of event i, under the type it is validated
// as (v3 renames some) and with the installed vocabulary known: admission of its type (an unknown type is
// refused unless marked ignorable), the members its class admits (surface metadata only on surface and
// unclassified events), a dense seq, and the inherited end-seed markers. Payload semantics and cross-event
// relationships, which follow in the harness, are not repeated.
func (r *restorer) v2Event(v event.Value, typ string, i int, known func(string) bool) error {
	label := "format v2 event " + strconv.Itoa(i)
	classified := isReleasedV2Type(typ)
	if !classified && !known(typ) && !isTrue(v, "ignorable") {
		return unsupportedErr("format v2 contains unknown event type " + quote(typ) + " at seq " + strconv.Itoa(i))
	}
	optional := logOptional
	if !classified || event.IsSurfaceType(typ) {
		optional = surfaceOptional
	}
	if err := exactKeys(v, eventRequired, optional, label, "lacks required field"); err != nil {
		return err
	}
	if seq, _ := v.Get("seq"); seq.Kind != event.KindNumber || seq.Num != float64(i) {
		return formatErr(label + " is not dense")
	}
	tm, _ := v.Get("time")
	if err := safeInteger(tm, label+" time"); err != nil {
		return err
	}
	if ig, ok := v.Get("ignorable"); ok && (ig.Kind != event.KindBool || !ig.Bool) {
		return formatErr(label + " ignorable must be true when present")
	}
	if typ == "session/end-seed" {
		data, _ := v.Get("data")
		if _, err := record(data, "session/end-seed "+strconv.Itoa(i)+" data"); err != nil {
			return err
		}
		if isTrue(data, "inherited") {
			r.last = int64(i)
		}
	}
	return nil
}
