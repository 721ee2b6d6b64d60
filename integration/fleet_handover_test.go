package integration

// The fleet store's handover, backup, security and error tests: the dshfs binary against the tests' private
// PostgreSQL server (internal/pgtest), and the harness's own packages reading what a handover wrote.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dshfs/dshfs/eventstore/postgres"
	"github.com/dshfs/dshfs/internal/fixtures"
	"github.com/dshfs/dshfs/internal/harness"
	"github.com/dshfs/dshfs/internal/pgtest"
)

// hoCrashed is the fixture session with an open turn after a durable tool/call: a session whose host
// crashed, to be handed over. hoProject is the project directory the fixtures keep it in.
const (
	hoCrashed = "main-session-30628611-e45f-4f98-9688-010e1428e585"
	hoProject = "--home-dev-projects-acme-api--"
)

// hoFleet is a fresh fleet database of the shared test server and its socket URL.
func hoFleet(t *testing.T) (*pgtest.Server, string, string) {
	t.Helper()
	s := pgtest.Shared(t)
	db := s.NewDatabase(t)
	return s, db, s.DSN(db)
}

// hoIngest feeds the given fixture sessions (JSONL raw, whole lines) into the fleet store as a host's sync
// does: the header line and every event line, verbatim.
func hoIngest(t *testing.T, dsn, root, host string, ids ...string) {
	t.Helper()
	ctx := context.Background()
	b, err := postgres.Open(ctx, dsn, postgres.Options{Host: host})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, id := range ids {
		raw, err := os.ReadFile(filepath.Join(root, hoProject, id, "session.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		ls := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
		if err := b.Ingest(ctx, host, id, ls[0], 0, ls[1:]); err != nil {
			t.Fatalf("ingest %s: %v", id, err)
		}
	}
}

// hoRun runs the dshfs binary with extra environment (HOME, PG* variables) and returns its result.
func hoRun(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, dshfsBin(t), args...)
	cmd.Env = append(hoEnv(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("dshfs %s: timed out after %v; stderr: %s", strings.Join(args, " "), toolTimeout, errb.String())
	}
	r := result{stdout: out.Bytes(), stderr: errb.Bytes()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// hoEnv is the test process's environment without any PG* variable: each test sets the ones it means.
func hoEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			out = append(out, kv)
		}
	}
	return out
}

// hoMust runs dshfs and fails unless it exits with want.
func hoMust(t *testing.T, want int, env []string, args ...string) result {
	t.Helper()
	r := hoRun(t, env, args...)
	if r.code != want {
		t.Fatalf("dshfs %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, want, r.stdout, r.stderr)
	}
	return r
}

// hoSnapshot is every row of every table of the fleet database, each table hashed in a stable order:
// what "changes nothing" compares.
func hoSnapshot(t *testing.T, s *pgtest.Server, db string) map[string]string {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, s.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, tab := range tables {
		var sum string
		q := fmt.Sprintf("SELECT count(*)::text || ':' || coalesce(md5(string_agg(t::text, E'\\n' ORDER BY t::text)), '') FROM %s t", pgx.Identifier{tab}.Sanitize())
		if err := c.QueryRow(ctx, q).Scan(&sum); err != nil {
			t.Fatal(err)
		}
		out[tab] = sum
	}
	if len(out) == 0 {
		t.Fatal("the fleet database holds no table")
	}
	return out
}

// hoSame fails when the fleet database changed.
func hoSame(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed the fleet store: table %s %s -> %s", what, k, v, after[k])
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s changed the fleet store: a new table %s", what, k)
		}
	}
}

