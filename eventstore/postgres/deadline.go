package postgres

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/dshfs/dshfs/eventstore"
)

// DefaultTimeout is [fleet] timeout's default: how long an operation waits for the server to answer.
const DefaultTimeout = 10 * time.Second

// TimeoutError is an operation the server did not answer within Options.Timeout: a stopped server or a
// network partition, where the connection stays open and nothing arrives. Nothing is written by an
// operation that ends with it (its transaction never committed).
type TimeoutError struct {
	After time.Duration
}

func (e *TimeoutError) Error() string {
	return "the server did not answer within " + e.After.String() + " ([fleet] timeout)"
}

// Unwrap lets errors.Is(err, context.DeadlineExceeded) tell a timeout from other failures.
func (e *TimeoutError) Unwrap() error { return context.DeadlineExceeded }

// watchdog is one operation's deadline. It is not a fixed deadline: an operation that streams rows (a
// large session's load, a sync's COPY) may take longer than the timeout as long as the server keeps
// answering; what the timeout bounds is the wait for the next answer.
type watchdog struct {
	timer *time.Timer
	limit time.Duration
	fired atomic.Bool
}

type watchdogKey struct{}

// bound gives ctx the operation deadline of Options.Timeout, and returns end, which stops it and turns an
// error the deadline caused into an *eventstore.IOError around a *TimeoutError. An operation called from
// within another one (ctx already bounded) shares the outer deadline.
func (b *Backend) bound(ctx context.Context) (context.Context, func(error) error) {
	if _, ok := ctx.Value(watchdogKey{}).(*watchdog); ok {
		return ctx, func(err error) error { return err }
	}
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watchdog{limit: b.opts.Timeout}
	w.timer = time.AfterFunc(w.limit, func() {
		w.fired.Store(true)
		cancel(&TimeoutError{After: w.limit})
	})
	ctx = context.WithValue(ctx, watchdogKey{}, w)
	return ctx, func(err error) error {
		w.timer.Stop()
		cancel(nil)
		// the deadline fired, or the driver's own of the same length did (connect_timeout, which defaults
		// to the timeout): either way the server did not answer in time, unless the caller's context ended
		if err != nil && (w.fired.Load() || errors.Is(err, context.DeadlineExceeded) && parent.Err() == nil) {
			return &eventstore.IOError{Err: &StoreError{Where: b.where, Err: &TimeoutError{After: w.limit}}}
		}
		return err
	}
}

// progress pushes the deadline of ctx's operation back: the server answered (a row arrived), or the
// operation sent it more (a row of a COPY).
func progress(ctx context.Context) {
	if w, ok := ctx.Value(watchdogKey{}).(*watchdog); ok && !w.fired.Load() {
		w.timer.Reset(w.limit)
	}
}

// cleanup is a context for the statements that tidy up after a failure (an unlock, a close): bounded by
// the timeout on its own, since the operation's context may have ended already.
func (b *Backend) cleanup() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), b.opts.Timeout)
}

// pause stops the deadline of ctx's operation while dshfs does work of its own (encoding a batch, handing
// a row to the caller's writer): the timeout bounds waits for the server, not this process's own time.
// resume starts it again, in full.
func pause(ctx context.Context) (resume func()) {
	w, ok := ctx.Value(watchdogKey{}).(*watchdog)
	if !ok || !w.timer.Stop() {
		return func() {} // none, or fired already: the operation fails as it would have
	}
	return func() { w.timer.Reset(w.limit) }
}
