// Package command holds the write-side commands of docs/writing.md as typed values, parsed once and run
// once for every front-end: a session's or the store's ctl file and a session's append file in the mount,
// and the write commands of the CLI (dshfs append, resume, fork, create, compact).
//
// A front-end turns its input into a Request — ParseCtl for a ctl line, ParseCLI for the operands of a
// CLI command, an Append of the lines written for append — and hands it to Env.Run, which returns a
// Result. A Result holds what was done as typed fields (an Outcome), or the *eventstore.CommandError that
// refused it; its one rendering, Record, is what status.json's lastCommand/lastError shows, what a read of
// ctl returns and what the CLI prints, so the mount and the CLI cannot drift apart. What legitimately differs between them (a mount keeps a resumed
// session live, a CLI process releases it when it exits) is the Front field of the Env and the Result,
// not a second set of messages.
//
// Parsing never touches the store; running never parses. Errors are *eventstore.CommandError values whose
// Failure picks the errno (mount) or the exit code (CLI).
package command
