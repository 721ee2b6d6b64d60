package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// Format constants (docs/harness.md#sqlite-rows-and-compression).
const (
	SchemaVersion = 17
	ApplicationID = 1146308688 // 0x44534850, "DSHP"
)

// DDL is the harness's schema.sql, byte for byte: the harness compares stored schema text with what this
// script produces, so its spelling and the presence (not the length) of its whitespace are format.
const DDL = `CREATE TABLE persistence_state (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  store_id  TEXT NOT NULL
) STRICT;

CREATE TABLE sessions (
  id               TEXT PRIMARY KEY,
  version          INTEGER NOT NULL,
  created_at       INTEGER NOT NULL,
  cwd              TEXT,
  parent_session   TEXT,
  seed_length      INTEGER,
  origin           TEXT,
  delegation_depth INTEGER,
  agent_preset     TEXT,
  incarnation      TEXT NOT NULL,
  revision         INTEGER NOT NULL
) STRICT;

CREATE TABLE events (
  session_id        TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq               INTEGER NOT NULL,
  type              TEXT NOT NULL,
  time              INTEGER NOT NULL,
  data              ANY NOT NULL,
  source_event_seqs ANY,
  surface_op        TEXT,
  ignorable         INTEGER CHECK (ignorable IS NULL OR ignorable IN (0, 1)),
  PRIMARY KEY (session_id, seq)
) STRICT;
`

