package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Watch mode names, as Watch reports them for the caller's log.
const (
	WatchListen = "listen" // LISTEN dshfs_fleet on a connection of its own
	WatchPoll   = "poll"   // the sessions' revisions read every PollInterval
)

// PollInterval is how often Watch reads the revisions when it cannot LISTEN.
const PollInterval = time.Second

// Watch announces changed sessions: the channel gets the id of every session a committed write changed
// (any host's: each write notifies inside its transaction), and "" when every session must be read again
// (after the listening connection was lost and came back: what changed meanwhile is unknown). The mode
// says how: WatchListen, or WatchPoll where LISTEN cannot be used (a server or pooler that does not pass
// notifications, such as a hot standby or a transaction pooler), which the caller should log. The channel
// is closed when ctx ends or the Backend is closed.
func (b *Backend) Watch(ctx context.Context) (<-chan string, string, error) {
	ctx, cancel := context.WithCancel(ctx)
	b.mu.Lock()
	b.watches = append(b.watches, cancel)
	b.mu.Unlock()
	out := make(chan string, 64)
	if !b.forcePoll {
		conn, err := b.listen(ctx)
		if err == nil {
			go b.listenLoop(ctx, conn, out)
			return out, WatchListen, nil
		}
		if ctx.Err() != nil {
			cancel()
			return nil, "", ctx.Err()
		}
	}
	ready := make(chan struct{})
	go b.poll(ctx, out, ready)
	<-ready
	return out, WatchPoll, nil
}

// listen opens the listening connection. It is not read-only even for a read-only Backend: LISTEN writes
// nothing, but a server refuses it in a read-only transaction.
func (b *Backend) listen(ctx context.Context) (_ *pgx.Conn, err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	cfg := b.cfg.ConnConfig.Copy()
	delete(cfg.RuntimeParams, "default_transaction_read_only")
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, b.wrap(err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, b.wrap(err)
	}
	return conn, nil
}

func send(ctx context.Context, out chan<- string, id string) bool {
	select {
	case out <- id:
		return true
	case <-ctx.Done():
		return false
	}
}

func (b *Backend) listenLoop(ctx context.Context, conn *pgx.Conn, out chan<- string) {
	defer close(out)
	defer func() {
		if conn != nil {
			conn.Close(context.WithoutCancel(ctx))
		}
	}()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err == nil {
			if !send(ctx, out, n.Payload) {
				return
			}
			continue
		}
		if ctx.Err() != nil {
			return
		}
		// the connection is gone: listen again, then have everything read again
		conn.Close(context.WithoutCancel(ctx))
		conn = nil
		for conn == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(PollInterval):
			}
			conn, _ = b.listen(ctx)
		}
		if !send(ctx, out, "") {
			return
		}
	}
}

// poll reads the revisions of recently updated sessions every PollInterval and announces those that
// changed. The window reaches back a minute past the newest change seen, since a row's updated_at is its
// transaction's start, which may commit after a later-starting one.
func (b *Backend) poll(ctx context.Context, out chan<- string, ready chan<- struct{}) {
	defer close(out)
	seen := map[string]string{}
	// the baseline is read before Watch returns, so that every write after it is news
	_, mark, err := b.pollOnce(ctx, seen, time.Time{}, true)
	first := err != nil
	close(ready)
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		changed, newest, err := b.pollOnce(ctx, seen, mark, first)
		if err == nil {
			first = false
			if newest.After(mark) {
				mark = newest
			}
			for _, id := range changed {
				if !send(ctx, out, id) {
					return
				}
			}
		}
	}
}

func (b *Backend) pollOnce(ctx context.Context, seen map[string]string, mark time.Time, first bool) (_ []string, _ time.Time, err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	if b.empty(ctx) {
		return nil, mark, nil
	}
	rows, err := b.pool.Query(ctx, `SELECT id, incarnation || ':' || revision, updated_at FROM sessions WHERE updated_at >= $1`, mark.Add(-time.Minute))
	if err != nil {
		return nil, mark, err
	}
	defer rows.Close()
	var changed []string
	newest := mark
	for rows.Next() {
		progress(ctx)
		var id, rev string
		var at time.Time
		if err := rows.Scan(&id, &rev, &at); err != nil {
			return nil, mark, err
		}
		if at.After(newest) {
			newest = at
		}
		if seen[id] != rev {
			seen[id] = rev
			if !first {
				changed = append(changed, id)
			}
		}
	}
	return changed, newest, rows.Err()
}
