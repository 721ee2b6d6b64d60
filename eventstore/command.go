package eventstore

import (
	"errors"
	"strconv"

	"github.com/dshfs/dshfs/eventstore/event"
)

// Codes carried by CommandError.Code: the harness's own where it has one.
const (
	CodeOpenTurn        = "OPEN_TURN"              // fork inside an open turn; append to a crashed turn
	CodeInvalidBoundary = "INVALID_BOUNDARY"       // fork boundary
	CodeAlreadyExists   = "SESSION_ALREADY_EXISTS" // create, fork child
	CodeNotFound        = "SESSION_NOT_FOUND"
	CodeLocked          = "LOCKED"           // another process holds the writer lock
	CodeCompactionLock  = "COMPACTION_LOCK"  // an unmatched compaction/start holds the compaction lock
	CodeTornTail        = "TORN_TAIL"        // torn bytes past the committed prefix: resume first
	CodeConflict        = "CONFLICT"         // the artifact changed under this writer
	CodeBadInput        = "BAD_INPUT"        // an append line or a command argument
	CodeWriteFailed     = "WRITE_FAILED"     // a write, fsync or link failed
	CodeRefused         = "SESSION_REFUSED"  // the stored log is refused or corrupt
	CodeLive            = "LIVE_TURN"        // resume of a session this process holds live with an open turn
	CodeUnknownCommand  = "UNKNOWN_COMMAND"  // ctl
	CodeNotLive         = "SESSION_NOT_LIVE" // a write to an engine this process already released
	CodeBadCommand      = "BAD_COMMAND"      // a ctl line that does not parse
	// CodeOwned: another process holds the harness's write lease of the session (its
	// SessionAlreadyOwnedError).
	CodeOwned = "SESSION_ALREADY_OWNED"
	// CodeLiveElsewhere: a writer that takes no lease (a harness before 0.1.5) is writing the session, has
	// its artifact open for writing, or changed it within [writer] foreign_quiet with nobody acknowledging.
	CodeLiveElsewhere = "LIVE_ELSEWHERE"
)

// CommandError is a refused or failed write-side command: what status.json's lastError shows, what the
// mount returns as an errno and what the CLI prints.
type CommandError struct {
	Failure Failure
	Code    string
	Message string // the harness's text where it has one
	Line    int    // append: the 1-based line of the write request that was rejected; 0 otherwise
	Err     error  // the underlying error, if any
}

func (e *CommandError) Error() string {
	if e.Line > 0 {
		return "line " + strconv.Itoa(e.Line) + ": " + e.Message
	}
	return e.Message
}

func (e *CommandError) Unwrap() error { return e.Err }

func cmdErr(f Failure, code, msg string) *CommandError {
	return &CommandError{Failure: f, Code: code, Message: msg}
}

// AsCommandError returns err as a *CommandError, classifying any other error: a refusal or corruption of
// the stored log is Refused, a missing session Missing, anything else Failed.
func AsCommandError(err error) *CommandError {
	if err == nil {
		return nil
	}
	var ce *CommandError
	if errors.As(err, &ce) {
		return ce
	}
	if IsNotFound(err) {
		return &CommandError{Failure: Missing, Code: CodeNotFound, Message: err.Error(), Err: err}
	}
	var u *UnsupportedError
	var c *CorruptionError
	if errors.As(err, &u) || errors.As(err, &c) {
		return &CommandError{Failure: Refused, Code: CodeRefused, Message: err.Error(), Err: err}
	}
	return &CommandError{Failure: Failed, Code: CodeWriteFailed, Message: err.Error(), Err: err}
}

// Result is the outcome of one command, as status.json's lastError/lastCommand and a read of ctl show it:
// {"command","errno","code","message","line"}.
type Result struct {
	Command string
	Err     *CommandError // nil on success
	Message string        // on success: what was done
}

// Value renders the result object with every key present, in order.
func (r Result) Value() event.Value {
	null := event.Value{}
	errno, code, line := null, null, null
	msg := r.Message
	if r.Err != nil {
		errno = event.String(r.Err.Failure.ErrnoName())
		code = event.String(r.Err.Code)
		msg = r.Err.Message
		if r.Err.Line > 0 {
			line = event.Int(int64(r.Err.Line))
		}
	}
	return event.Object(
		event.Member{Key: "command", Value: event.String(r.Command)},
		event.Member{Key: "errno", Value: errno},
		event.Member{Key: "code", Value: code},
		event.Member{Key: "message", Value: event.String(msg)},
		event.Member{Key: "line", Value: line},
	)
}

// JSON is the result as one compact line with its LF (what reading ctl returns).
func (r Result) JSON() []byte { return append(event.Stringify(r.Value()), '\n') }
