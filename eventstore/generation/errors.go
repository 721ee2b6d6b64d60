package generation

import "strconv"

// ErrorClass is the name of the harness's error class a refusal corresponds to; its decode tools print
// `<class>: <message>`.
type ErrorClass string

// The harness's session-format error classes (@deepseek-ai/dsh-session-format).
const (
	// ClassFormat is SessionFormatError: the artifact cannot be restored losslessly (malformed or
	// inconsistent content).
	ClassFormat ErrorClass = "SessionFormatError"
	// ClassUnsupported is SessionFormatUnsupportedMigrationError: the content is readable but uses
	// something this release refuses (an unknown required event type, a retired v3 field, a newer
	// generation).
	ClassUnsupported ErrorClass = "SessionFormatUnsupportedMigrationError"
)

// FormatError is a refusal raised by the harness's codec or its released validation, with the harness's
// own text.
type FormatError struct {
	Class   ErrorClass
	Message string
	// Line is the artifact line (1 = the first line after the header) of the row the codec refused, 0
	// when the refusal concerns the header or the restored artifact as a whole. The harness's reader
	// reports a refused row as "corrupt session log: invalid committed event at line <Line>: <Message>".
	Line int
}

func (e *FormatError) Error() string { return e.Message }

// JSErrorName is the JavaScript class name, read by callers that render the harness's `String(err)`.
func (e *FormatError) JSErrorName() string { return string(e.Class) }

// Unsupported reports whether the harness classes the refusal as an unsupported (rather than corrupt)
// artifact.
func (e *FormatError) Unsupported() bool { return e.Class == ClassUnsupported }

func formatErr(msg string) *FormatError { return &FormatError{Class: ClassFormat, Message: msg} }

func unsupportedErr(msg string) *FormatError {
	return &FormatError{Class: ClassUnsupported, Message: msg}
}

// CorruptError is damage below the codec: the framing of lines and zstd frames, or a line that is not
// JSON. Texts follow the v0 reader's (docs/harness.md#zstd-framing and #committed-prefix-and-torn-tails).
type CorruptError struct {
	Message string
}

func (e *CorruptError) Error() string { return e.Message }

// MismatchError is an artifact whose header names another generation than its file name.
type MismatchError struct {
	FileVersion   int
	HeaderVersion int64
}

func (e *MismatchError) Error() string {
	return "resolved JSONL source filename identifies v" + strconv.Itoa(e.FileVersion) +
		", but its header identifies v" + strconv.FormatInt(e.HeaderVersion, 10)
}

// UnsupportedGenerationError is a generation this package does not decode: v0 is the v0 reader's, v1
// was never written by a tagged release, and anything above v3 is newer than the latest release.
type UnsupportedGenerationError struct {
	Version int
}

func (e *UnsupportedGenerationError) Error() string {
	if e.Version > Latest {
		// the harness catalog's text for a stored generation newer than the build
		return "stored Session uses newer format v" + strconv.Itoa(e.Version) + "; this build writes v" + strconv.Itoa(Latest)
	}
	return "format v" + strconv.Itoa(e.Version) + " is not decoded here (v2, v3 and v4 are)"
}

// Unsupported reports true: the artifact may be intact, only not readable by this build.
func (e *UnsupportedGenerationError) Unsupported() bool { return true }
