package postgres

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// newDB is a fresh database on the test server and its socket DSN.
func newDB(t *testing.T) (*pgtest.Server, string, string) {
	t.Helper()
	s := pgtest.Shared(t)
	db := s.NewDatabase(t)
	return s, db, s.DSN(db)
}

func open(t *testing.T, dsn string, o Options) *Backend {
	t.Helper()
	if o.Host == "" {
		o.Host = "testhost"
	}
	b, err := Open(context.Background(), dsn, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// query reads one value as the superuser.
func query[T any](t *testing.T, dsn, q string, args ...any) T {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var v T
	if err := c.QueryRow(ctx, q, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

func TestSchemaCreatedOnceAndIdempotent(t *testing.T) {
	_, _, dsn := newDB(t)
	ctx := context.Background()
	if err := Init(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	id := query[string](t, dsn, `SELECT store_id FROM dshfs_fleet`)
	if err := Init(ctx, dsn); err != nil {
		t.Fatal("second init:", err)
	}
	b := open(t, dsn, Options{})
	if b.StoreID() != id {
		t.Fatalf("store id %q after reopening, was %q", b.StoreID(), id)
	}
	if n := query[int64](t, dsn, `SELECT count(*) FROM dshfs_fleet`); n != 1 {
		t.Fatalf("%d dshfs_fleet rows", n)
	}
	if v := query[int32](t, dsn, `SELECT schema_version FROM dshfs_fleet`); v != SchemaVersion {
		t.Fatalf("schema_version %d", v)
	}
}

func TestSchemaConcurrentWritersCreateOnce(t *testing.T) {
	_, _, dsn := newDB(t)
	errs := make(chan error, 4)
	ids := make(chan string, 4)
	for range 4 {
		go func() {
			b, err := Open(context.Background(), dsn, Options{Host: "h"})
			if err == nil {
				ids <- b.StoreID()
				b.Close()
			}
			errs <- err
		}()
	}
	first := ""
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		id := <-ids
		if first == "" {
			first = id
		} else if id != first {
			t.Fatalf("two store ids: %s, %s", first, id)
		}
	}
}

func TestReadOnlyOpenWritesNoDDL(t *testing.T) {
	_, _, dsn := newDB(t)
	b := open(t, dsn, Options{ReadOnly: true})
	if n := query[int64](t, dsn, `SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'`); n != 0 {
		t.Fatalf("a read-only open created %d tables", n)
	}
	h, err := b.Held(context.Background(), "x")
	if err != nil || h.Exists {
		t.Fatalf("Held on a pristine database: %+v, %v", h, err)
	}
	if err := b.Ingest(context.Background(), "h", "x", header("x"), 0, nil); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("ingest through a read-only backend: %v", err)
	}
	// a writer creates the store later: the reader finds it
	w := open(t, dsn, Options{Host: "w"})
	if err := w.Ingest(context.Background(), "h", "x", header("x"), 0, lines(0, 1)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := b.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Entries) == 1 && l.Entries[0].Host == "h" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reader never saw the store a writer created: %+v", l)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if b.StoreID() != w.StoreID() {
		t.Fatalf("store ids %q, %q", b.StoreID(), w.StoreID())
	}
}

func TestUnknownSchemaRefused(t *testing.T) {
	cases := []struct {
		name, setup, want string
	}{
		{"newer version", `UPDATE dshfs_fleet SET schema_version = 7`, "holds fleet schema version 7; this dshfs supports versions 1 to 2 (it migrates 1 to 2)"},
		{"foreign layout", `ALTER TABLE events ADD COLUMN extra int`, "has columns"},
		{"no fleet table", `DROP TABLE dshfs_fleet`, "no dshfs_fleet table"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, db, dsn := newDB(t)
			if err := Init(context.Background(), dsn); err != nil {
				t.Fatal(err)
			}
			if err := s.Exec(db, c.setup); err != nil {
				t.Fatal(err)
			}
			before := digest(t, dsn)
			for _, ro := range []bool{false, true} {
				_, err := Open(context.Background(), dsn, Options{Host: "h", ReadOnly: ro})
				var se *SchemaError
				if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "nothing was written") {
					t.Fatalf("read-only %v: %v, want a SchemaError with %q", ro, err, c.want)
				}
			}
			if err := Init(context.Background(), dsn); err == nil {
				t.Fatal("init accepted the database")
			}
			if after := digest(t, dsn); after != before {
				t.Fatalf("the refused database changed:\n%s\n%s", before, after)
			}
		})
	}
}

