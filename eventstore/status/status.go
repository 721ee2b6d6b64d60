// Package status renders the status.json objects of docs/tree.md — a session's and the store's — from
// what the store seam reports (the log, its repair plan, the recorded command results, custody) and the
// unknown tool outcomes of a log, kept event by event for a growing session (StatusScan). It reads the
// store and writes nothing.
package status

import (
	"bytes"
	"slices"
	"time"

	"github.com/dshfs/dshfs/eventstore"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/load"
)

// StatusInput is what a session status is computed from. Events is the list the other views use (stored,
// or stored + closers with --inspect); Closers and Torn describe the repair a resume would commit.
type StatusInput struct {
	ID       string
	Backend  string
	Location string
	Header   *event.Header
	Revision string
	Events   []event.Event
	Closers  []event.Event
	Torn     *eventstore.Torn
	Refusal  error
	Live     bool
	// Pending is how many of Events are accepted but not yet durable (the last ones).
	Pending int
	// LastError and LastCommand are the recorded command results (Result.Value), nil when none.
	LastError, LastCommand *eventstore.Result
	// ActiveCompaction is the open compaction's record (null when none holds the lock).
	ActiveCompaction event.Value
	// Custody is who holds the session in a store many hosts share (the fleet store); nil elsewhere.
	Custody *eventstore.Custody
	// Scan, when set, is the scan of exactly Events (Scan.Len() == len(Events)): the open turn and the
	// unknown outcomes are taken from it instead of reading every event again.
	Scan *StatusScan
}

// SessionStatus renders the session status.json object of docs/tree.md, every key present and in order.
func SessionStatus(in StatusInput) event.Value {
	null := event.Value{}
	state := "cold"
	switch {
	case in.Refusal != nil:
		state = "refused"
	case in.Live:
		state = "live"
	}
	formatVersion := null
	if in.Header != nil {
		formatVersion = event.Number(in.Header.Version)
	}
	n := int64(len(in.Events))
	openTurn := null
	t, open := int64(0), false
	if in.Refusal == nil {
		if in.Scan != nil {
			t, open = in.Scan.OpenTurn()
		} else {
			t, open = load.OpenTurn(in.Events)
		}
	}
	if open {
		openTurn = event.Number(float64(t))
	}
	preview := make([]event.Value, 0, len(in.Closers))
	for _, c := range in.Closers {
		if v, err := c.Record(); err == nil {
			preview = append(preview, v)
		}
	}
	var torn int64
	if in.Torn != nil {
		torn = in.Torn.Bytes
	}
	refusal := null
	if in.Refusal != nil {
		refusal = event.Object(
			event.Member{Key: "kind", Value: event.String(string(eventstore.Classify(in.Refusal)))},
			event.Member{Key: "message", Value: event.String(in.Refusal.Error())},
		)
	}
	outcomes := []event.Value{}
	if in.Refusal == nil {
		var unknown []UnknownOutcome
		if in.Scan != nil {
			unknown = in.Scan.UnknownOutcomes()
		} else {
			unknown = UnknownOutcomes(in.Events)
		}
		for _, u := range unknown {
			outcomes = append(outcomes, u.Value())
		}
	}
	num := func(i int64) event.Value { return event.Number(float64(i)) }
	return event.Object(
		event.Member{Key: "id", Value: event.String(in.ID)},
		event.Member{Key: "state", Value: event.String(state)},
		event.Member{Key: "backend", Value: event.String(in.Backend)},
		event.Member{Key: "location", Value: event.String(in.Location)},
		event.Member{Key: "formatVersion", Value: formatVersion},
		event.Member{Key: "revision", Value: event.String(in.Revision)},
		event.Member{Key: "events", Value: num(n)},
		event.Member{Key: "nextSeq", Value: num(n)},
		event.Member{Key: "durableSeq", Value: num(n - int64(in.Pending) - 1)},
		event.Member{Key: "pending", Value: num(int64(in.Pending))},
		event.Member{Key: "balanced", Value: event.Bool(in.Refusal == nil && !open)},
		event.Member{Key: "openTurn", Value: openTurn},
		event.Member{Key: "repairNeeded", Value: event.Bool(in.Refusal == nil && (len(in.Closers) > 0 || torn > 0))},
		event.Member{Key: "repairPreview", Value: event.Array(preview...)},
		event.Member{Key: "tornBytes", Value: num(torn)},
		event.Member{Key: "unknownOutcomes", Value: event.Array(outcomes...)},
		event.Member{Key: "activeCompaction", Value: in.ActiveCompaction},
		event.Member{Key: "refusal", Value: refusal},
		event.Member{Key: "lastError", Value: resultValue(in.LastError)},
		event.Member{Key: "lastCommand", Value: resultValue(in.LastCommand)},
		event.Member{Key: "custody", Value: custodyValue(in.Custody)},
	)
}

