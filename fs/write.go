package fs

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dshfs/dshfs/compaction"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/nodes"
	"github.com/dshfs/dshfs/spill"
)

// The write side of the mount (DESIGN.md §5): append, ctl and mkdir, over the session engines of the
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
		f.log.Warn("command refused", "session", id, "command", r.Command, "errno", r.Err.Failure.Errno(), "code", r.Err.Code, "reason", r.Err.Error())
	}
	f.touch(id)
}

// Refuse records why an append handle refused input.
func (f *FS) Refuse(id, message string) {
	f.record(id, eventstore.Result{Command: "append", Err: &eventstore.CommandError{Failure: eventstore.Invalid, Code: eventstore.CodeBadInput, Message: message}})
}

// LineLimit is the engine's line limit ([writer] max_line_bytes).
func (f *FS) LineLimit() int64 { return f.opts.Store.MaxLine }

// Append accepts the complete lines of one write request; a cold session becomes live here.
func (f *FS) Append(ctx context.Context, id string, lines [][]byte) error {
	w, err := f.opts.Store.Writer(ctx, id)
	if err == nil {
		err = w.Accept(lines)
	}
	if err != nil {
		ce := eventstore.AsCommandError(err)
		f.record(id, eventstore.Result{Command: "append", Err: ce})
		return ce
	}
	f.touch(id)
	return nil
}

// Flush makes a session's accepted events durable (fsync on append; ctl flush).
func (f *FS) Flush(ctx context.Context, id string) error {
	r := f.flush(ctx, id)
	f.record(id, r)
	if r.Err != nil {
		return r.Err
	}
	return nil
}

func (f *FS) flush(ctx context.Context, id string) eventstore.Result {
	r := eventstore.Result{Command: "flush"}
	w := f.opts.Store.Live(id)
	if w == nil {
		r.Message = "nothing pending: the session is not live in this mount"
		return r
	}
	n := w.Pending()
	if err := w.Flush(ctx); err != nil {
		r.Err = eventstore.AsCommandError(err)
		return r
	}
	r.Message = fmt.Sprintf("%d events made durable; durable through seq %d", n, w.Revision().Durable-1)
	return r
}

// Command runs one ctl command (DESIGN.md §5): on a session, or on the store when id is "".
func (f *FS) Command(ctx context.Context, id, line string) eventstore.Result {
	args := strings.Fields(line)
	if len(args) == 0 {
		r := eventstore.Result{Command: "", Err: &eventstore.CommandError{Failure: eventstore.Invalid, Code: eventstore.CodeBadCommand, Message: "empty command"}}
		f.record(id, r)
		return r
	}
	var r eventstore.Result
	if id == "" {
		r = f.storeCommand(ctx, args)
	} else {
		r = f.sessionCommand(ctx, id, args)
	}
	r.Command = strings.Join(args, " ")
	f.record(id, r)
	return r
}

func bad(code, format string, a ...any) *eventstore.CommandError {
	return &eventstore.CommandError{Failure: eventstore.Invalid, Code: code, Message: fmt.Sprintf(format, a...)}
}

func (f *FS) sessionCommand(ctx context.Context, id string, args []string) eventstore.Result {
	st := f.opts.Store
	var r eventstore.Result
	switch args[0] {
	case "flush":
		if len(args) != 1 {
			r.Err = bad(eventstore.CodeBadCommand, "flush takes no arguments")
			break
		}
		r = f.flush(ctx, id)
	case "resume":
		if len(args) != 1 {
			r.Err = bad(eventstore.CodeBadCommand, "resume takes no arguments")
			break
		}
		w, err := st.Resume(ctx, id)
		if err != nil {
			r.Err = eventstore.AsCommandError(err)
			break
		}
		rev := w.Revision()
		r.Message = fmt.Sprintf("resumed: live in this mount, durable through seq %d", rev.Durable-1)
	case "fork":
		if len(args) > 3 {
			r.Err = bad(eventstore.CodeBadCommand, "usage: fork [BOUNDARY] [CHILD_ID]")
			break
		}
		boundary, child := "", ""
		if len(args) > 1 {
			boundary = args[1]
		}
		if len(args) > 2 {
			child = args[2]
		}
		cid, err := st.Fork(ctx, id, boundary, child)
		if err != nil {
			r.Err = eventstore.AsCommandError(err)
			break
		}
		f.relist(ctx)
		r.Message = "forked: child " + string(event.Stringify(event.String(cid)))
	case "close":
		if len(args) != 1 {
			r.Err = bad(eventstore.CodeBadCommand, "close takes no arguments")
			break
		}
		w := st.Live(id)
		if w == nil {
			r.Message = "not live in this mount: nothing to release"
			break
		}
		if err := w.Close(ctx); err != nil {
			r.Err = eventstore.AsCommandError(err)
			break
		}
		r.Message = "flushed and released"
	case "compact":
		r = compaction.CompactCommand(ctx, st, id, args[1:], f.opts.Config.Compaction)
	case "prune":
		r = compaction.PruneCommand(ctx, st, id, args[1:], f.opts.Config.Pruner)
	default:
		r.Err = bad(eventstore.CodeUnknownCommand, "unknown session command %q (flush, resume, fork [BOUNDARY] [CHILD_ID], compact [START END], prune, close)", args[0])
	}
	return r
}