// digest is the database's tables and columns, and its fleet row, as one text.
func digest(t *testing.T, dsn string) string {
	d := query[string](t, dsn, `SELECT coalesce(string_agg(table_name || '.' || column_name || ':' || data_type, ',' ORDER BY table_name, column_name), '')
FROM information_schema.columns WHERE table_schema = 'public'`)
	if query[bool](t, dsn, `SELECT to_regclass('public.dshfs_fleet') IS NOT NULL`) {
		d += query[string](t, dsn, `SELECT string_agg(f::text, ',') FROM dshfs_fleet f`)
	}
	return d
}

func TestIsDSNAndRedact(t *testing.T) {
	for _, c := range []struct {
		in, want string
		dsn      bool
	}{
		{"postgres://alice:s3cret@db.example/fleet?sslmode=require", "postgres://alice@db.example/fleet?sslmode=require", true},
		{"postgresql://alice:s3cret@db/fleet", "postgresql://alice@db/fleet", true},
		{"postgres://db/fleet?user=bob&password=s3cret&sslmode=verify-full", "postgres://db/fleet?sslmode=verify-full&user=bob", true},
		{"postgres://alice@/fleet?host=/run/pg", "postgres://alice@/fleet?host=%2Frun%2Fpg", true},
		{"postgres://alice:s3c%ret@db/fleet", "postgres://alice@db/fleet", true},
		{"host=db user=alice password=s3cret dbname=fleet", "host=db user=alice dbname=fleet", false},
		{"host=db password='s3 cret' dbname=fleet", "host=db dbname=fleet", false},
		{"/home/u/.dsh/sessions", "/home/u/.dsh/sessions", false},
	} {
		if got := IsDSN(c.in); got != c.dsn {
			t.Errorf("IsDSN(%q) = %v", c.in, got)
		}
		got := Redact(c.in)
		if strings.Contains(got, "s3") {
			t.Errorf("Redact(%q) = %q keeps the password", c.in, got)
		}
		if c.want != "" && got != c.want && !(c.in == "postgres://alice@/fleet?host=/run/pg" && got == c.in) {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestOpenErrorsAreClearAndSecret(t *testing.T) {
	s, db, _ := newDB(t)
	ctx := context.Background()
	const pw = "pw-Zq81x"
	writer := "writer_" + db // roles are the server's, not the database's
	s.CreateRole(t, db, writer, pw, false)
	for _, c := range []struct {
		name, dsn, want string
	}{
		{"bad dsn", "postgres://" + writer + ":" + pw + "@127.0.0.1:notaport/" + db, "not a valid PostgreSQL DSN"},
		{"wrong password", s.TCPDSN(db, writer, pw+"-wrong"), "password authentication failed"},
		{"missing database", s.TCPDSN("nodb_here", writer, pw), "does not exist"},
	} {
		_, err := Open(ctx, c.dsn, Options{Host: "h"})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("%s: the error shows the password: %v", c.name, err)
		}
		if !strings.Contains(err.Error(), "fleet store postgres://") {
			t.Errorf("%s: the error does not name the store: %v", c.name, err)
		}
	}
	s.Pause()
	_, err := Open(ctx, s.TCPDSN(db, writer, pw), Options{Host: "h"})
	if rerr := s.Resume(); rerr != nil {
		t.Fatal(rerr)
	}
	if err == nil || !strings.Contains(err.Error(), "cannot connect") || strings.Contains(err.Error(), pw) {
		t.Fatalf("unreachable server: %v", err)
	}
}
