package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/dshfs/dshfs/eventstore"
)

// SchemaVersion is the fleet schema this build creates and writes. A database of version 1 (no
// sessions.generation, no kind 'superseded' in kept) is read as it is — every session generation v0 — and
// migrated to this version in place by the first writer that opens it (migrateSchema); any other version
// is refused.
const SchemaVersion = 2

// minSchemaVersion is the oldest schema this build reads (and migrates when it writes).
const minSchemaVersion = 1

// lockNamespace is the first key of every advisory lock this package takes ("dshf"); the second is
// hashtext(session id) for a session's writer lock, 0 for the schema's creation.
const lockNamespace int32 = 0x64736866

// notifyChannel is the NOTIFY channel every committed write announces its session id on.
const notifyChannel = "dshfs_fleet"

// DDL creates the fleet schema, version 2, in one transaction (created under the schema-creation advisory
// lock, so two writers opening an empty database at once create it once).
//
// Beside the tables of the shared plan it has `writers` (who holds a session's writer lock, for the
// refusal and status.json) and `kept`: what a write could not store or a repair cut, never lost —
// accepted events a writer could not write (KeepPending, kind pending) and the torn rows a repair deleted
// (kind torn), each a JSONL text of the header line and the lines.
// sessions.listed orders the listing by creation, as the harness lists SQLite sessions by rowid.
// sessions.generation is the session's format generation: 0, its rows the v0 lines a JSONL store keeps;
// 4, its header the v4 file's physical header line and its rows the v4 file's rows, one event each, byte
// for byte (docs/fleet.md#generations). kept's kind 'superseded' holds a v0 log replaced by its v4
// successor.
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
  sync_seen      timestamptz,
  generation     smallint NOT NULL DEFAULT 0 CHECK (generation IN (0, 4))
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
  kind       text NOT NULL CONSTRAINT kept_kind_check CHECK (kind IN ('pending', 'torn', 'superseded')),
  host       text NOT NULL,
  kept_at    timestamptz NOT NULL DEFAULT now(),
  body       bytea NOT NULL
);`

// migrateDDL takes a version-1 schema to version 2: the sessions' generation (every session a version-1
// database holds is v0, the column's default) and the kept kind of a superseded v0 log. Run once, in
// the transaction that sets schema_version, under the schema's lock (migrateSchema).
const migrateDDL = `ALTER TABLE sessions ADD COLUMN IF NOT EXISTS generation smallint NOT NULL DEFAULT 0 CHECK (generation IN (0, 4));
ALTER TABLE kept DROP CONSTRAINT IF EXISTS kept_kind_check;
ALTER TABLE kept ADD CONSTRAINT kept_kind_check CHECK (kind IN ('pending', 'torn', 'superseded'));`

// tables are the schema's tables with their columns, as information_schema lists them: a database whose
// tables of these names have other columns is foreign and refused. tablesV1 are version 1's.
var tables = map[string][]string{
	"dshfs_fleet": {"created_at", "schema_version", "singleton", "store_id"},
	"sessions": {"bytes", "created_at", "cwd", "generation", "header", "host", "id", "incarnation", "last_time", "listed", "next_seq",
		"parent_session", "revision", "rows", "sync_host", "sync_seen", "updated_at", "version"},
	"events":  {"compressed", "last_seq", "line", "seq", "session_id", "time", "type"},
	"writers": {"backend_pid", "host", "pid", "session_id", "since"},
	"kept":    {"body", "host", "id", "kept_at", "kind", "session_id"},
}

// SchemaError is a database this build will not use: another schema version, or tables of the fleet
// schema's names laid out otherwise. Nothing was written.
type SchemaError struct{ Message string }

func (e *SchemaError) Error() string { return e.Message }

// tablesOf is the layout of schema version v (1 or SchemaVersion).
func tablesOf(v int64) map[string][]string {
	if v == SchemaVersion {
		return tables
	}
	v1 := maps.Clone(tables)
	v1["sessions"] = slices.DeleteFunc(slices.Clone(tables["sessions"]), func(c string) bool { return c == "generation" })
	return v1
}

type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// inspectSchema reads what the database holds: pristine when none of the schema's tables exist; else the
// store id and version of a schema this build reads (1 or SchemaVersion), or a *SchemaError.
func inspectSchema(ctx context.Context, q queryer, where string) (pristine bool, storeID string, version int64, err error) {
	rows, err := q.Query(ctx, `SELECT table_name::text, column_name::text FROM information_schema.columns
