package pgtest

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestServer proves the private server answers over its socket and over TCP with the password only, and
// comes back after a pause.
func TestServer(t *testing.T) {
	s := Shared(t)
	db := s.NewDatabase(t)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, s.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	var one int
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
	c.Close(ctx)
	if _, err := pgx.Connect(ctx, s.TCPDSN(db, Superuser, "wrong")); err == nil || !strings.Contains(err.Error(), "password authentication failed") {
		t.Fatalf("wrong password: %v", err)
	}
	c, err = pgx.Connect(ctx, s.TCPDSN(db, Superuser, Password))
	if err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	s.Pause()
	if _, err := pgx.Connect(ctx, s.DSN(db)); err == nil {
		t.Fatal("a paused server answered")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	s.CreateRole(t, db, "reader", "r-pass", true)
	c, err = pgx.Connect(ctx, s.TCPDSN(db, "reader", "r-pass"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "CREATE TABLE x (a int)"); err == nil {
		t.Fatal("a read-only role created a table")
	}
	c.Close(ctx)
}
