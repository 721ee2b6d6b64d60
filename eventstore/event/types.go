package event

// KnownTypes is the harness's KNOWN_SESSION_EVENT_TYPES (known-event-types.ts;
// docs/harness.md#event-lines-and-the-vocabulary), sorted. A stored event whose type is outside it and that
// is not marked `ignorable: true` makes the harness refuse the whole log as written by a newer harness.
var KnownTypes = []string{
	"agent-preset/selected",
	"agent/inbox/spliced",
	"approval/asked",
	"approval/decided",
	"approval/policy",
	"assistant/chunk",
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
	"permission/preset",
	"plan/mode",
	"request/context",
	"request/header",
	"sandbox/mode",
	"schedule/change",
	"session/end-seed",
	"session/title",
	"session/title-llm-request",
	"step/end",
	"step/start",
	"subagent/descriptor",
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

// knownTypes indexes KnownTypes; its keys double as shared strings for the type of every decoded event.
var knownTypes = func() map[string]string {
	m := make(map[string]string, len(KnownTypes))
	for _, t := range KnownTypes {
		m[t] = t
	}
	return m
}()

// IsKnownType reports whether t is in the harness's event vocabulary.
func IsKnownType(t string) bool {
	_, ok := knownTypes[t]
	return ok
}

// internType returns the shared string for a known type name given as bytes, without allocating.
func internType(b []byte) (string, bool) {
	t, ok := knownTypes[string(b)]
	return t, ok
}

// IsSurfaceType reports whether events of type t carry conversation surface (and so may hold the
// sourceEventSeqs and surfaceOp envelope members).
func IsSurfaceType(t string) bool {
	switch t {
	case "user/message", "assistant/message", "tool/result":
		return true
	}
	return false
}
