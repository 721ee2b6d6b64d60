package command

import (
	"context"
	"time"

	"github.com/dshfs/dshfs/compaction"
	"github.com/dshfs/dshfs/config"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
)

// Change names what a successful command changed beyond its own session, so a mount can tell the kernel.
type Change int

const (
	// Listing: a session appeared or was released (fork, create, rescan); the sessions listing changed.
	Listing Change = iota + 1
	// LiveStatus: the status.json of every live session changed (quiesce).
	LiveStatus
)

// Env is what commands run with: the store and its engines, the write-side configuration, and which
// front-end runs them.
type Env struct {
	Store      *eventstore.Store
	Compaction config.Compaction // compact: the summarizer
	Pruner     config.Pruner     // prune
	// Generation is what create makes when the command names none ([writer] generation; "" is auto).
	Generation string
	Front      Front
	// Changed, when set, is told what a command changed (after it succeeded).
	Changed func(ctx context.Context, c Change)
}

// Line parses and runs one ctl line (session "" is the store's ctl).
func (e Env) Line(ctx context.Context, session, line string) Result {
	req, err := ParseCtl(session, line)
	if err != nil {
		return e.Refused(req, err)
	}
	return e.Run(ctx, req)
}

// Refused is the result of a request that was refused before it ran (it did not parse).
func (e Env) Refused(req Request, err error) Result {
	return Result{Line: req.Line, Front: e.Front, Err: eventstore.AsCommandError(err)}
}

// Run executes a parsed request against the store.
func (e Env) Run(ctx context.Context, req Request) Result {
	r := Result{Line: req.Line, Front: e.Front}
	var err error
	r.Done, err = e.run(ctx, req, &r)
	if err != nil {
		r.Done, r.Err = nil, eventstore.AsCommandError(err)
	}
	return r
}

func (e Env) run(ctx context.Context, req Request, r *Result) (Outcome, error) {
	st, id := e.Store, req.Session
	switch c := req.Cmd.(type) {
	case Flush:
		return e.flush(ctx, id)
	case Append:
		return e.append(ctx, id, c)
	case Resume:
		w, err := st.Resume(ctx, id)
		if err != nil {
			return nil, err
		}
		return Resumed{Through: w.Revision().Durable - 1}, nil
	case Fork:
		child, err := st.Fork(ctx, id, c.Boundary, c.Child)
		if err != nil {
			return nil, err
		}
		e.changed(ctx, Listing)
		return Forked{Child: child}, nil
	case Close:
		w := st.Live(id)
		if w == nil {
			return Closed{}, nil
		}
		if err := w.Close(ctx); err != nil {
			return nil, err
		}
		return Closed{Released: true}, nil
	case Compact:
		w, err := writer(ctx, st, id)
		if err != nil {
			return nil, err
		}
		in := compaction.Request{Summarizer: compaction.NewSummarizer(e.Compaction)}
		if c.Range != nil {
			in.Range = &[2]int64{c.Range.Start, c.Range.End}
		}
		out, err := compaction.Compact(ctx, w, in)
		if err != nil {
			return nil, err
		}
		return Compacted{out}, nil
	case Prune:
		w, err := writer(ctx, st, id)
		if err != nil {
			return nil, err
		}
		out, err := compaction.PruneSession(ctx, w, e.Pruner)
		if err != nil {
			return nil, err
		}
		return Pruned{out}, nil
	case FlushAll:
		var first error
		for _, sid := range st.LiveIDs() {
			sr := Result{Line: "flush", Front: e.Front}
			var err error
			if sr.Done, err = e.flush(ctx, sid); err != nil {
				sr.Done, sr.Err = nil, eventstore.AsCommandError(err)
				if first == nil {
					first = sr.Err
				}
			}
			r.Sessions = append(r.Sessions, SessionResult{ID: sid, Result: sr})
		}
		if first != nil {
			return nil, first
		}
		return FlushedAll{Sessions: len(r.Sessions)}, nil
	case Create:
		if c.ID == "" {
			c.ID = eventstore.NewSessionID()
		}
		h := event.Header{ID: c.ID, CreatedAt: time.Now().UnixMilli()}
		if c.Cwd != "" {
			cwd := event.String(c.Cwd)
			h.Cwd = &cwd
		}
		gen := c.Generation
		if gen == "" {
			gen = e.Generation
		}
		v4 := gen == "4"
		if gen == "" || gen == "auto" {
			var err error
			if v4, err = st.WritesV4ByDefault(ctx); err != nil {
				return nil, err
			}
		}
		if v4 {
			h = eventstore.V4Header(h)
		}
		if err := st.Create(ctx, h); err != nil {
			return nil, err
		}
		e.changed(ctx, Listing)
		return Created{ID: c.ID}, nil
	case Rescan:
		n := st.Rescan()
		// a rescan is the user's word that no harness runs the sessions refused as live elsewhere
		acked, err := st.AcknowledgeForeign(ctx)
		e.changed(ctx, Listing)
		if err != nil {
			return nil, err
		}
		return Rescanned{Released: n, Acknowledged: acked}, nil
	case Quiesce:
		until, err := st.Quiesce(ctx, c.For)
		if err != nil {
			return nil, err
		}
		e.changed(ctx, LiveStatus)
		return Quiesced{Until: until}, nil
	case ResumeWrites:
		return WritesResumed{WasQuiesced: st.ResumeWrites("resume-writes")}, nil
	}
	return nil, bad(eventstore.CodeBadCommand, "no command to run")
}

func (e Env) changed(ctx context.Context, c Change) {
	if e.Changed != nil {
		e.Changed(ctx, c)
	}
}

// flush makes a live session's accepted events durable; a session not live here has nothing pending.
func (e Env) flush(ctx context.Context, id string) (Outcome, error) {
	w := e.Store.Live(id)
	if w == nil {
		return NothingPending{}, nil
	}
	n := w.Pending()
	if err := w.Flush(ctx); err != nil {
		return nil, err
	}
	return Flushed{Events: n, Through: w.Revision().Durable - 1}, nil
}

// writer is the session's live engine for a compaction or a prune; a refusal keeps its own code (QUIESCED,
// LOCKED, CONFLICT…), so status.json says why the session could not be written.
func writer(ctx context.Context, st *eventstore.Store, id string) (*eventstore.Session, error) {
	if held := st.WritesHeld(); held != nil {
		// a compaction writes (its start is flushed before the summary): not while quiesced
		return nil, held
	}
	w, err := st.Writer(ctx, id)
	if err != nil {
		return nil, eventstore.AsCommandError(err)
	}
	return w, nil
}
