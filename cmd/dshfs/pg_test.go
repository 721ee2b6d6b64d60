package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/postgres"
	"github.com/dshfs/dshfs/internal/pgtest"
)

// TestFleetStoreCLI runs the CLI's commands against a fleet store on a real server: pg init, create,
// append, ls, cat, check and fork, as a JSONL or SQLite store runs them.
func TestFleetStoreCLI(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	s := pgtest.Shared(t)
	db := s.NewDatabase(t)
	dsn := s.DSN(db)
	code, out, errOut := runCLI("pg", "init", dsn)
	if code != 0 || !strings.Contains(out, "ready: schema version 2, store id ") {
		t.Fatalf("pg init: %d %q %q", code, out, errOut)
	}
	if code, out, _ := runCLI("pg", "init", dsn); code != 0 || !strings.Contains(out, "schema version 2") {
		t.Fatalf("pg init again: %d %q", code, out)
	}
	if code, out, errOut := runCLI("create", "--cwd", "/srv/app", dsn, "s1"); code != 0 || !strings.Contains(out, `created \"s1\"`) {
		t.Fatalf("create: %d %q %q", code, out, errOut)
	}
	events := filepath.Join(t.TempDir(), "events.jsonl")
	body := `{"type":"turn/start","data":{"turn":1}}
{"type":"user/message","data":{"id":"u","role":"user","content":[{"type":"text","text":"hello fleet"}],"source":{"kind":"user"}},"surfaceOp":"append"}
{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}
`
	if err := os.WriteFile(events, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI("append", dsn, "s1", events); code != 0 {
		t.Fatalf("append: %d %q %q", code, out, errOut)
	}
	code, out, errOut = runCLI("ls", dsn)
	if code != 0 || !strings.HasPrefix(out, "s1\tok\t") || !strings.Contains(out, "/srv/app") {
		t.Fatalf("ls: %d %q %q", code, out, errOut)
	}
	code, out, _ = runCLI("ls", "--json", dsn)
	if code != 0 || !strings.Contains(out, `"id":"s1"`) || !strings.Contains(out, `"revision":"pg:`) || !strings.Contains(out, `"host":"`) {
		t.Fatalf("ls --json: %d %q", code, out)
	}
	code, raw, errOut := runCLI("cat", "--view", "raw", dsn, "s1")
	if code != 0 || strings.Count(raw, "\n") != 4 || !strings.HasPrefix(raw, `{"type":"session",`) || !strings.Contains(raw, "hello fleet") {
		t.Fatalf("cat raw: %d %q %q", code, raw, errOut)
	}
	if code, out, _ := runCLI("cat", "--view", "transcript", dsn, "s1"); code != 0 || !strings.Contains(out, "hello fleet") {
		t.Fatalf("cat transcript: %d %q", code, out)
	}
	if code, out, errOut := runCLI("check", dsn); code != 0 {
		t.Fatalf("check: %d %q %q", code, out, errOut)
	}
	// status.json says who holds a fleet session: written here, it is this host's, fed by no sync
	host, _ := os.Hostname()
	if c := custodyOf(t, dsn, "s1"); c.Host != host || c.SyncHost != nil || c.ReleaseAfterSeconds != 600 {
		t.Fatalf("custody of a session written through the fleet store: %+v", c)
	}
	fleet, err := postgres.Open(context.Background(), dsn, postgres.Options{Host: "ci-9"})
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	cwd := event.String("/srv/ci")
	if err := fleet.Ingest(context.Background(), "ci-9", "synced", event.Header{ID: "synced", CreatedAt: 1700000000000, Cwd: &cwd}.Line(), 0, nil); err != nil {
		t.Fatal(err)
	}
	if c := custodyOf(t, dsn, "synced"); c.Host != "ci-9" || c.SyncHost == nil || *c.SyncHost != "ci-9" {
		t.Fatalf("custody of a synced session: %+v", c)
	}
	if code, out, errOut := runCLI("fork", dsn, "s1", "2", "child"); code != 0 || !strings.Contains(out, `forked: child \"child\"`) {
		t.Fatalf("fork: %d %q %q", code, out, errOut)
	}
	code, out, _ = runCLI("ls", dsn)
	if code != 0 || !strings.Contains(out, "child\tok\t") || !strings.Contains(out, "\ts1\n") {
		t.Fatalf("ls after fork: %d %q", code, out)
	}
	if code, _, errOut := runCLI("create", dsn, "s1"); code != 1 || !strings.Contains(errOut, "already exists") {
		t.Fatalf("create of an existing id: %d %q", code, errOut)
	}
}

// custodyOf is `dshfs cat --view status STORE ID`'s custody.
func custodyOf(t *testing.T, store, id string) (c struct {
	Host                string
	SyncHost            *string
	ReleaseAfterSeconds float64
}) {
	t.Helper()
	code, out, errOut := runCLI("cat", "--view", "status", store, id)
	var st struct{ Custody *json.RawMessage }
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Custody == nil {
		t.Fatalf("status of %s: %d %q %q", id, code, out, errOut)
	}
	if err := json.Unmarshal(*st.Custody, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFleetStoreCLIRefusals: a read-only role reads but cannot write, and a wrong password, a bad DSN,
// an unknown schema and an unreachable server each fail clearly, never showing the password.
func TestFleetStoreCLIRefusals(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	s := pgtest.Shared(t)
	db := s.NewDatabase(t)
	if code, _, errOut := runCLI("create", s.DSN(db), "s1"); code != 0 {
		t.Fatalf("create: %d %q", code, errOut)
	}
	const pw = "Secret-77x"
	auditor := "auditor_" + db // roles are the server's, not the database's
	s.CreateRole(t, db, auditor, pw, true)
	ro := s.TCPDSN(db, auditor, pw)
	if code, out, errOut := runCLI("ls", ro); code != 0 || !strings.HasPrefix(out, "s1\tok\t") {
		t.Fatalf("ls as a read-only role: %d %q %q", code, out, errOut)
	}
	if code, out, errOut := runCLI("cat", "--view", "header", ro, "s1"); code != 0 || !strings.Contains(out, `"s1"`) {
		t.Fatalf("cat as a read-only role: %d %q %q", code, out, errOut)
	}
	code, _, errOut := runCLI("create", ro, "s2")
	if code == 0 || !strings.Contains(errOut, "permission denied") || strings.Contains(errOut, pw) {
		t.Fatalf("create as a read-only role: %d %q", code, errOut)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"wrong password", []string{"ls", s.TCPDSN(db, auditor, pw+"-no")}, 2, "password authentication failed"},
		{"bad dsn", []string{"ls", "postgres://" + auditor + ":" + pw + "@127.0.0.1:port/" + db}, 2, "not a valid PostgreSQL DSN"},
		{"bad dsn init", []string{"pg", "init", "postgres://" + auditor + ":" + pw + "@127.0.0.1:port/" + db}, 2, "not a valid PostgreSQL DSN"},
		{"not a dsn", []string{"pg", "init", "/tmp/x"}, 2, "needs a postgres:// or postgresql:// DSN"},
	} {
		code, out, errOut := runCLI(c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) || strings.Contains(errOut+out, pw) {
			t.Errorf("%s: exit %d %q %q", c.name, code, out, errOut)
		}
	}
	if err := s.Exec(db, `UPDATE dshfs_fleet SET schema_version = 3`); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI("pg", "init", s.DSN(db))
	if code != 1 || !strings.Contains(errOut, "holds fleet schema version 3; this dshfs supports versions 1 to 2") {
		t.Fatalf("pg init of another schema version: %d %q", code, errOut)
	}
	if code, _, errOut := runCLI("ls", s.DSN(db)); code != 2 || !strings.Contains(errOut, "schema version 3") {
		t.Fatalf("ls of another schema version: %d %q", code, errOut)
	}
	s.Pause()
	code, _, errOut = runCLI("ls", s.TCPDSN(db, auditor, pw))
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if code != 2 || !strings.Contains(errOut, "cannot connect") || strings.Contains(errOut, pw) {
		t.Fatalf("ls of an unreachable server: %d %q", code, errOut)
	}
}
