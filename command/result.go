package command

import (
	"fmt"
	"time"

	"github.com/dshfs/dshfs/compaction"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
)

// Front is the front-end a command runs in. It changes what a result says about ownership, never how a
// command is parsed or run: a mount keeps the sessions it writes live; a CLI process flushes and releases
// them when it exits.
type Front int

const (
	// Mount: a ctl file of a mounted store.
	Mount Front = iota
	// CLI: one dshfs write command.
	CLI
)

// holder names the writer that holds a session live.
func (f Front) holder() string {
	if f == CLI {
		return "this process"
	}
	return "this mount"
}

// until says how long a session stays live after a command made it live.
func (f Front) until() string {
	if f == CLI {
		return " until it exits"
	}
	return ""
}

// Result is the outcome of one command: what was done (Done) or why not (Err).
type Result struct {
	Line  string // the command as ctl words
	Front Front
	Err   *eventstore.CommandError // nil on success
	Done  Outcome                  // nil on failure
	// Sessions are the per-session results of a store flush, for each session's own status.json.
	Sessions []SessionResult
}

// SessionResult is one session's part of a store command.
type SessionResult struct {
	ID     string
	Result Result
}

// Message is the one text of the result: the refusal's, or what was done.
func (r Result) Message() string {
	if r.Err != nil {
		return r.Err.Message
	}
	if r.Done == nil {
		return ""
	}
	return r.Done.Message(r.Front)
}

// Record is the result as status.json's lastCommand/lastError holds it.
func (r Result) Record() eventstore.Result {
	return eventstore.Result{Command: r.Line, Err: r.Err, Message: r.Message()}
}

// JSON is the result as one compact line with its LF: what reading ctl returns and the CLI prints.
func (r Result) JSON() []byte { return r.Record().JSON() }

// Outcome is what a successful command did, in fields; Message renders it.
type Outcome interface {
	Message(f Front) string
}

// NothingPending: flush of a session this process does not write.
type NothingPending struct{}

// Flushed: Events accepted events were made durable; the log is durable through seq Through.
type Flushed struct {
	Events  int
	Through int64
}

// Resumed: this process is the live writer; the log is durable through seq Through.
type Resumed struct{ Through int64 }

// Forked: the child session Child was published.
type Forked struct{ Child string }

// Closed: the live engine was flushed and released (Released), or there was none.
type Closed struct{ Released bool }

// Compacted is a manual compaction's outcome.
type Compacted struct{ compaction.Outcome }

// Pruned is the pruner's outcome.
type Pruned struct{ compaction.PruneOutcome }

// FlushedAll: a store flush of Sessions live sessions.
type FlushedAll struct{ Sessions int }

// Created: the header-only session ID exists.
type Created struct{ ID string }

// Rescanned: the store was re-read; Released sessions were released after a conflict.
type Rescanned struct {
	Released int
	// Acknowledged sessions had been refused as live elsewhere: their foreign changes are accepted now.
	Acknowledged int
}

// Quiesced: writes are held until Until (or resume-writes).
type Quiesced struct{ Until time.Time }

// WritesResumed: a quiesce ended (WasQuiesced), or there was none.
type WritesResumed struct{ WasQuiesced bool }

// Accepted: Events lines written to a mount's append file were accepted; its write-behind (or a flush)
// makes them durable.
type Accepted struct{ Events int }

// Appended: Events lines from the CLI's input were appended and made durable through seq Through; a
// log that now ends inside an open turn names it (OpenTurn), since the next writer must resume.
type Appended struct {
	Events   int
	Through  int64
	OpenTurn *int64
}

// Message implementations: the one message table of the write side.

func (NothingPending) Message(f Front) string {
	return "nothing pending: the session is not live in " + f.holder()
}

func (o Flushed) Message(Front) string {
	return fmt.Sprintf("%d events made durable; durable through seq %d", o.Events, o.Through)
}

func (o Resumed) Message(f Front) string {
	return fmt.Sprintf("resumed: live in %s%s, durable through seq %d", f.holder(), f.until(), o.Through)
}

func (o Appended) Message(Front) string {
	m := fmt.Sprintf("appended %d events; durable through seq %d", o.Events, o.Through)
	if o.OpenTurn != nil {
		m += fmt.Sprintf("; the log ends inside open turn %d (the next writer must resume)", *o.OpenTurn)
	}
	return m
}

func (o Accepted) Message(f Front) string {
	return fmt.Sprintf("accepted %d events; live in %s, durable at the next flush", o.Events, f.holder())
}

func (o Forked) Message(Front) string { return "forked: child " + quote(o.Child) }

func (o Closed) Message(f Front) string {
	if !o.Released {
		return "not live in " + f.holder() + ": nothing to release"
	}
	return "flushed and released"
}

func (o Compacted) Message(Front) string { return o.Outcome.Message() }

func (o Pruned) Message(Front) string { return o.PruneOutcome.Message() }

func (o FlushedAll) Message(Front) string { return fmt.Sprintf("flushed %d live sessions", o.Sessions) }

func (o Created) Message(Front) string { return "created " + quote(o.ID) }

func (o Rescanned) Message(Front) string {
	m := fmt.Sprintf("rescanned the store; %d sessions released after a conflict", o.Released)
	if o.Acknowledged > 0 {
		m += fmt.Sprintf("; the changes of %d sessions refused as live elsewhere are acknowledged", o.Acknowledged)
	}
	return m
}

func (o Quiesced) Message(Front) string {
	return "quiesced until " + o.Until.UTC().Format(time.RFC3339Nano) + ": every live session is flushed; new events are accepted and held until resume-writes or then"
}

func (o WritesResumed) Message(Front) string {
	if !o.WasQuiesced {
		return "not quiesced: nothing to resume"
	}
	return "writes resumed: held batches are being written"
}

// quote is a session id as JSON writes it (ids may hold any character).
func quote(id string) string { return string(event.Stringify(event.String(id))) }
