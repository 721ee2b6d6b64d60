package eventstore

import "errors"

// RefusalKind classifies why a session cannot be shown; status.json, the CLI and errno mapping all read it.
type RefusalKind string

// Refusal kinds as DESIGN.md §4 names them.
const (
	// KindUnsupported is an intact log this build cannot interpret (the harness's SessionFormatUnsupportedError).
	KindUnsupported RefusalKind = "unsupported"
	// KindCorrupt is damaged or invalid content (backend scan errors and SessionPersistenceCorruptionError).
	KindCorrupt RefusalKind = "corrupt"
	// KindIO is a failure to read the artifact at all.
	KindIO RefusalKind = "io"
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
	return KindCorrupt
}

// IOError marks a failure to read or write the artifact itself (permissions, vanished files, disk errors),
// as opposed to content the harness would reject.
type IOError struct{ Err error }

func (e *IOError) Error() string { return e.Err.Error() }

func (e *IOError) Unwrap() error { return e.Err }