func resultValue(r *eventstore.Result) event.Value {
	if r == nil {
		return event.Value{}
	}
	return r.Value()
}

// UnknownOutcome is a tool call whose external effect nobody has verified: no tool/result was recorded, or
// only the TOOL_OUTCOME_UNKNOWN result a crash repair synthesizes.
type UnknownOutcome struct {
	CallID        string
	CallSeq       int64
	Turn, Step    event.Value
	Name          event.Value
	ResolvedBySeq int64 // seq of the synthetic TOOL_OUTCOME_UNKNOWN result; -1 when there is none
}

// Value renders the docs/tree.md unknownOutcomes entry.
func (u UnknownOutcome) Value() event.Value {
	resolved := event.Value{}
	if u.ResolvedBySeq >= 0 {
		resolved = event.Number(float64(u.ResolvedBySeq))
	}
	return event.Object(
		event.Member{Key: "callId", Value: event.String(u.CallID)},
		event.Member{Key: "callSeq", Value: event.Number(float64(u.CallSeq))},
		event.Member{Key: "turn", Value: u.Turn},
		event.Member{Key: "step", Value: u.Step},
		event.Member{Key: "name", Value: u.Name},
		event.Member{Key: "resolvedBySeq", Value: resolved},
	)
}

// UnknownOutcomes lists the recorded tool calls (tool/call events) without a real result, in log order.
// A call recorded twice under one id is reported at its last tool/call, the one a repair would cite.
func UnknownOutcomes(events []event.Event) []UnknownOutcome {
	var t outcomes
	for _, e := range events {
		t.add(e)
	}
	return t.unknown()
}

// outcomes follows a log's tool calls event by event: every call id seen, and the ones without a real
// result in the order their id was first seen (UnknownOutcomes's order).
type outcomes struct {
	calls map[string]*outcome
	seen  int        // ids seen so far: the next one's rank
	open  []*outcome // the calls without a real result, by rank
}

type outcome struct {
	u       UnknownOutcome
	rank    int // when its id was first seen
	settled bool
}

func (t *outcomes) add(e event.Event) {
	switch e.Type {
	case "tool/call":
		// the arguments are never read, and may be megabytes: they are skipped, not decoded
		rec, err := e.Shallow(0, "arguments")
		if err != nil {
			return
		}
		data, _ := rec.Get("data")
		id, ok := data.Get("callId")
		if !ok || id.Kind != event.KindString {
			return
		}
		turn, _ := data.Get("turn")
		step, _ := data.Get("step")
		name, _ := data.Get("name")
		if t.calls == nil {
			t.calls = map[string]*outcome{}
		}
		st := t.calls[id.Str]
		if st == nil {
			st = &outcome{rank: t.seen, settled: true}
			t.seen++
			t.calls[id.Str] = st
		}
		if st.settled {
			t.reopen(st)
		}
		st.u = UnknownOutcome{CallID: id.Str, CallSeq: e.Seq, Turn: turn, Step: step, Name: name, ResolvedBySeq: -1}
	case "tool/result":
		// nor is the result's content, which may be megabytes of output
		rec, err := e.Shallow(0, "content")
		if err != nil {
			return
		}
		data, _ := rec.Get("data")
		msg, _ := data.Get("message")
		src, _ := msg.Get("source")
		id, ok := src.Get("callId")
		if !ok || id.Kind != event.KindString {
			return
		}
		st := t.calls[id.Str]
		if st == nil || st.settled {
			return
		}
		errv, _ := data.Get("error")
		if code, _ := errv.Get("code"); code.Kind == event.KindString && code.Str == "TOOL_OUTCOME_UNKNOWN" {
			st.u.ResolvedBySeq = e.Seq
			return
		}
		st.settled = true
		i, _ := slices.BinarySearchFunc(t.open, st.rank, func(o *outcome, rank int) int { return o.rank - rank })
		t.open = slices.Delete(t.open, i, i+1)
	}
}

// reopen puts a settled call (or a new one) back among the open ones, at its rank.
func (t *outcomes) reopen(st *outcome) {
	st.settled = false
	i, _ := slices.BinarySearchFunc(t.open, st.rank, func(o *outcome, rank int) int { return o.rank - rank })
	t.open = slices.Insert(t.open, i, st)
}

func (t *outcomes) unknown() []UnknownOutcome {
	var out []UnknownOutcome
	for _, st := range t.open {
		out = append(out, st.u)
	}
	return out
}

