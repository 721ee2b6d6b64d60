package command

import "time"

// Command is one typed write-side command. The session commands are Append, Flush, Resume, Fork, Compact,
// Prune and Close; the store commands FlushAll, Create, Rescan, Quiesce and ResumeWrites.
type Command interface {
	// Name is the command word of the ctl syntax.
	Name() string
}

// Flush makes every accepted event of the session durable.
type Flush struct{}

// Resume makes this process the session's live writer, committing crash repair and a session/end-seed as
// the harness's resume does.
type Resume struct{}

// Fork is the harness's fork: a child holding the parent's events 0..Boundary and a session/end-seed.
type Fork struct {
	Boundary *int64 // the last seq the child keeps; nil: the parent's last
	Child    string // the child's id; "": a new UUIDv4
}

// Range is an explicit surface range for a manual compaction: seqs, inclusive, in surface order.
type Range struct{ Start, End int64 }

// Compact is a manual compaction with the configured summarizer.
type Compact struct {
	Range *Range // nil: the harness's head-anchored span
}

// Prune runs the tool-result pruner over the current surface.
type Prune struct{}

// Close flushes the session and releases live ownership.
type Close struct{}

// FlushAll (the store's `flush`) flushes every live session.
type FlushAll struct{}

// Create materializes a header-only session.
type Create struct {
	ID  string // "": a new UUIDv4
	Cwd string // absolute; "": no cwd in the header
	// Generation is the new session's format generation: "auto", "0" or "4"; "" takes the Env's
	// ([writer] generation).
	Generation string
}

// Rescan re-reads the store and releases sessions whose artifact changed under this writer.
type Rescan struct{}

// Quiesce flushes every live session and holds new writes for For (or until ResumeWrites).
type Quiesce struct{ For time.Duration }

// ResumeWrites ends a quiesce: held batches are written.
type ResumeWrites struct{}

// Name implementations: the ctl words.
func (Append) Name() string       { return "append" }
func (Flush) Name() string        { return "flush" }
func (Resume) Name() string       { return "resume" }
func (Fork) Name() string         { return "fork" }
func (Compact) Name() string      { return "compact" }
func (Prune) Name() string        { return "prune" }
func (Close) Name() string        { return "close" }
func (FlushAll) Name() string     { return "flush" }
func (Create) Name() string       { return "create" }
func (Rescan) Name() string       { return "rescan" }
func (Quiesce) Name() string      { return "quiesce" }
func (ResumeWrites) Name() string { return "resume-writes" }

// The quiesce a bare `quiesce` asks for, and the longest one may ask for: a forgotten quiesce must end.
const (
	DefaultQuiesce = 60 * time.Second
	MaxQuiesce     = 24 * time.Hour
)
