package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/dshfs/dshfs/eventstore"
)

// SchemaVersion is the fleet schema this build reads and writes; a database holding any other is refused.
const SchemaVersion = 1

// lockNamespace is the first key of every advisory lock this package takes ("dshf"); the second is
// hashtext(session id) for a session's writer lock, 0 for the schema's creation.
const lockNamespace int32 = 0x64736866

// notifyChannel is the NOTIFY channel every committed write announces its session id on.
const notifyChannel = "dshfs_fleet"

// DDL creates the fleet schema, version 1, in one transaction (created under the schema-creation advisory
// lock, so two writers opening an empty database at once create it once).
//
// Beside the tables of the shared plan it has `writers` (who holds a session's writer lock, for the
// refusal and status.json) and `kept`: what a write could not store or a repair cut, never lost —
// accepted events a writer could not write (KeepPending, kind pending) and the torn rows a repair deleted
// (kind torn), each a JSONL text of the header line and the lines.
// sessions.listed orders the listing by creation, as the harness lists SQLite sessions by rowid.
const DDL = `CREATE TABLE dshfs_fleet (
  singleton      boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  schema_version integer NOT NULL,
  store_id       text NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE sessions (
  id             text PRIMARY KEY,
  listed         bigserial NOT NULL,
  header         bytea NOT NULL,
  version        double precision NOT NULL,
  created_at     bigint NOT NULL,
  cwd            text,
  parent_session text,
  host           text NOT NULL,
  incarnation    text NOT NULL,
  revision       bigint NOT NULL DEFAULT 0,
  next_seq       bigint NOT NULL DEFAULT 0,
  rows           bigint NOT NULL DEFAULT 0,
  bytes          bigint NOT NULL DEFAULT 0,
  last_time      bigint,
  updated_at     timestamptz NOT NULL DEFAULT now(),
  sync_host      text,
  sync_seen      timestamptz
);
CREATE TABLE events (
  session_id text NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq        bigint NOT NULL,
  last_seq   bigint NOT NULL,
  type       text NOT NULL,
  time       bigint NOT NULL,
  line       bytea NOT NULL,
  compressed boolean NOT NULL,
  PRIMARY KEY (session_id, seq)
);
CREATE TABLE writers (
  session_id  text PRIMARY KEY,
  host        text NOT NULL,
  pid         integer NOT NULL,
  backend_pid integer NOT NULL,
  since       timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE kept (
  id         bigserial PRIMARY KEY,
  session_id text NOT NULL,
  kind       text NOT NULL CHECK (kind IN ('pending', 'torn')),
  host       text NOT NULL,
  kept_at    timestamptz NOT NULL DEFAULT now(),
  body       bytea NOT NULL
);`

// tables are the schema's tables with their columns, as information_schema lists them: a database whose
// tables of these names have other columns is foreign and refused.
var tables = map[string][]string{
	"dshfs_fleet": {"created_at", "schema_version", "singleton", "store_id"},
	"sessions": {"bytes", "created_at", "cwd", "header", "host", "id", "incarnation", "last_time", "listed", "next_seq",
		"parent_session", "revision", "rows", "sync_host", "sync_seen", "updated_at", "version"},
	"events":  {"compressed", "last_seq", "line", "seq", "session_id", "time", "type"},
	"writers": {"backend_pid", "host", "pid", "session_id", "since"},
	"kept":    {"body", "host", "id", "kept_at", "kind", "session_id"},
}

// SchemaError is a database this build will not use: another schema version, or tables of the fleet
// schema's names laid out otherwise. Nothing was written.
type SchemaError struct{ Message string }

func (e *SchemaError) Error() string { return e.Message }

type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// inspectSchema reads what the database holds: pristine when none of the schema's tables exist; else the
// store id of a version-1 schema, or a *SchemaError.
func inspectSchema(ctx context.Context, q queryer, where string) (pristine bool, storeID string, err error) {
	rows, err := q.Query(ctx, `SELECT table_name::text, column_name::text FROM information_schema.columns
WHERE table_schema = 'public' AND table_name = ANY($1) ORDER BY 1, 2`, tableNames())
	if err != nil {
		return false, "", err
	}
	found := map[string][]string{}
	for rows.Next() {
		var t, c string
		if err := rows.Scan(&t, &c); err != nil {
			rows.Close()
			return false, "", err
		}
		found[t] = append(found[t], c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, "", err
	}
	if len(found) == 0 {
		return true, "", nil
	}
	if _, ok := found["dshfs_fleet"]; !ok {
		return false, "", &SchemaError{Message: "database " + where + " has tables named like the fleet store's (" +
			strings.Join(slices.Sorted(mapKeys(found)), ", ") + ") but no dshfs_fleet table: it is not a dshfs fleet store; nothing was written"}
	}
	var version int64
	if err := q.QueryRow(ctx, `SELECT schema_version, store_id FROM dshfs_fleet WHERE singleton`).Scan(&version, &storeID); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return false, "", &SchemaError{Message: "database " + where + " has an empty dshfs_fleet table: not a usable fleet store; nothing was written"}
		}
		return false, "", &SchemaError{Message: "database " + where + ": its dshfs_fleet table does not read as a fleet store's: " + err.Error() + "; nothing was written"}
	}
	if version != SchemaVersion {
		return false, "", &SchemaError{Message: fmt.Sprintf("database %s holds fleet schema version %d; this dshfs supports version %d only; nothing was written", where, version, SchemaVersion)}
	}
	for _, name := range tableNames() {
		if !slices.Equal(found[name], tables[name]) {
			return false, "", &SchemaError{Message: fmt.Sprintf("database %s holds fleet schema version %d, but its table %s has columns (%s), not (%s): a foreign layout; nothing was written",
				where, version, name, strings.Join(found[name], ", "), strings.Join(tables[name], ", "))}
		}
	}
	if !uuidPattern.MatchString(storeID) {
		return false, "", &SchemaError{Message: "database " + where + " has no valid fleet store id; nothing was written"}
	}
	return false, storeID, nil
}

func tableNames() []string { return slices.Sorted(mapKeys(tables)) }

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// ensureSchema creates the schema in a pristine database, or checks the one there; the check and the
// creation run in one transaction under the schema-creation advisory lock, so that two writers opening an
// empty database at once create it once, and a refused database is left exactly as it was.
func ensureSchema(ctx context.Context, conn *pgx.Conn, where string) (storeID string, err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, 0)`, lockNamespace); err != nil {
		return "", err
	}
	pristine, storeID, err := inspectSchema(ctx, tx, where)
	if err != nil || !pristine {
		return storeID, err
	}
	storeID = eventstore.NewUUID()
	if _, err := tx.Exec(ctx, DDL); err != nil {
		return "", fmt.Errorf("creating the fleet schema: %w", err)
	}
	if _, err := tx.Exec(ctx, syncStatesDDL); err != nil {
		return "", fmt.Errorf("creating the fleet schema: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO dshfs_fleet (schema_version, store_id) VALUES ($1, $2)`, SchemaVersion, storeID); err != nil {
		return "", err
	}
	return storeID, tx.Commit(ctx)
}
