package postgres

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/jackc/pgx/v5"
)

// writerLock is a session's writer lock: a session-level advisory lock held by a connection of its own for
// the lock's life. The server drops it with the connection; the writes of the session run on that very
// connection, so a write never lands after its lock was lost, and a lost lock is re-taken (or refused
// busy) by the next write.
type writerLock struct {
	b  *Backend
	id string

	mu       sync.Mutex // one write at a time on conn
	conn     *pgx.Conn  // nil once released, or while the lock is lost and not re-taken
	released bool
	// backend is the server process of the connection the lock was last taken on: when that connection is
	// lost (a deadline closed it while the server did not answer), the server holds the lock for it until
	// it notices, and a re-take must not mistake its own old lock for another writer's
	backend uint32
}

// Lock takes session id's writer lock without waiting: a busy *eventstore.CommandError (CodeLocked)
// naming the holder's host and pid when another connection — another host, process or Backend — holds
// it, or when a host's sync still feeds the session.
func (b *Backend) Lock(ctx context.Context, id string) (_ eventstore.WriterLock, err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	if b.opts.ReadOnly {
		return nil, b.readOnlyError()
	}
	l := &writerLock{b: b, id: id}
	conn, err := b.take(ctx, id)
	if err != nil {
		return nil, err
	}
	l.conn, l.backend = conn, conn.PgConn().PID()
	b.mu.Lock()
	b.locks[id] = l
	b.mu.Unlock()
	return l, nil
}

// take opens a connection and takes the lock on it, refusing a session a sync holds, and records the
// holder; the connection is closed on failure.
func (b *Backend) take(ctx context.Context, id string) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, b.cfg.ConnConfig.Copy())
	if err != nil {
		return nil, b.wrap(err)
	}
	fail := func(err error) (*pgx.Conn, error) {
		cctx, cancel := b.cleanup()
		conn.Close(cctx)
		cancel()
		return nil, b.wrap(err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, hashtext($2))`, lockNamespace, id).Scan(&ok); err != nil {
		return fail(err)
	}
	if !ok {
		return fail(b.lockedError(ctx, conn, id))
	}
	// from here a failure unlocks before closing: the server frees a closed connection's locks only once
	// its backend has ended, and the next Lock must not be refused by this one meanwhile
	fail = func(err error) (*pgx.Conn, error) {
		cctx, cancel := b.cleanup()
		conn.Exec(cctx, `SELECT pg_advisory_unlock($1, hashtext($2))`, lockNamespace, id)
		conn.Close(cctx)
		cancel()
		return nil, b.wrap(err)
	}
	if err := b.syncHeld(ctx, conn, id); err != nil {
		return fail(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO writers (session_id, host, pid, backend_pid) VALUES ($1, $2, $3, pg_backend_pid())
ON CONFLICT (session_id) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid, backend_pid = EXCLUDED.backend_pid, since = now()`,
		id, b.opts.Host, int32(os.Getpid())); err != nil {
		return fail(err)
	}
	return conn, nil
}

// syncHeld refuses a session a host's sync still feeds: sync_host set and sync_seen within ReleaseAfter.
func (b *Backend) syncHeld(ctx context.Context, q queryer, id string) error {
	var host *string
	var seen *time.Time
	var held bool
	err := q.QueryRow(ctx, `SELECT sync_host, sync_seen, sync_host IS NOT NULL AND sync_seen > now() - make_interval(secs => $2)
FROM sessions WHERE id = $1`, id, b.opts.ReleaseAfter.Seconds()).Scan(&host, &seen, &held)
	if err == pgx.ErrNoRows || err != nil || !held {
		if err == pgx.ErrNoRows {
			return nil
		}
		return err
	}
	return &eventstore.CommandError{Failure: eventstore.Busy, Code: eventstore.CodeLocked,
		Message: "session " + strconv.Quote(id) + " is being synced into the fleet store by host " + *host + " (last sync " + seen.UTC().Format(time.RFC3339) +
			"); writes through the fleet store are refused until that host releases it (dshfs sync --release) or no sync of it runs for " + b.opts.ReleaseAfter.String()}
}

