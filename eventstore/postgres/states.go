package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dshfs/dshfs/eventstore"
)

// A sync state is what a host's `dshfs sync` found wrong with the fleet store's copy of a session and could
// not fix by copying: the fleet store is where a mount, `ls` and status.json look, and the host's report is
// seen only on that host. One row a session, in the table sync_states, which an older dshfs ignores (it
// checks only the tables it knows); it is created with the schema, or by `dshfs pg init` or the first state
// recorded in a database of schema version 1 made before it existed, which reads as one with no states.

// Sync states.
const (
	// Stale: the session's source moved on to a later format generation (the host's harness upgraded it
	// after it was synced) and the sync could not carry it as its new generation (a v4 log that does not
	// hold the copy's events, or v2/v3); the fleet store holds the log as it was before. It is refused,
	// never served as the current log, until a Supersede clears it.
	Stale = "stale"
	// Diverged: a sync under this session's host name holds another log of it (a VM clone, a root
	// restored from an older backup) from some seq on; the fleet store keeps the copy it had, readable,
	// and nothing of the other was written.
	Diverged = "diverged"
)

// SyncState is a session's recorded sync state.
type SyncState struct {
	State  string // Stale or Diverged
	Host   string // the host name of the sync that recorded it
	Reason string
	Since  time.Time
}

// SyncStateError is the refusal of a stale session: its source moved to a later format generation. It is
// an unsupported session (eventstore.Classify), as a later generation the store cannot read.
type SyncStateError struct {
	ID string
	SyncState
}

func (e *SyncStateError) Error() string {
	return fmt.Sprintf("stale: host %q's sync found this session moved to a later format generation and did not carry it (%s); the fleet store holds it as it was before", e.Host, e.Reason)
}

func (e *SyncStateError) Unwrap() error { return &eventstore.UnsupportedError{Message: e.Error()} }

const syncStatesDDL = `CREATE TABLE IF NOT EXISTS sync_states (
  session_id text PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
  host       text NOT NULL,
  state      text NOT NULL CHECK (state IN ('stale', 'diverged')),
  reason     text NOT NULL,
  since      timestamptz NOT NULL DEFAULT now()
)`

// NoteSync records state for session id as host's sync found it. Nothing is recorded for a session the
// store does not hold from host (another host's copy is that host's matter). Recording the state the
// session already has changes nothing; a new one bumps the session's revision and is announced, as every
// change of what status.json shows is.
func (b *Backend) NoteSync(ctx context.Context, host, id, state, reason string) (err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	if state != Stale && state != Diverged {
		return fmt.Errorf("unknown sync state %q", state)
	}
	err = b.tx(ctx, func(tx pgx.Tx) error {
		if err := ensureStates(ctx, tx); err != nil {
			return err
		}
		var have string
		if err := tx.QueryRow(ctx, `SELECT host FROM sessions WHERE id = $1 FOR UPDATE`, id).Scan(&have); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			return err
		}
		if have != host {
			return nil
		}
		tag, err := tx.Exec(ctx, `INSERT INTO sync_states (session_id, host, state, reason) VALUES ($1, $2, $3, $4)
ON CONFLICT (session_id) DO UPDATE SET host = EXCLUDED.host, state = EXCLUDED.state, reason = EXCLUDED.reason, since = now()
WHERE sync_states.state <> EXCLUDED.state OR sync_states.reason <> EXCLUDED.reason`, id, host, state, reason)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE sessions SET revision = revision + 1, updated_at = now() WHERE id = $1`, id); err != nil {
			return err
		}
		return notify(ctx, tx, id)
	})
	if err == nil {
		b.mu.Lock()
		b.hasStates = true
		b.mu.Unlock()
	}
	return err
}

// ensureStates creates the sync_states table in a schema made before it existed, under the schema's lock;
// where it exists nothing is run, so a role that may write rows but not create tables records states in a
// database whose owner ran `dshfs pg init`.
func ensureStates(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, 0)`, lockNamespace); err != nil {
		return err
	}
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('public.sync_states') IS NOT NULL`).Scan(&exists); err != nil || exists {
		return err
	}
	_, err := tx.Exec(ctx, syncStatesDDL)
	return err
}

// statesTable reports whether the database has the sync_states table (looked for again at most once a
// PollInterval while it has not: another host's sync creates it).
func (b *Backend) statesTable(ctx context.Context, q queryer) bool {
	b.mu.Lock()
	if b.hasStates || time.Since(b.statesChecked) < PollInterval {
		defer b.mu.Unlock()
		return b.hasStates
	}
	b.mu.Unlock()
	var ok bool
	if err := q.QueryRow(ctx, `SELECT to_regclass('public.sync_states') IS NOT NULL`).Scan(&ok); err != nil {
		return false
	}
	b.mu.Lock()
	b.hasStates, b.statesChecked = ok, time.Now()
	b.mu.Unlock()
	return ok
}

// SyncStates returns every recorded sync state, by session id.
func (b *Backend) SyncStates(ctx context.Context) (_ map[string]SyncState, err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	return b.syncStates(ctx, b.pool, "")
}

// syncStates reads the states of every session (id "") or of one.
func (b *Backend) syncStates(ctx context.Context, q queryer, id string) (map[string]SyncState, error) {
	out := map[string]SyncState{}
	if b.empty(ctx) || !b.statesTable(ctx, q) {
		return out, nil
	}
	rows, err := q.Query(ctx, `SELECT session_id, host, state, reason, since FROM sync_states WHERE $1 = '' OR session_id = $1`, id)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42P01" {
			return out, nil // dropped meanwhile
		}
		return nil, b.wrap(err)
	}
	defer rows.Close()
	for rows.Next() {
		var sid string
		var s SyncState
		if err := rows.Scan(&sid, &s.Host, &s.State, &s.Reason, &s.Since); err != nil {
			return nil, b.wrap(err)
		}
		out[sid] = s
	}
	if err := rows.Err(); err != nil {
		return nil, b.wrap(err)
	}
	return out, nil
}

// staleRefusal is the refusal of session id when its recorded state is stale, nil otherwise.
func staleRefusal(id string, states map[string]SyncState) error {
	if s, ok := states[id]; ok && s.State == Stale {
		return &SyncStateError{ID: id, SyncState: s}
	}
	return nil
}