// hoAgree fails unless the harness reads session id of got exactly as of want: header, stored events and
// inspect() events line for line.
func hoAgree(t *testing.T, h *harness.Harness, want, got string, ids ...string) {
	t.Helper()
	w, err := h.Dump(want, ids...)
	if err != nil {
		t.Fatal(err)
	}
	g, err := h.Dump(got, ids...)
	if err != nil {
		t.Fatal(err)
	}
	if len(w) != len(ids) || len(g) != len(ids) {
		t.Fatalf("the harness answered %d and %d of %d sessions", len(w), len(g), len(ids))
	}
	for i, id := range ids {
		switch {
		case g[i].Error != "" || g[i].StoredError != "":
			t.Errorf("%s: the harness refuses the copy: %s%s", id, g[i].Error, g[i].StoredError)
		case w[i].Error != "":
			t.Errorf("%s: the harness refuses the original: %s", id, w[i].Error)
		case len(w[i].Events) == 0:
			t.Errorf("%s: the harness reads no event of the original", id)
		}
		if g[i].Header != w[i].Header {
			t.Errorf("%s header: got %s want %s", id, g[i].Header, w[i].Header)
		}
		if d := diff(g[i].Stored, w[i].Stored); d != "" {
			t.Errorf("%s readFrom: %s", id, d)
		}
		if d := diff(g[i].Events, w[i].Events); d != "" {
			t.Errorf("%s inspect: %s", id, d)
		}
	}
}

// hoIDs are the session ids of a JSONL store as the harness's list() gives them, sorted.
func hoIDs(t *testing.T, h *harness.Harness, root string) []string {
	t.Helper()
	list, err := h.List(root)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range list {
		var hd struct{ ID string }
		if err := json.Unmarshal([]byte(l), &hd); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, hd.ID)
	}
	sort.Strings(ids)
	return ids
}

// TestFleetHandoverRoundTrip: a crashed session synced into the fleet store is handed over into a plain
// JSONL root with `convert --session ID` (and with the URL's ?session=ID); the harness's own packages read
// it exactly as they read the original, and the harness resumes it (load(): the open turn closed) exactly
// as it resumes the original.
func TestFleetHandoverRoundTrip(t *testing.T) {
	h := harness.Get(t)
	s, db, dsn := hoFleet(t)
	src := fixtures.CopyTree(t, fixtures.Path(t, "generated", "raw"))
	hoIngest(t, dsn, src, "ci-runner-7", hoCrashed, "main-session-39ade10b-6855-483e-897d-dd835505a4e6")
	before := hoSnapshot(t, s, db)

	dst := filepath.Join(t.TempDir(), "handover")
	r := hoMust(t, 0, nil, "convert", "--verify", "--session", hoCrashed, dsn, dst)
	if got := strings.Fields(string(r.stdout)); len(got) < 3 || got[0] != "converted" || got[1] != hoCrashed {
		t.Fatalf("convert printed %q", r.stdout)
	}
	if ids := hoIDs(t, h, dst); len(ids) != 1 || ids[0] != hoCrashed {
		t.Fatalf("the handover root holds %v, want only %s", ids, hoCrashed)
	}
	hoAgree(t, h, src, dst, hoCrashed)
	hoSame(t, "convert out of the fleet store", before, hoSnapshot(t, s, db))

	// the URL form, with the other parameters of the URL kept
	dst2 := filepath.Join(t.TempDir(), "handover2")
	hoMust(t, 0, nil, "convert", dsn+"&session="+url.QueryEscape(hoCrashed), dst2)
	hoAgree(t, h, src, dst2, hoCrashed)

	// the harness resumes both copies the same way: its load() closes the open turn of each alike
	orig := fixtures.CopyTree(t, fixtures.Path(t, "generated", "raw"))
	for _, root := range []string{orig, dst} {
		res, err := h.Load(root, hoCrashed)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 1 || res[0].Error != "" {
			t.Fatalf("the harness's load() of %s: %+v", root, res)
		}
	}
	hoAgree(t, h, orig, dst, hoCrashed)
	after, err := h.Dump(dst, hoCrashed)
	if err != nil {
		t.Fatal(err)
	}
	first, err := h.Dump(dst2, hoCrashed)
	if err != nil {
		t.Fatal(err)
	}
	if len(after[0].Stored) <= len(first[0].Stored) {
		t.Fatalf("the harness's resume wrote nothing: %d stored events before, %d after", len(first[0].Stored), len(after[0].Stored))
	}
	// an id the fleet store does not hold: reported missing, exit 2, nothing converted
	dst3 := filepath.Join(t.TempDir(), "none")
	miss := hoMust(t, 2, nil, "convert", "--session", "no-such-session", dsn, dst3)
	if !strings.HasPrefix(string(miss.stdout), "missing\tno-such-session\t") {
		t.Fatalf("convert of a missing id printed %q", miss.stdout)
	}
	if entries, _ := os.ReadDir(dst3); len(entries) != 0 {
		t.Fatalf("a convert of nothing wrote %v", entries)
	}
	// the handed-over session is dshfs's to resume as well, and the fleet store still has it as it was
	hoMust(t, 0, nil, "check", dst2)
	hoSame(t, "the handover", before, hoSnapshot(t, s, db))
}

