package postgres

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// ddlV1 is the fleet schema as version 1 created it, before sessions.generation and kept's kind
// superseded: the database a fleet store made by an earlier dshfs holds.
const ddlV1 = `CREATE TABLE dshfs_fleet (
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
);
INSERT INTO dshfs_fleet (schema_version, store_id) VALUES (1, '0b6f1d2e-4a57-4c1e-9a3b-5d8e7f6a1b2c');`

// v1Database is a database made by the version-1 DDL holding session "old" (3 events) as a version-1
// sync stored it, without the sync_states table (made before it existed).
func v1Database(t *testing.T) string {
	t.Helper()
	s, db, dsn := newDB(t)
	if err := s.Exec(db, ddlV1); err != nil {
		t.Fatal(err)
	}
	stmts := `INSERT INTO sessions (id, header, version, created_at, cwd, host, incarnation, revision, next_seq, rows, bytes, last_time, sync_host, sync_seen)
VALUES ('old', '` + string(header("old")) + `', 0, 1700000000000, '/work/p', 'h', '6c1b0e8e-0d1c-4b8a-9f0e-3a2b1c0d9e8f', 1, 3, 3, 100, 1700000000002, 'h', now());`
	for i, l := range lines(0, 3) {
		stmts += `INSERT INTO events (session_id, seq, last_seq, type, time, line, compressed) VALUES ('old', ` + itoa(int64(i)) + `, ` + itoa(int64(i)) + `, 'user/message', 1, '` + string(l) + `', false);`
	}
	if err := s.Exec(db, stmts); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// TestSchemaV1ReadAndMigrated: a version-1 database is read as it is by a read-only open (no DDL, every
// session v0), and migrated in place to version 2 by writers — four opening it at once migrate it once —
// its sessions read back unchanged, the generation column and kept's kind superseded in place.
func TestSchemaV1ReadAndMigrated(t *testing.T) {
	dsn := v1Database(t)
	ctx := context.Background()
	before := digest(t, dsn)

	ro := open(t, dsn, Options{ReadOnly: true})
	if v := ro.SchemaVersion(); v != 1 {
		t.Fatalf("read-only open reports schema %d", v)
	}
	l, err := ro.List(ctx)
	if err != nil || len(l.Entries) != 1 || l.Entries[0].Generation != 0 || l.Entries[0].Refusal != nil {
		t.Fatalf("listing a v1 database: %+v, %v", l, err)
	}
	p, err := ro.LoadStored(ctx, "old")
	if err != nil || len(p.Events) != 3 {
		t.Fatalf("loading from a v1 database: %v", err)
	}
	raw, err := ro.ReadRaw(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if after := digest(t, dsn); after != before {
		t.Fatalf("a read-only open changed the v1 database:\n%s\n%s", before, after)
	}

	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := Open(ctx, dsn, Options{Host: "w"})
			if err == nil {
				b.Close()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a writer opening a v1 database: %v", err)
		}
	}
	if v := query[int32](t, dsn, `SELECT schema_version FROM dshfs_fleet`); v != SchemaVersion {
		t.Fatalf("schema_version %d after the migration", v)
	}
	if id := query[string](t, dsn, `SELECT store_id FROM dshfs_fleet`); id != "0b6f1d2e-4a57-4c1e-9a3b-5d8e7f6a1b2c" {
		t.Fatalf("the migration changed the store id to %s", id)
	}
	if g := query[int16](t, dsn, `SELECT generation FROM sessions WHERE id = 'old'`); g != 0 {
		t.Fatalf("generation %d of a v1 session", g)
	}
	if !query[bool](t, dsn, `SELECT to_regclass('public.sync_states') IS NOT NULL`) {
		t.Fatal("no sync_states after the migration")
	}
	w := open(t, dsn, Options{Host: "w"})
	if got, err := w.ReadRaw(ctx, "old"); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("the session after the migration: %v\n%s\nwas\n%s", err, got, raw)
	}
	if _, err := w.pool.Exec(ctx, `INSERT INTO kept (session_id, kind, host, body) VALUES ('old', 'superseded', 'w', '')`); err != nil {
		t.Fatalf("kept kind superseded after the migration: %v", err)
	}
	// the reader opened before it sees the migrated schema (it looks again once a PollInterval), and the
	// same session
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ro.empty(ctx); ro.SchemaVersion() == SchemaVersion {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reader opened on the v1 database never saw the migration")
		}
	}
	if got, err := ro.ReadRaw(ctx, "old"); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("the early reader after the migration: %v", err)
	}
}

// TestSchemaMigrationRefusedNamesInit: a writer whose role may not alter a version-1 schema gets a
// refusal naming the command the schema's owner runs, and the database is left as it was.
func TestSchemaMigrationRefusedNamesInit(t *testing.T) {
	s, db, _ := newDB(t)
	if err := s.Exec(db, ddlV1); err != nil {
		t.Fatal(err)
	}
	role := "writer_" + db
	s.CreateRole(t, db, role, "pw", false)
	if err := s.Exec(db, `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO `+role); err != nil {
		t.Fatal(err)
	}
	dsn := s.TCPDSN(db, role, "pw")
	before := digest(t, s.DSN(db))
	_, err := Open(context.Background(), dsn, Options{Host: "h"})
	var se *SchemaError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "dshfs pg init") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("a writer without the right to migrate: %v", err)
	}
	if after := digest(t, s.DSN(db)); after != before {
		t.Fatal("a refused migration changed the database")
	}
}
