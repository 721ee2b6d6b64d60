package mount

import (
	"context"
	"fmt"

	"github.com/dshfs/dshfs/command"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/nodes"
	"github.com/dshfs/dshfs/spill"
)

// The write side of the mount (docs/writing.md): append, ctl and mkdir, over the session engines of the
// Store. Every outcome a user sees as an errno is recorded — in the session's (or the store's)
// status.json and in the log — before the errno is returned.

var _ nodes.Writer = (*FS)(nil)

// Writer is the write side, nil on a read-only mount.
func (f *FS) Writer() nodes.Writer {
	if f.opts.Config.ReadOnly {
		return nil
	}
	return f
}

// record remembers a command's outcome for status.json and logs a failure.
func (f *FS) record(id string, r eventstore.Result) {
	if id == "" {
		if r.Err != nil {
			f.storeErr.Store(&r)
		}
	} else {
		f.opts.Store.Record(id, r)
	}
	if r.Err != nil {
		f.log.Warn("command refused", "session", id, "command", r.Command, "errno", r.Err.Failure.ErrnoName(), "code", r.Err.Code, "reason", r.Err.Error())
	}
	f.touch(id)
}

// Refuse records why an append handle refused input.
func (f *FS) Refuse(id, message string) {
	f.record(id, eventstore.Result{Command: "append", Err: &eventstore.CommandError{Failure: eventstore.Invalid, Code: eventstore.CodeBadInput, Message: message}})
}

// LineLimit is the engine's line limit ([writer] max_line_bytes).
func (f *FS) LineLimit() int64 { return f.opts.Store.MaxLine }

// Append accepts the complete lines of one write request; a cold session becomes live here. A refusal is
// recorded; an accepted write is not (status.json's pending and events show it).
func (f *FS) Append(ctx context.Context, id string, input []byte) error {
	r := f.commands().Run(ctx, command.Request{Session: id, Line: "append", Cmd: command.Append{Input: input}})
	if r.Err != nil {
		f.record(id, r.Record())
		return r.Err
	}
	f.touch(id)
	return nil
}

// Flush makes a session's accepted events durable (fsync on append; ctl flush).
func (f *FS) Flush(ctx context.Context, id string) error {
	r := f.flush(ctx, id)
	f.record(id, r.Record())
	if r.Err != nil {
		return r.Err
	}
	return nil
}

func (f *FS) flush(ctx context.Context, id string) command.Result {
	return f.commands().Run(ctx, command.Request{Session: id, Line: "flush", Cmd: command.Flush{}})
}

// commands is the command layer over this mount's store: its results say "this mount", and what a command
// changes reaches the kernel.
func (f *FS) commands() command.Env {
	return command.Env{
		Store:      f.opts.Store,
		Compaction: f.opts.Config.Compaction,
		Pruner:     f.opts.Config.Pruner,
		Generation: f.opts.Config.Writer.Generation,
		Front:      command.Mount,
		Changed:    f.changed,
	}
}

// changed queues the kernel notifications a command's change needs.
func (f *FS) changed(ctx context.Context, c command.Change) {
	switch c {
	case command.Listing:
		f.relist(ctx)
	case command.LiveStatus:
		f.touchAll()
	}
}

// Command runs one ctl command (docs/writing.md): on a session, or on the store when id is "".
func (f *FS) Command(ctx context.Context, id, line string) command.Result {
	r := f.commands().Line(ctx, id, line)
	for _, s := range r.Sessions { // a store flush: each session's status.json shows its own flush
		f.record(s.ID, s.Result.Record())
	}
	f.record(id, r.Record())
	return r
}

// touchAll queues the kernel invalidation of every live session (their status.json changes).
func (f *FS) touchAll() {
	for _, id := range f.opts.Store.LiveIDs() {
		f.touch(id)
	}
}

// Mkdir creates a session named by its encoded directory name.
func (f *FS) Mkdir(ctx context.Context, name string) (string, error) {
	id, ok := spill.DecodeName(name)
	req := command.Request{Line: "mkdir " + name, Cmd: command.Create{ID: id}}
	var r command.Result
	switch {
	case !ok && len(name) > spill.MaxNameBytes:
		// the id may be valid, but sessions/ lists a name this long cut short and hashed, so the directory
		// mkdir asks for could never be the session's; create takes the id itself
		r = f.commands().Refused(req, bad(eventstore.CodeBadInput, "a session name of %d bytes is listed under a shortened name (sessions/ names are at most %d bytes), so mkdir cannot create it as %q; create it with `echo 'create ID' > MNT/ctl` or `dshfs create STORE ID`", len(name), spill.MaxNameBytes, name))
	case !ok:
		r = f.commands().Refused(req, bad(eventstore.CodeBadInput, "%q is not an encoded session name (write characters outside [A-Za-z0-9._-] as ~XXXX, e.g. a~002Fb for a/b)", name))
	case id == "":
		r = f.commands().Refused(req, bad(eventstore.CodeBadInput, "session id must be a non-empty string"))
	default:
		r = f.commands().Run(ctx, req)
	}
	f.record("", r.Record())
	if r.Err != nil {
		return "", r.Err
	}
	return id, nil
}

func bad(code, format string, a ...any) *eventstore.CommandError {
	return &eventstore.CommandError{Failure: eventstore.Invalid, Code: code, Message: fmt.Sprintf(format, a...)}
}

// relist re-reads the listing now (a command created a session) and queues the kernel notifications.
func (f *FS) relist(ctx context.Context) {
	c, err := f.refresh(ctx)
	if err != nil {
		f.log.Warn("store listing failed", "err", err)
		return
	}
	f.queue(c)
}

// FlushAll flushes every live session (unmount, SIGTERM); failures are logged and recorded.
func (f *FS) FlushAll(ctx context.Context) {
	if f.opts.Store.ResumeWrites("unmount") {
		f.log.Info("unmounting ends the quiesce: held batches are written")
	}
	for _, id := range f.opts.Store.LiveIDs() {
		if r := f.flush(ctx, id); r.Err != nil {
			f.record(id, r.Record())
		}
	}
}

// Close flushes and releases every live session (after unmount); events that cannot be written are kept
// in a sidecar beside their artifact, and the log says where. The index's last entries are appended too.
func (f *FS) Close(ctx context.Context) error {
	f.cache.Close() // the index entries of the last batch
	err := f.opts.Store.Close(ctx)
	if err != nil {
		f.log.Error("flush at unmount failed", "err", err)
	}
	return err
}
