package eventstore

import (
	"errors"
	"fmt"

	"github.com/dshfs/dshfs/eventstore/event"
)

// RefusalKind classifies why a session cannot be shown; status.json, the CLI and errno mapping all read it.
type RefusalKind string

// Refusal kinds as docs/tree.md names them.
const (
	// KindUnsupported is an intact log this build cannot interpret (the harness's SessionFormatUnsupportedError).
	KindUnsupported RefusalKind = "unsupported"
	// KindCorrupt is damaged or invalid content (backend scan errors and SessionPersistenceCorruptionError).
	KindCorrupt RefusalKind = "corrupt"
	// KindIO is a failure to read the artifact at all.
	KindIO RefusalKind = "io"
	// KindTooLarge is a session whose decode would pass the load budget (TooLargeError).
	KindTooLarge RefusalKind = "too-large"
)

// UnsupportedError is the harness's SessionFormatUnsupportedError: the message already carries the
// " (raw log: <path>)" suffix when the backend keeps one artifact per session.
type UnsupportedError struct {
	Message string
	Path    string // artifact path, "" when unknown
}

func (e *UnsupportedError) Error() string { return e.Message }

// CorruptionError is the harness's SessionPersistenceCorruptionError: post-read validation failed.
// Its text is `stored session "<id>" failed validation: <String(cause)>`, where String(cause) of a plain JS
// Error is "Error: <message>".
type CorruptionError struct {
	ID    string
	Cause error
}

func (e *CorruptionError) Error() string {
	name := "Error"
	if n, ok := e.Cause.(interface{ JSErrorName() string }); ok {
		name = n.JSErrorName() // String(err) of a JS TypeError starts "TypeError: "
	}
	return "stored session " + jsQuote(e.ID) + " failed validation: " + name + ": " + e.Cause.Error()
}

func (e *CorruptionError) Unwrap() error { return e.Cause }

// NotFoundError is the harness's `session "<id>" not found`.
type NotFoundError struct{ ID string }

func (e *NotFoundError) Error() string { return "session " + jsQuote(e.ID) + " not found" }

// jsQuote renders a string the way the harness's template literals `"${id}"` do: raw, between double quotes
// (no escaping), unlike Go's %q.
func jsQuote(s string) string { return `"` + s + `"` }

// Classify maps any error from this package or a backend to the refusal kind status.json reports.
func Classify(err error) RefusalKind {
	var u *UnsupportedError
	if errors.As(err, &u) {
		return KindUnsupported
	}
	var pe *IOError
	if errors.As(err, &pe) {
		return KindIO
	}
	var tl *TooLargeError
	if errors.As(err, &tl) {
		return KindTooLarge
	}
	return KindCorrupt
}

// IOError marks a failure to read or write the artifact itself (permissions, vanished files, disk errors),
// as opposed to content the harness would reject.
type IOError struct{ Err error }

func (e *IOError) Error() string { return e.Err.Error() }

func (e *IOError) Unwrap() error { return e.Err }

// TooLargeError refuses a session whose decoded events would need more memory than the load budget
// (config writer.max_session_bytes): a small compressed artifact or database can decode to any number of
// events, and one session must never take the process, and the other sessions' pending events, down.
type TooLargeError struct {
	Limit  int64 // the budget, in bytes
	Cost   int64 // what the events decoded so far cost when the budget was passed
	Events int   // how many events that was
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("session too large to load: its first %d events already need %d bytes, over max_session_bytes (%d)", e.Events, e.Cost, e.Limit)
}

// EventOverhead is what one decoded event costs beside its text (the event itself, its place in the
// session's list, the scan's bookkeeping): a budget counts it so that a log of tiny events, or of empty
// records, is bounded by their number as well as by their bytes.
const EventOverhead = 64

// DefaultMaxSessionBytes is writer.max_session_bytes' default.
const DefaultMaxSessionBytes = 1 << 30

// Budget counts what a load's events cost against a limit (0: none).
type Budget struct {
	Limit  int64
	cost   int64
	events int
}

// Add counts evs and refuses, with a *TooLargeError, once their total passes the limit.
func (b *Budget) Add(evs []event.Event) error { return b.AddPacked(evs, nil) }

// AddPacked is Add for a list whose rows kept packed are rows: a hollow member costs what its record
// would (event.PackedRow.Bytes), so a session's budget does not depend on how its load keeps it.
func (b *Budget) AddPacked(evs []event.Event, rows []event.PackedRow) error {
	for i := range evs {
		b.cost += int64(len(evs[i].Raw)) + EventOverhead
	}
	for i := range rows {
		b.cost += rows[i].Bytes
	}
	b.events += len(evs)
	if b.Limit > 0 && b.cost > b.Limit {
		return &TooLargeError{Limit: b.Limit, Cost: b.cost, Events: b.events}
	}
	return nil
}

// IsNotFound reports whether err says the session does not exist.
func IsNotFound(err error) bool {
	var nf *NotFoundError
	return errors.As(err, &nf)
}