WHERE table_schema = 'public' AND table_name = ANY($1) ORDER BY 1, 2`, tableNames())
	if err != nil {
		return false, "", 0, err
	}
	found := map[string][]string{}
	for rows.Next() {
		var t, c string
		if err := rows.Scan(&t, &c); err != nil {
			rows.Close()
			return false, "", 0, err
		}
		found[t] = append(found[t], c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, "", 0, err
	}
	if len(found) == 0 {
		return true, "", 0, nil
	}
	if _, ok := found["dshfs_fleet"]; !ok {
		return false, "", 0, &SchemaError{Message: "database " + where + " has tables named like the fleet store's (" +
			strings.Join(slices.Sorted(mapKeys(found)), ", ") + ") but no dshfs_fleet table: it is not a dshfs fleet store; nothing was written"}
	}
	if err := q.QueryRow(ctx, `SELECT schema_version, store_id FROM dshfs_fleet WHERE singleton`).Scan(&version, &storeID); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return false, "", 0, &SchemaError{Message: "database " + where + " has an empty dshfs_fleet table: not a usable fleet store; nothing was written"}
		}
		return false, "", 0, &SchemaError{Message: "database " + where + ": its dshfs_fleet table does not read as a fleet store's: " + err.Error() + "; nothing was written"}
	}
	if version < minSchemaVersion || version > SchemaVersion {
		return false, "", 0, &SchemaError{Message: fmt.Sprintf("database %s holds fleet schema version %d; this dshfs supports versions %d to %d (it migrates %d to %d); nothing was written",
			where, version, minSchemaVersion, SchemaVersion, minSchemaVersion, SchemaVersion)}
	}
	want := tablesOf(version)
	for _, name := range tableNames() {
		if !slices.Equal(found[name], want[name]) {
			return false, "", 0, &SchemaError{Message: fmt.Sprintf("database %s holds fleet schema version %d, but its table %s has columns (%s), not (%s): a foreign layout; nothing was written",
				where, version, name, strings.Join(found[name], ", "), strings.Join(want[name], ", "))}
		}
	}
	if !uuidPattern.MatchString(storeID) {
		return false, "", 0, &SchemaError{Message: "database " + where + " has no valid fleet store id; nothing was written"}
	}
	return false, storeID, version, nil
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

// ensureSchema creates the schema in a pristine database, migrates a version-1 one, or checks the one
// there; the check and the creation or migration run in one transaction under the schema-creation
// advisory lock, so that two writers opening an empty (or version-1) database at once create (migrate) it
// once, and a refused database is left exactly as it was.
func ensureSchema(ctx context.Context, conn *pgx.Conn, where string) (storeID string, err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, 0)`, lockNamespace); err != nil {
		return "", err
	}
	pristine, storeID, version, err := inspectSchema(ctx, tx, where)
	if err != nil {
		return "", err
	}
	if !pristine {
		if version == SchemaVersion {
			return storeID, nil
		}
		if err := migrateSchema(ctx, tx, where); err != nil {
			return "", err
		}
		return storeID, tx.Commit(ctx)
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

// migrateSchema takes a version-1 schema to SchemaVersion inside the caller's transaction, which holds the
// schema's lock: the DDL, sync_states where it is missing, and the version, committed together or not at
// all. A role that may not alter the tables gets an error naming the command its owner runs.
func migrateSchema(ctx context.Context, tx pgx.Tx, where string) error {
	if _, err := tx.Exec(ctx, migrateDDL); err != nil {
		return &SchemaError{Message: fmt.Sprintf("database %s holds fleet schema version %d, which this dshfs migrates to %d, and the migration failed (%v): run `dshfs pg init %s` as the role that owns the schema; nothing was changed",
			where, minSchemaVersion, SchemaVersion, err, where)}
	}
	if _, err := tx.Exec(ctx, syncStatesDDL); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `UPDATE dshfs_fleet SET schema_version = $1 WHERE singleton`, SchemaVersion)
	return err
}