// The statements the harness runs, by its resource names (SQL/*.sql); values are always bound.
const (
	sqlSelectSchemaObjects = `SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE name NOT GLOB 'sqlite_*' ORDER BY type, name`
	sqlSelectUserObjects   = `SELECT COUNT(*) FROM sqlite_schema WHERE name NOT GLOB 'sqlite_*'`
	sqlSessionColumns      = `id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, agent_preset, incarnation, revision`
	sqlSelectSessions      = `SELECT ` + sqlSessionColumns + ` FROM sessions`
	sqlSelectSession       = sqlSelectSessions + ` WHERE id = ?`
	sqlEventColumns        = `seq, type, time, data, source_event_seqs, surface_op, ignorable`
	sqlSelectEvents        = `SELECT ` + sqlEventColumns + ` FROM events WHERE session_id = ? ORDER BY seq`
	sqlSelectEventsFrom    = `SELECT ` + sqlEventColumns + ` FROM events WHERE session_id = ? AND seq >= ? ORDER BY seq`
	sqlSelectTail          = `SELECT ` + sqlEventColumns + ` FROM events WHERE session_id = ? ORDER BY seq DESC LIMIT ?`
	sqlSelectPacked        = `SELECT ` + sqlEventColumns + ` FROM events WHERE session_id = ? AND seq >= ? AND seq < ? AND type IN ('text-chunks', 'reasoning-chunks', 'tool-call-chunks') AND ignorable = 0 ORDER BY seq`
	sqlInsertEvent         = `INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, surface_op, ignorable) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	sqlUpsertSession       = `INSERT INTO sessions (id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, agent_preset, incarnation, revision) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0) ON CONFLICT(id) DO UPDATE SET version = excluded.version, created_at = excluded.created_at, cwd = excluded.cwd, parent_session = excluded.parent_session, seed_length = excluded.seed_length, origin = excluded.origin, delegation_depth = excluded.delegation_depth, agent_preset = excluded.agent_preset`
	sqlBumpRevision        = `UPDATE sessions SET revision = revision + 1 WHERE id = ?`
	sqlDeleteFrom          = `DELETE FROM events WHERE session_id = ? AND seq >= ?`
)

// driverName is go-sqlite3 with the harness's per-connection pragmas run on every pooled connection.
const driverName = "dshfs-sqlite3"

func init() {
	sql.Register(driverName, &sqlite3.SQLiteDriver{ConnectHook: connectHook})
}

// connectHook applies and reads back the pragmas the harness sets on every connection (§1.3): a schema
// from the file is never trusted to run functions, and the file is never mapped (a torn mapping would
// SIGBUS the mount).
func connectHook(c *sqlite3.SQLiteConn) error {
	for _, p := range []string{"PRAGMA trusted_schema = OFF", "PRAGMA mmap_size = 0", "PRAGMA foreign_keys = ON"} {
		if _, err := c.Exec(p, nil); err != nil {
			return err
		}
	}
	for _, p := range []string{"trusted_schema", "mmap_size"} {
		v, err := pragmaInt(c, "PRAGMA "+p)
		if err != nil {
			return err
		}
		if v != 0 {
			return fmt.Errorf("session database retained %s=%d, expected 0", p, v)
		}
	}
	return nil
}

func pragmaInt(c *sqlite3.SQLiteConn, q string) (int64, error) {
	rows, err := c.Query(q, nil)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	if err := rows.Next(dest); err != nil {
		if errors.Is(err, io.EOF) {
			return 0, nil
		}
		return 0, err
	}
	v, _ := dest[0].(int64)
	return v, nil
}

// schemaObject is one row of the schema comparison, its sql whitespace-collapsed.
type schemaObject struct{ typ, name, table, sql string }

var wsRun = regexp.MustCompile(`\s+`)

func normalizeSQL(s string) string { return strings.TrimSpace(wsRun.ReplaceAllString(s, " ")) }

// reference is what DDL leaves in sqlite_schema, computed as the harness computes it: by running the
// script in a fresh in-memory database.
var reference = sync.OnceValues(func() ([]schemaObject, error) {
	db, err := sql.Open(driverName, ":memory:")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if _, err := db.Exec(DDL); err != nil {
		return nil, err
	}
	return schemaObjects(context.Background(), db)
})

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func schemaObjects(ctx context.Context, q querier) ([]schemaObject, error) {
	rows, err := q.QueryContext(ctx, sqlSelectSchemaObjects)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []schemaObject
	for rows.Next() {
		var o schemaObject
		var s sql.NullString
		if err := rows.Scan(&o.typ, &o.name, &o.table, &s); err != nil {
			return nil, err
		}
		o.sql = normalizeSQL(s.String)
		out = append(out, o)
	}
	return out, rows.Err()
}

// checkSchema compares the database's schema objects with the reference.
func (b *Backend) checkSchema(ctx context.Context, q querier) error {
	want, err := reference()
	if err != nil {
		return err
	}
	got, err := schemaObjects(ctx, q)
	if err != nil {
		return err
	}
	if len(got) != len(want) {
		return b.schemaError()
	}
	for i := range got {
		if got[i] != want[i] {
			return b.schemaError()
		}
	}
	return nil
}

func (b *Backend) schemaError() error {
	return &FormatError{Message: "session database at " + quote(b.path) + " does not contain the required schema objects"}
}

// FormatError is a database this build must not open or write: the harness's texts for another schema
// version, a foreign application, a changed schema or a missing store identity.
type FormatError struct{ Message string }

func (e *FormatError) Error() string { return e.Message }

func quote(s string) string { return `"` + s + `"` }

func pragma(ctx context.Context, q querier, name string) (int64, error) {
	var v int64
	err := q.QueryRowContext(ctx, "PRAGMA "+name).Scan(&v)
	return v, err
}

// identify runs the ownership check of §1.4: the answer is whether the file is pristine (never
// initialized), or an error with the harness's text.
func (b *Backend) identify(ctx context.Context, q querier) (pristine bool, err error) {
	version, err := pragma(ctx, q, "user_version")
	if err != nil {
		return false, err
	}
	app, err := pragma(ctx, q, "application_id")
	if err != nil {
		return false, err
	}
	var objects int64
	if err := q.QueryRowContext(ctx, sqlSelectUserObjects).Scan(&objects); err != nil {
		return false, err
	}
	switch {
	case version == 0 && (app != 0 || objects > 0):
		return false, &FormatError{Message: "session database at " + quote(b.path) + " has an unversioned schema or application identity"}
	case version != 0 && version != SchemaVersion:
		return false, &FormatError{Message: fmt.Sprintf("session database at %s has schema version %d, incompatible with this build (%d)", quote(b.path), version, SchemaVersion)}
	case version != 0 && app != ApplicationID:
		return false, &FormatError{Message: fmt.Sprintf("session database at %s has application id %d, expected %d", quote(b.path), app, ApplicationID)}
	case version == 0:
		return true, nil
	}
	return false, b.checkSchema(ctx, q)
}

// checkMutation is the harness's validateSchemaForMutation, run first inside every BEGIN IMMEDIATE: a
// database changed under a running writer is never written.
func (b *Backend) checkMutation(ctx context.Context, q querier) error {
	app, err := pragma(ctx, q, "application_id")
	if err != nil {
		return err
	}
	if app != ApplicationID {
		return &FormatError{Message: fmt.Sprintf("session database application id changed before mutation (expected %d, got %d)", ApplicationID, app)}
	}
	if err := b.checkSchema(ctx, q); err != nil {
		return err
	}
	version, err := pragma(ctx, q, "user_version")
	if err != nil {
		return err
	}
	if version != SchemaVersion {
		return &FormatError{Message: fmt.Sprintf("session database schema changed before mutation (expected %d, got %d)", SchemaVersion, version)}
	}
	return nil
}

// uuidPattern is the harness's UUID check for store ids and incarnations.
var uuidPattern = regexp.MustCompile(`(?i)^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// sqlSelectTurnEnds is dshfs's own: a session's turn/end rows, newest first, from which a load learns how
// far the log is proven committed before it scans the rows block by block (the harness reads them all).
const sqlSelectTurnEnds = `SELECT ` + sqlEventColumns + ` FROM events WHERE session_id = ? AND type = 'turn/end' ORDER BY seq DESC`

// sqlCountEvents is dshfs's own: how many rows a session has, which sizes a load's event list.
const sqlCountEvents = `SELECT count(*) FROM events WHERE session_id = ?`