// Release gives the lock up: the holder record is removed and the connection closed (which frees the
// lock even when the unlock cannot be sent).
func (l *writerLock) Release() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return nil
	}
	l.released = true
	l.b.mu.Lock()
	if l.b.locks[l.id] == l {
		delete(l.b.locks, l.id)
	}
	l.b.mu.Unlock()
	if l.conn == nil {
		return nil
	}
	ctx, cancel := l.b.cleanup()
	defer cancel()
	l.conn.Exec(ctx, `DELETE FROM writers WHERE session_id = $1 AND backend_pid = pg_backend_pid()`, l.id)
	// unlocked explicitly: the server drops a closed connection's locks only once its backend has ended,
	// and the next writer must not be refused meanwhile
	l.conn.Exec(ctx, `SELECT pg_advisory_unlock($1, hashtext($2))`, lockNamespace, l.id)
	err := l.conn.Close(ctx)
	l.conn = nil
	return err
}

// live returns the lock's connection, re-taking the lock on a new one when the old connection was lost
// (terminated, or the server restarted): busy when someone else took the session meanwhile. Called with
// l.mu held.
func (l *writerLock) live(ctx context.Context) (*pgx.Conn, error) {
	if l.released {
		return nil, &eventstore.CommandError{Failure: eventstore.Busy, Code: eventstore.CodeNotLive,
			Message: "session " + strconv.Quote(l.id) + ": its writer lock was released; nothing was written"}
	}
	if l.conn != nil && !l.conn.IsClosed() {
		var mine bool
		err := l.conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid()
AND classid = $1::oid AND objid = hashtext($2)::oid AND objsubid = 2)`, int64(uint32(lockNamespace)), l.id).Scan(&mine)
		if err == nil && mine {
			return l.conn, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if l.conn != nil {
		cctx, cancel := l.b.cleanup()
		l.conn.Close(cctx)
		cancel()
		l.conn = nil
	}
	conn, err := l.b.take(ctx, l.id)
	for err != nil && locked(err) && l.b.ownLostLock(ctx, l.id, l.backend) {
		// our lost connection's server process still holds the lock: it ends once the server notices the
		// connection is gone (at once, for a server that was paused); asked to end now, it is waited for
		if !l.b.wait(ctx) {
			break
		}
		conn, err = l.b.take(ctx, l.id)
	}
	if err != nil {
		return nil, err // the next write tries again
	}
	l.conn, l.backend = conn, conn.PgConn().PID()
	return conn, nil
}

// ownLostLock reports whether a refused re-take of session id's writer lock may be tried again: the lock
// is held by backend, this Backend's own server process of a connection it has lost (which it asks the
// server to end), or by nobody any more (that process ended between the refusal and this look).
func (b *Backend) ownLostLock(ctx context.Context, id string, backend uint32) bool {
	if backend == 0 {
		return false
	}
	var holder *int32
	err := b.pool.QueryRow(ctx, `SELECT (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
AND classid = $1::oid AND objid = hashtext($2)::oid AND objsubid = 2 LIMIT 1)`, int64(uint32(lockNamespace)), id).Scan(&holder)
	switch {
	case err != nil:
		return false
	case holder == nil:
		return true
	case uint32(*holder) != backend:
		return false // another writer's
	}
	// best effort: a role may end its own server processes; without the right, the process ends by itself
	b.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, int32(backend))
	return true
}

// locked reports whether err is the refusal of a writer lock another connection holds.
func locked(err error) bool {
	var ce *eventstore.CommandError
	return errors.As(err, &ce) && ce.Code == eventstore.CodeLocked
}

// wait pauses before the next look at a lock whose holder is ending, false once ctx is done.
func (b *Backend) wait(ctx context.Context) bool {
	t := time.NewTimer(20 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// lockOf returns the writer lock this Backend holds for id, nil when none.
func (b *Backend) lockOf(id string) *writerLock {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.locks[id]
}