func (f *FS) storeCommand(ctx context.Context, args []string) eventstore.Result {
	st := f.opts.Store
	var r eventstore.Result
	switch args[0] {
	case "flush":
		n := 0
		for _, id := range st.LiveIDs() {
			res := f.flush(ctx, id)
			f.record(id, res)
			n++
			if res.Err != nil && r.Err == nil {
				r.Err = res.Err
			}
		}
		if r.Err == nil {
			r.Message = fmt.Sprintf("flushed %d live sessions", n)
		}
	case "create":
		id, h, err := createArgs(args[1:])
		if err != nil {
			r.Err = err
			break
		}
		if err := f.create(ctx, h); err != nil {
			r.Err = eventstore.AsCommandError(err)
			break
		}
		r.Message = "created " + string(event.Stringify(event.String(id)))
	case "rescan":
		n := st.Rescan()
		f.relist(ctx)
		r.Message = fmt.Sprintf("rescanned the store; %d sessions released after a conflict", n)
	case "quiesce":
		d := defaultQuiesce
		if len(args) > 2 {
			r.Err = bad(eventstore.CodeBadCommand, "usage: quiesce [SECONDS]")
			break
		}
		if len(args) == 2 {
			secs, err := strconv.ParseFloat(args[1], 64)
			if err != nil || secs <= 0 || secs > maxQuiesce.Seconds() {
				r.Err = bad(eventstore.CodeBadInput, "quiesce takes a number of seconds in (0, %d], got %q", int(maxQuiesce.Seconds()), args[1])
				break
			}
			d = time.Duration(secs * float64(time.Second))
		}
		until, err := st.Quiesce(ctx, d)
		if err != nil {
			r.Err = eventstore.AsCommandError(err)
			break
		}
		f.touchAll()
		r.Message = "quiesced until " + until.UTC().Format(time.RFC3339Nano) + ": every live session is flushed; new events are accepted and held until resume-writes or then"
	case "resume-writes":
		if len(args) != 1 {
			r.Err = bad(eventstore.CodeBadCommand, "resume-writes takes no arguments")
			break
		}
		if st.ResumeWrites("resume-writes") {
			r.Message = "writes resumed: held batches are being written"
		} else {
			r.Message = "not quiesced: nothing to resume"
		}
	default:
		r.Err = bad(eventstore.CodeUnknownCommand, "unknown store command %q (flush, create [ID] [cwd=/abs/path], rescan, quiesce [SECONDS], resume-writes)", args[0])
	}
	return r
}

// The quiesce a bare `quiesce` asks for, and the longest one may ask for: a forgotten quiesce must end.
const (
	defaultQuiesce = 60 * time.Second
	maxQuiesce     = 24 * time.Hour
)

// touchAll queues the kernel invalidation of every live session (their status.json changes).
func (f *FS) touchAll() {
	for _, id := range f.opts.Store.LiveIDs() {
		f.touch(id)
	}
}

// createArgs parses `create [ID] [cwd=/abs/path]`; the id defaults to a new UUIDv4.
func createArgs(args []string) (string, event.Header, *eventstore.CommandError) {
	var id string
	var cwd *event.Value
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "cwd="); ok {
			if !filepath.IsAbs(v) {
				return "", event.Header{}, bad(eventstore.CodeBadInput, "cwd must be an absolute path, got %q", v)
			}
			c := event.String(v)
			cwd = &c
			continue
		}
		if id != "" {
			return "", event.Header{}, bad(eventstore.CodeBadCommand, "usage: create [ID] [cwd=/abs/path]")
		}
		id = a
	}
	if id == "" {
		id = eventstore.NewSessionID()
	}
	return id, event.Header{ID: id, CreatedAt: time.Now().UnixMilli(), Cwd: cwd}, nil
}

func (f *FS) create(ctx context.Context, h event.Header) error {
	if err := f.opts.Store.Create(ctx, h); err != nil {
		return err
	}
	f.relist(ctx)
	return nil
}

// Mkdir creates a session named by its encoded directory name.
func (f *FS) Mkdir(ctx context.Context, name string) (string, error) {
	id, ok := spill.DecodeName(name)
	r := eventstore.Result{Command: "mkdir " + name}
	switch {
	case !ok:
		r.Err = bad(eventstore.CodeBadInput, "%q is not an encoded session name (write characters outside [A-Za-z0-9._-] as ~XXXX, e.g. a~002Fb for a/b)", name)
	case id == "":
		r.Err = bad(eventstore.CodeBadInput, "session id must be a non-empty string")
	default:
		if err := f.create(ctx, event.Header{ID: id, CreatedAt: time.Now().UnixMilli()}); err != nil {
			r.Err = eventstore.AsCommandError(err)
		} else {
			r.Message = "created " + string(event.Stringify(event.String(id)))
		}
	}
	f.record("", r)
	if r.Err != nil {
		return "", r.Err
	}
	return id, nil
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
			f.record(id, r)
		}
	}
}

// Close flushes and releases every live session (after unmount); events that cannot be written are kept
// in a sidecar beside their artifact, and the log says where.
func (f *FS) Close(ctx context.Context) error {
	err := f.opts.Store.Close(ctx)
	if err != nil {
		f.log.Error("flush at unmount failed", "err", err)
	}
	return err
}