// StatusScan is what status.json reads of a log's events — the turn it ends inside and its tool calls
// without a real result — kept up to date as events are added, so that the status of a log that only grows
// (a live session's) costs the events added since it was last rendered, not a pass over all of them.
// It is not safe for concurrent use.
type StatusScan struct {
	n        int
	boundary []event.Event // the last turn/start or turn/end, the only event OpenTurn's answer depends on
	outcomes outcomes
}

// Len is the number of events scanned.
func (s *StatusScan) Len() int { return s.n }

// Add scans events, which continue the ones scanned before.
func (s *StatusScan) Add(events []event.Event) {
	for _, e := range events {
		if e.Type == "turn/start" || e.Type == "turn/end" {
			// a copy: the scan outlives snapshots, and must not keep a log's array or frame buffer alive
			e.Raw = bytes.Clone(e.Raw)
			s.boundary = []event.Event{e}
		}
		s.outcomes.add(e)
	}
	s.n += len(events)
}

// OpenTurn is OpenTurn of the events scanned.
func (s *StatusScan) OpenTurn() (int64, bool) { return load.OpenTurn(s.boundary) }

// UnknownOutcomes is UnknownOutcomes of the events scanned.
func (s *StatusScan) UnknownOutcomes() []UnknownOutcome { return s.outcomes.unknown() }

// StoreState is what the store status.json reports beside the listing: the write side's live sessions,
// their pending events and the last failed store command.
type StoreState struct {
	Live, Pending int
	LastError     *eventstore.Result
	QuiescedUntil *time.Time             // nil when not quiesced
	LastQuiesce   *eventstore.QuiesceEnd // how the last quiesce ended; nil when none has
	SchemaVersion int                    // the backend's physical schema version (SQLite: 17); 0 when it has none
}

// timeText is a time as status.json prints it: RFC 3339 in UTC, to the millisecond.
func timeText(t time.Time) event.Value {
	return event.String(t.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
}

// StoreStatus renders the store status.json object of docs/tree.md.
func StoreStatus(backend, root string, l eventstore.Listing, st StoreState) event.Value {
	refused := 0
	for _, e := range l.Entries {
		if e.Refusal != nil {
			refused++
		}
	}
	rootErrs := make([]event.Value, 0, len(l.RootErrors))
	for _, r := range l.RootErrors {
		rootErrs = append(rootErrs, event.Object(
			event.Member{Key: "path", Value: event.String(r.Path)},
			event.Member{Key: "message", Value: event.String(r.Message)},
		))
	}
	quiescedUntil, lastQuiesce := event.Value{}, event.Value{}
	if st.QuiescedUntil != nil {
		quiescedUntil = timeText(*st.QuiescedUntil)
	}
	if q := st.LastQuiesce; q != nil {
		lastQuiesce = event.Object(
			event.Member{Key: "until", Value: timeText(q.Until)},
			event.Member{Key: "ended", Value: timeText(q.Ended)},
			event.Member{Key: "reason", Value: event.String(q.Reason)},
		)
	}
	schema := event.Value{}
	if st.SchemaVersion != 0 {
		schema = event.Number(float64(st.SchemaVersion))
	}
	return event.Object(
		event.Member{Key: "backend", Value: event.String(backend)},
		event.Member{Key: "root", Value: event.String(root)},
		event.Member{Key: "formatVersion", Value: event.Number(0)},
		event.Member{Key: "schemaVersion", Value: schema},
		event.Member{Key: "sessions", Value: event.Number(float64(len(l.Entries)))},
		event.Member{Key: "refused", Value: event.Number(float64(refused))},
		event.Member{Key: "live", Value: event.Number(float64(st.Live))},
		event.Member{Key: "pending", Value: event.Number(float64(st.Pending))},
		event.Member{Key: "rootErrors", Value: event.Array(rootErrs...)},
		event.Member{Key: "lastError", Value: resultValue(st.LastError)},
		event.Member{Key: "quiescedUntil", Value: quiescedUntil},
		event.Member{Key: "lastQuiesce", Value: lastQuiesce},
	)
}

func nullable(s string) event.Value {
	if s == "" {
		return event.Value{}
	}
	return event.String(s)
}

// custodyValue is status.json's custody: null where the store has none.
func custodyValue(c *eventstore.Custody) event.Value {
	if c == nil {
		return event.Value{}
	}
	sync := event.Value{}
	if c.SyncHost != "" {
		sync = event.String(c.SyncHost)
	}
	return event.Object(
		event.Member{Key: "host", Value: event.String(c.Host)},
		event.Member{Key: "syncHost", Value: sync},
		event.Member{Key: "releaseAfterSeconds", Value: event.Number(c.ReleaseAfter.Seconds())},
		event.Member{Key: "syncState", Value: nullable(c.State)},
		event.Member{Key: "syncStateReason", Value: nullable(c.StateReason)},
	)
}