// TestFleetHandoverFork: an operator forks the crashed session in the fleet store and hands the fork over;
// the harness reads the fork in the JSONL root exactly as dshfs reads it in the fleet store.
func TestFleetHandoverFork(t *testing.T) {
	h := harness.Get(t)
	_, _, dsn := hoFleet(t)
	src := fixtures.CopyTree(t, fixtures.Path(t, "generated", "raw"))
	hoIngest(t, dsn, src, "ci-runner-7", hoCrashed)
	// the syncing host hands the session over first: until then it is not writable through the fleet store
	ctx := context.Background()
	b, err := postgres.Open(ctx, dsn, postgres.Options{Host: "ci-runner-7"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, "ci-runner-7", hoCrashed); err != nil {
		t.Fatal(err)
	}
	b.Close()
	const child = "handover-fork-1"
	hoMust(t, 0, nil, "fork", dsn, hoCrashed, "35", child) // seq 35 ends its first turn; the second is open
	dst := filepath.Join(t.TempDir(), "fork")
	hoMust(t, 0, nil, "convert", "--verify", "--session", child, dsn, dst)
	// the events view is the stored log, packed rows expanded: what the harness's readFrom gives
	inFleet := hoMust(t, 0, nil, "cat", "--view", "events", dsn, child).stdout
	g, err := h.Dump(dst, child)
	if err != nil {
		t.Fatal(err)
	}
	if g[0].Error != "" {
		t.Fatalf("the harness refuses the handed-over fork: %s", g[0].Error)
	}
	want := textLines(inFleet)
	if len(want) != 37 {
		t.Fatalf("the fork holds %d events in the fleet store, want the seed of 36 and its end-seed", len(want))
	}
	if d := diff(g[0].Stored, want); d != "" {
		t.Fatalf("the fork as the harness reads it from the handover root, and as dshfs reads it from the fleet store: %s", d)
	}
	if !strings.Contains(g[0].Header, `"parentSession":"`+hoCrashed+`"`) {
		t.Fatalf("the fork's header names no parent: %s", g[0].Header)
	}
}

// TestFleetConvertInAndOut: convert is generic over backends — a JSONL store converted into an empty fleet
// database (the schema created by the write) and back out gives what the harness reads as the original,
// every session; --verify proves both directions, and a second run finds everything identical.
func TestFleetConvertInAndOut(t *testing.T) {
	h := harness.Get(t)
	s, db, dsn := hoFleet(t)
	src := fixtures.CopyTree(t, fixtures.Path(t, "generated", "raw"))
	r := hoMust(t, 0, nil, "convert", "--verify", src, dsn)
	n := strings.Count(string(r.stdout), "converted\t")
	if n == 0 || strings.Contains(string(r.stdout), "failed") {
		t.Fatalf("convert into the fleet store:\n%s\n%s", r.stdout, r.stderr)
	}
	before := hoSnapshot(t, s, db)
	again := hoMust(t, 0, nil, "convert", "--verify", src, dsn)
	if strings.Count(string(again.stdout), "identical\t") != n {
		t.Fatalf("a second run:\n%s", again.stdout)
	}
	hoSame(t, "a second convert", before, hoSnapshot(t, s, db))
	dst := filepath.Join(t.TempDir(), "out")
	hoMust(t, 0, nil, "convert", "--verify", dsn, dst)
	ids := hoIDs(t, h, dst)
	if len(ids) != n {
		t.Fatalf("the harness lists %d sessions out of the fleet store, %d went in", len(ids), n)
	}
	hoAgree(t, h, src, dst, ids...)
	// and out into a SQLite database, verified the same way
	db3 := filepath.Join(t.TempDir(), "fleet.db")
	out := hoMust(t, 0, nil, "convert", "--verify", dsn, db3)
	if got := strings.Count(string(out.stdout), "converted\t"); got != n {
		t.Fatalf("convert into SQLite converted %d of %d:\n%s", got, n, out.stdout)
	}
	hoSame(t, "converts out of the fleet store", before, hoSnapshot(t, s, db))
}

// TestFleetBackup: a backup of a fleet store is a JSONL store that verify proves, restore restores and the
// harness reads as the sessions' origin; the fleet store is only read, by a read-only role.
func TestFleetBackup(t *testing.T) {
	h := harness.Get(t)
	s, db, dsn := hoFleet(t)
	src := fixtures.CopyTree(t, fixtures.Path(t, "generated", "raw"))
	ids := hoIDs(t, h, src)
	// every whole fixture session (the torn one's cut batch is no complete line: sync would leave it behind)
	var whole []string
	for _, id := range ids {
		if id != "main-session-c652f155-0402-4151-9cf3-89ee925d873b" {
			whole = append(whole, id)
		}
	}
	hoIngest(t, dsn, src, "build-3", whole...)
	role := fmt.Sprintf("ho_backup_%d", os.Getpid())
	s.CreateRole(t, db, role, "Bk-Reader-Pw-4411", true)
	before := hoSnapshot(t, s, db)
	dest := filepath.Join(t.TempDir(), "fleet-backup")
	r := hoMust(t, 0, nil, "backup", s.TCPDSN(db, role, "Bk-Reader-Pw-4411"), dest)
	if !strings.Contains(string(r.stdout), fmt.Sprintf(`"sessions":%d`, len(whole))) {
		t.Fatalf("backup printed %s", r.stdout)
	}
	v := hoMust(t, 0, nil, "verify", dest)
	if !strings.Contains(string(v.stdout), fmt.Sprintf("verified: %d sessions", len(whole))) {
		t.Fatalf("verify printed %s", v.stdout)
	}
	if got := hoIDs(t, h, dest); strings.Join(got, " ") != strings.Join(whole, " ") {
		t.Fatalf("the harness lists %v in the backup, want %v", got, whole)
	}
	hoAgree(t, h, src, dest, whole...)
	manifest, err := os.ReadFile(filepath.Join(dest, "MANIFEST.json"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(manifest, []byte("Bk-Reader-Pw-4411")) || !bytes.Contains(manifest, []byte(role)) {
		t.Fatalf("the manifest names the store as:\n%s", manifest)
	}
	restored := filepath.Join(t.TempDir(), "restored")
	hoMust(t, 0, nil, "restore", dest, restored)
	hoAgree(t, h, src, restored, whole...)
	hoSame(t, "backup", before, hoSnapshot(t, s, db))
}

// hoSecret is the distinctive password of the security tests' role: it must appear in no output.
const hoSecret = "Zq81-handover-Pw"

// hoNoSecret fails when any of the outputs holds the password — or holds it masked by the CLI's stderr
// guard (xxxxx), which means some message quoted it and only the last guard kept it out.
func hoNoSecret(t *testing.T, what string, outs ...[]byte) {
	t.Helper()
	for _, o := range outs {
		if bytes.Contains(o, []byte(hoSecret)) {
			t.Errorf("%s shows the password:\n%s", what, o)
		}
		if bytes.Contains(o, []byte("xxxxx")) {
			t.Errorf("%s quoted the password (masked by the stderr guard):\n%s", what, o)
		}
	}
}

// TestFleetSecurity: with a password in the URL, in $PGPASSWORD or in ~/.pgpass (a HOME of the test's
// own), the password appears in no output — ls --json, cat, errors, a mount's log and status.json, a
// backup's manifest — and a read-only role suffices for ls and cat; sslmode passes through to the driver.
func TestFleetSecurity(t *testing.T) {
	s, db, dsn := hoFleet(t)
	src := fixtures.CopyTree(t, fixtures.Path(t, "generated", "raw"))
	hoIngest(t, dsn, src, "laptop-2", hoCrashed)
	reader := fmt.Sprintf("ho_reader_%d", os.Getpid())
	s.CreateRole(t, db, reader, hoSecret, true)
	tcp := s.TCPDSN(db, reader, hoSecret)
	before := hoSnapshot(t, s, db)

	t.Run("url", func(t *testing.T) {
		ls := hoMust(t, 0, nil, "ls", "--json", tcp)
		if !bytes.Contains(ls.stdout, []byte(hoCrashed)) {
			t.Fatalf("ls --json of a read-only role:\n%s", ls.stdout)
		}
		cat := hoMust(t, 0, nil, "cat", tcp, hoCrashed)
		if len(textLines(cat.stdout)) == 0 {
			t.Fatal("cat of a read-only role printed nothing")
		}
		missing := hoRun(t, nil, "cat", tcp, "no-such-session")
		if missing.code != 2 || len(missing.stderr) == 0 {
			t.Fatalf("cat of a missing id: exit %d, %s", missing.code, missing.stderr)
		}
		wrong := hoRun(t, nil, "ls", s.TCPDSN(db, reader, hoSecret+"x"))
		if wrong.code != 2 {
			t.Fatalf("a wrong password: exit %d", wrong.code)
		}
		// a write through a read-only role is refused, and nothing is written
		refused := hoRun(t, nil, "create", tcp, "ro-write-attempt")
		if refused.code == 0 {
			t.Fatalf("a read-only role created a session: %s", refused.stdout)
		}
		hoNoSecret(t, "ls/cat/errors", ls.stdout, ls.stderr, cat.stderr, missing.stdout, missing.stderr, wrong.stdout, wrong.stderr, refused.stdout, refused.stderr)
		dest := filepath.Join(t.TempDir(), "b")
		b := hoMust(t, 0, nil, "backup", tcp, dest)
		manifest, _ := os.ReadFile(filepath.Join(dest, "MANIFEST.json"))
		hoNoSecret(t, "backup", b.stdout, b.stderr, manifest)
	})

	t.Run("PGPASSWORD", func(t *testing.T) {
		bare := fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", reader, s.Port, db)
		env := []string{"PGPASSWORD=" + hoSecret}
		ls := hoMust(t, 0, env, "ls", "--json", bare)
		if !bytes.Contains(ls.stdout, []byte(hoCrashed)) {
			t.Fatalf("ls --json with PGPASSWORD:\n%s", ls.stdout)
		}
		missing := hoRun(t, env, "cat", bare, "no-such-session")
		hoNoSecret(t, "PGPASSWORD", ls.stdout, ls.stderr, missing.stdout, missing.stderr)
		if r := hoRun(t, nil, "ls", bare); r.code != 2 || !strings.Contains(strings.ToLower(string(r.stderr)), "password") {
			t.Fatalf("without PGPASSWORD: exit %d, %s", r.code, r.stderr)
		}
	})

	t.Run("pgpass", func(t *testing.T) {
		home := t.TempDir()
		line := fmt.Sprintf("127.0.0.1:%d:%s:%s:%s\n", s.Port, db, reader, hoSecret)
		if err := os.WriteFile(filepath.Join(home, ".pgpass"), []byte(line), 0o600); err != nil {
			t.Fatal(err)
		}
		bare := fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", reader, s.Port, db)
		env := []string{"HOME=" + home}
		ls := hoMust(t, 0, env, "ls", "--json", bare)
		cat := hoMust(t, 0, env, "cat", bare, hoCrashed)
		hoNoSecret(t, "~/.pgpass", ls.stdout, ls.stderr, cat.stderr)
	})

	t.Run("sslmode", func(t *testing.T) {
		// the test server has no TLS: sslmode=require must reach the driver and fail naming it
		req := strings.Replace(tcp, "sslmode=disable", "sslmode=require", 1)
		r := hoRun(t, nil, "ls", req)
		low := strings.ToLower(string(r.stderr))
		if r.code != 2 || !(strings.Contains(low, "tls") || strings.Contains(low, "ssl")) {
			t.Fatalf("sslmode=require against a server without TLS: exit %d, %s", r.code, r.stderr)
		}
		if n := len(textLines(r.stderr)); n != 1 {
			t.Errorf("the error is %d lines:\n%s", n, r.stderr)
		}
		hoNoSecret(t, "sslmode error", r.stdout, r.stderr)
		// client certificate parameters reach the driver too: files that are not there are named
		dir := t.TempDir()
		for _, param := range []string{"sslrootcert", "sslcert"} {
			file := filepath.Join(dir, param+".pem")
			extra := param + "=" + url.QueryEscape(file)
			if param == "sslcert" {
				extra += "&sslkey=" + url.QueryEscape(filepath.Join(dir, "client.key"))
			}
			r := hoRun(t, nil, "ls", strings.Replace(tcp, "sslmode=disable", "sslmode=verify-full&"+extra, 1))
			if r.code != 2 || !strings.Contains(string(r.stderr), dir) {
				t.Errorf("%s of a missing file: exit %d, %s", param, r.code, r.stderr)
			}
			hoNoSecret(t, param+" error", r.stdout, r.stderr)
		}
	})

	t.Run("mount", func(t *testing.T) {
		m := startMount(t, "--read-only", tcp)
		status := readFile(t, filepath.Join(m.dir, "status.json"))
		if !bytes.Contains(status, []byte(`"backend":"postgres"`)) {
			t.Fatalf("status.json of a fleet mount:\n%s", status)
		}
		events := readFile(t, filepath.Join(m.dir, "sessions", hoCrashed, "events.jsonl"))
		if len(events) == 0 {
			t.Fatal("the mount serves no events")
		}
		sessStatus := readFile(t, filepath.Join(m.dir, "sessions", hoCrashed, "status.json"))
		m.stop(t)
		hoNoSecret(t, "the mount", status, sessStatus, []byte(m.log.String()))
		if strings.Contains(m.log.String(), "xxxxx") {
			t.Errorf("the mount logged its store with the password masked by the stderr guard, not named without it:\n%s", m.log)
		}
	})
	hoSame(t, "reading with a read-only role", before, hoSnapshot(t, s, db))
}

// hoClosedPort is a loopback port nothing listens on.
func hoClosedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// TestFleetErrors: a malformed URL, a wrong password, an unreachable server and a dropped connection each
// give a clear one-line error and exit 2, and change nothing: the fleet store's tables are as they were,
// and no destination of convert or backup is left behind.
func TestFleetErrors(t *testing.T) {
	s, db, dsn := hoFleet(t)
	src := fixtures.CopyTree(t, fixtures.Path(t, "generated", "raw"))
	hoIngest(t, dsn, src, "ci-runner-7", hoCrashed, "main-session-39ade10b-6855-483e-897d-dd835505a4e6")
	before := hoSnapshot(t, s, db)
	for _, c := range []struct {
		name, store, want string
	}{
		{"malformed", fmt.Sprintf("postgres://%s:%s@127.0.0.1:notaport/%s", pgtest.Superuser, hoSecret, db), "dsn"},
		{"wrong-password", s.TCPDSN(db, pgtest.Superuser, hoSecret), "password authentication failed"},
		{"unreachable", fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable&connect_timeout=5", pgtest.Superuser, hoSecret, hoClosedPort(t), db), "connect"},
		{"no-database", s.DSN(db + "_absent"), "does not exist"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			for _, args := range [][]string{
				{"ls", c.store},
				{"cat", c.store, hoCrashed},
				{"convert", "--session", hoCrashed, c.store, filepath.Join(tmp, "convert")},
				{"backup", c.store, filepath.Join(tmp, "backup")},
				{"convert", src, c.store},
			} {
				r := hoRun(t, nil, args...)
				if r.code != 2 {
					t.Errorf("dshfs %s: exit %d, want 2; stderr:\n%s", args[0], r.code, r.stderr)
				}
				lines := textLines(r.stderr)
				var errLines []string
				for _, l := range lines {
					if strings.HasPrefix(l, "dshfs: ") && !strings.HasPrefix(l, "dshfs: 0 sessions") {
						errLines = append(errLines, l)
					}
				}
				if len(errLines) != 1 || !strings.Contains(strings.ToLower(errLines[0]), c.want) {
					t.Errorf("dshfs %s: want one error line naming %q, stderr:\n%s", args[0], c.want, r.stderr)
				}
				hoNoSecret(t, "dshfs "+args[0], r.stdout, r.stderr)
			}
			for _, d := range []string{"convert", "backup"} {
				if _, err := os.Stat(filepath.Join(tmp, d)); err == nil {
					t.Errorf("a failed %s left %s behind", d, filepath.Join(tmp, d))
				}
			}
			if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
				t.Errorf("left in the destination's directory: %v", entries)
			}
			hoSame(t, c.name, before, hoSnapshot(t, s, db))
		})
	}

	t.Run("dropped", func(t *testing.T) {
		for _, cmd := range []string{"convert", "backup"} {
			t.Run(cmd, func(t *testing.T) {
				dst := filepath.Join(t.TempDir(), cmd)
				r := hoDropped(t, s, db, cmd, dsn, dst)
				if r.code != 2 {
					t.Fatalf("dshfs %s with its connection dropped: exit %d, want 2\nstdout:\n%s\nstderr:\n%s", cmd, r.code, r.stdout, r.stderr)
				}
				all := strings.ToLower(string(r.stdout) + string(r.stderr))
				if !strings.Contains(all, "terminat") && !strings.Contains(all, "connection") {
					t.Fatalf("dshfs %s: the error does not say the connection dropped:\n%s%s", cmd, r.stdout, r.stderr)
				}
				hoSame(t, cmd+" with its connection dropped", before, hoSnapshot(t, s, db))
				switch cmd {
				case "backup":
					if entries, _ := os.ReadDir(filepath.Dir(dst)); len(entries) != 0 {
						t.Fatalf("a backup whose connection dropped left %v", entries)
					}
				case "convert":
					// every session the run wrote is whole: a rerun completes the rest and verifies all
					again := hoMust(t, 0, nil, "convert", "--verify", dsn, dst)
					if strings.Contains(string(again.stdout), "completed") || strings.Contains(string(again.stdout), "differs") {
						t.Fatalf("the rerun found a half-written session:\n%s", again.stdout)
					}
				}
			})
		}
	})
}

// hoDropped runs `dshfs CMD dsn dst` while a transaction of the test holds the fleet's tables locked, so
// that dshfs's first read of a session waits; that waiting connection is terminated by the server
// (pg_terminate_backend), then the lock is let go.
func hoDropped(t *testing.T, s *pgtest.Server, db, cmd, dsn, dst string) result {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, s.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "LOCK TABLE events IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan result, 1)
	go func() { done <- hoRun(t, nil, cmd, dsn, dst) }()
	var pid int32
	end := time.Now().Add(deadline)
	for pid == 0 {
		// pg_stat_activity is read once per transaction unless its snapshot is cleared
		if _, err := tx.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
			t.Fatal(err)
		}
		err := tx.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()
			AND wait_event_type = 'Lock' LIMIT 1`, db).Scan(&pid)
		if err != nil && err != pgx.ErrNoRows {
			t.Fatal(err)
		}
		select {
		case r := <-done:
			t.Fatalf("dshfs %s ended before it waited for the lock: exit %d\n%s%s", cmd, r.code, r.stdout, r.stderr)
		default:
		}
		if pid == 0 {
			if time.Now().After(end) {
				t.Fatalf("dshfs %s never waited on the locked table", cmd)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var ok bool
	if err := tx.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend: %v %v", ok, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	return <-done
}

// TestFleetEmpty: reading an empty database (no fleet schema yet) creates nothing: ls warns naming the store
// without its password, backup refuses an empty backup (exit 1) and leaves no DEST, and convert out of it
// converts nothing.
func TestFleetEmpty(t *testing.T) {
	s, db, _ := hoFleet(t)
	role := fmt.Sprintf("ho_owner_%d", os.Getpid())
	s.CreateRole(t, db, role, hoSecret, false)
	tcp := s.TCPDSN(db, role, hoSecret)
	ls := hoMust(t, 0, nil, "ls", tcp)
	if !strings.Contains(string(ls.stderr), "holds no sessions") || !strings.Contains(string(ls.stderr), role+"@127.0.0.1") {
		t.Errorf("ls of an empty fleet store warned:\n%s", ls.stderr)
	}
	dest := filepath.Join(t.TempDir(), "b")
	b := hoMust(t, 1, nil, "backup", tcp, dest)
	if _, err := os.Stat(dest); err == nil {
		t.Error("a refused backup left its DEST")
	}
	c := hoMust(t, 0, nil, "convert", tcp, filepath.Join(t.TempDir(), "c"))
	hoNoSecret(t, "an empty fleet store", ls.stdout, ls.stderr, b.stdout, b.stderr, c.stdout, c.stderr)
	var n int
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("reading an empty database created %d tables (%v)", n, err)
	}
}

// TestFleetBackupLeavesOutBadSession: a fleet store holding a session no JSONL root can hold (an id of 300
// bytes, ingested before create refused such ids) is backed up without it: exit 1 naming it, DEST holding
// and verifying every other session, the manifest listing the one left out.
func TestFleetBackupLeavesOutBadSession(t *testing.T) {
	_, _, dsn := hoFleet(t)
	const runner = "build-3"
	good := syncedLines(t, "good", 150)
	b := fleetHost(t, dsn, runner)
	ingest(t, b, runner, "good", good.header, 0, good.lines)
	long := strings.Repeat("l", 300)
	header := bytes.Replace(good.header, []byte(`"id":"good"`), []byte(`"id":"`+long+`"`), 1)
	if bytes.Equal(header, good.header) {
		t.Fatalf("no id in the header %s", good.header)
	}
	ingest(t, b, runner, long, header, 0, good.lines)
	dest := filepath.Join(t.TempDir(), "b")
	r := hoMust(t, 1, nil, "backup", dsn, dest)
	if !strings.Contains(string(r.stderr), long) || !strings.Contains(string(r.stderr), "255") {
		t.Errorf("backup does not name the session it left out, and why:\n%s", r.stderr)
	}
	if !strings.Contains(string(r.stdout), `"sessions":1`) {
		t.Errorf("backup printed %s", r.stdout)
	}
	v := hoMust(t, 0, nil, "verify", dest)
	if !strings.Contains(string(v.stdout), "verified: 1 sessions") {
		t.Errorf("verify printed %s", v.stdout)
	}
	manifest, err := os.ReadFile(filepath.Join(dest, "MANIFEST.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(manifest, []byte(`"skipped":[{"id":"`+long+`"`)) {
		t.Errorf("the manifest does not list the session left out:\n%s", manifest)
	}
}
