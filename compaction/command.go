package compaction

import (
	"context"
	"strconv"

	"github.com/dshfs/dshfs/config"
	"github.com/dshfs/dshfs/eventstore"
)

// The compact and prune commands as ctl and the CLI run them: the same words, the same refusals, the
// same result (what status.json's lastCommand shows and dshfs compact prints).

// CompactCommand runs `compact` or `compact START END` (args after the command word) on a session,
// making this process its live writer first. A session that cannot be written without a resume (an open
// turn, a torn tail, a live compaction lock) is refused with code busy and the reason.
func CompactCommand(ctx context.Context, st *eventstore.Store, id string, args []string, cfg config.Compaction) eventstore.Result {
	var r eventstore.Result
	req := Request{Summarizer: NewSummarizer(cfg)}
	switch len(args) {
	case 0:
	case 2:
		start, err1 := strconv.ParseInt(args[0], 10, 64)
		end, err2 := strconv.ParseInt(args[1], 10, 64)
		if err1 != nil || err2 != nil || start < 0 || end < 0 {
			r.Err = &eventstore.CommandError{Failure: eventstore.Invalid, Code: CodeInvalid,
				Message: "compact START END takes two surface seqs (non-negative integers), got " + strconv.Quote(args[0]) + " " + strconv.Quote(args[1])}
			return r
		}
		req.Range = &[2]int64{start, end}
	default:
		r.Err = &eventstore.CommandError{Failure: eventstore.Invalid, Code: eventstore.CodeBadCommand, Message: "usage: compact [START END]"}
		return r
	}
	w, werr := writer(ctx, st, id)
	if werr != nil {
		r.Err = werr
		return r
	}
	out, err := Compact(ctx, w, req)
	if err != nil {
		r.Err = eventstore.AsCommandError(err)
		return r
	}
	r.Message = out.Message()
	return r
}

// PruneCommand runs `prune` on a session live in this process.
func PruneCommand(ctx context.Context, st *eventstore.Store, id string, args []string, cfg config.Pruner) eventstore.Result {
	var r eventstore.Result
	if len(args) != 0 {
		r.Err = &eventstore.CommandError{Failure: eventstore.Invalid, Code: eventstore.CodeBadCommand, Message: "prune takes no arguments"}
		return r
	}
	w, werr := writer(ctx, st, id)
	if werr != nil {
		r.Err = werr
		return r
	}
	out, err := PruneSession(ctx, w, cfg)
	if err != nil {
		r.Err = eventstore.AsCommandError(err)
		return r
	}
	r.Message = out.Message()
	return r
}

// writer is the session's live engine; a busy refusal (a quiesced store included) keeps its reason and
// takes the compaction code.
func writer(ctx context.Context, st *eventstore.Store, id string) (*eventstore.Session, *eventstore.CommandError) {
	if held := st.WritesHeld(); held != nil {
		// a compaction writes (its start is flushed before the summary): not while quiesced
		return nil, &eventstore.CommandError{Failure: eventstore.Busy, Code: CodeBusy, Message: held.Message, Err: held}
	}
	w, err := st.Writer(ctx, id)
	if err == nil {
		return w, nil
	}
	ce := eventstore.AsCommandError(err)
	if ce.Failure == eventstore.Busy {
		return nil, &eventstore.CommandError{Failure: eventstore.Busy, Code: CodeBusy, Message: ce.Message, Err: ce}
	}
	return nil, ce
}
