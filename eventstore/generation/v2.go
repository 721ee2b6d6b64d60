package generation

import (
	"strconv"

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

// restoreV2 is the released v2 restore over decoded events, with the v2 inventory as the installed
// vocabulary (what the published decode tool passes).
func restoreV2(h Header, cut int64, evs []accepted) error {
	types := make([]string, len(evs))
	for i, a := range evs {
		t, _ := a.v.Get("type")
		types[i] = t.Str
	}
	return validateV2(h, cut, evs, types, isReleasedV2Type)
}

// validateV2 is the envelope part of the released v2 validation: the inherited cut against the header,
// admission of each event's type (an unknown type is refused unless it is marked ignorable), the members
// its class admits (surface metadata only on surface and unclassified events), dense seqs, and the last
// inherited end-seed marker as the cut. types holds the type each event is validated under (v3 renames
// some); known is the installed vocabulary.
func validateV2(h Header, cut int64, evs []accepted, types []string, known func(string) bool) error {
	if cut > int64(len(evs)) {
		return formatErr("format v2 inherited event count exceeds its events")
	}
	if !h.IsSeeded && cut != 0 {
		return formatErr("unseeded format v2 Session has inherited events")
	}
	last := int64(-1)
	for i, a := range evs {
		v := a.v
		typ := types[i]
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
				last = int64(i)
			}
		}
	}
	if h.IsSeeded && last != cut {
		return formatErr("format v2 seeded header disagrees with its last inherited end-seed marker")
	}
	if !h.IsSeeded && last >= 0 {
		return formatErr("format v2 unseeded Session contains an inherited end-seed marker")
	}
	return nil
}
