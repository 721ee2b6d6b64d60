package integration

// dshfs sync against a real PostgreSQL server (internal/pgtest), run as the shipped binary: killed with
// SIGKILL at random moments and run again, the fleet store must end equal to the source — no gap, no
// duplicate, nothing partial at any point; --watch follows a growing session and stops on SIGTERM; a
// second host's different copy of a session is refused with exit 1.

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/klauspost/compress/zstd"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/fixtures"
	"github.com/dshfs/dshfs/internal/pgtest"
	"github.com/dshfs/dshfs/internal/synth"
)

var syncKills = flag.Int("sync.kills", 50, "kill -9 cycles of TestSyncKill")

// fleetDB is a fresh fleet store database and its DSN.
func fleetDB(t *testing.T) string {
	t.Helper()
	s := pgtest.Shared(t)
	return s.DSN(s.NewDatabase(t))
}

// storedLog is a session's stored log as a JSONL root holds it.
func storedLog(t *testing.T, root, id string) *eventstore.Prefix {
	t.Helper()
	mode, _ := jsonl.Detect(root)
	b, err := jsonl.Open(root, mode)
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.LoadStored(context.Background(), id)
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	return p
}

// fleetRows reads what the fleet store holds of every session from its tables: each row's line decoded
// as every reader of a stored line decodes it. It fails t when any session's rows are not contiguous
// from seq 0 up to its next_seq (a gap, an overlap, a partial batch).
func fleetRows(t *testing.T, dsn string) map[string][]event.Event {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	// one snapshot: a sync may be committing meanwhile
	tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	next := map[string]int64{}
	rows, err := tx.Query(ctx, `SELECT id, next_seq FROM sessions`)
	if err != nil {
		if strings.Contains(err.Error(), "does not exist") {
			return nil // no schema yet: the first run was killed before creating it
		}
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var n int64
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		next[id] = n
	}
	rows.Close()
	out := map[string][]event.Event{}
	for id := range next {
		out[id] = nil
	}
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	rows, err = tx.Query(ctx, `SELECT session_id, seq, last_seq, line, compressed FROM events ORDER BY session_id, seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var seq, last int64
		var line []byte
		var compressed bool
		if err := rows.Scan(&id, &seq, &last, &line, &compressed); err != nil {
			t.Fatal(err)
		}
		if compressed {
			if line, err = dec.DecodeAll(line, nil); err != nil {
				t.Fatalf("%s row %d: %v", id, seq, err)
			}
		}
		canon, err := event.Canonical(line)
		if err != nil {
			t.Fatalf("%s row %d: %v", id, seq, err)
		}
		evs, _, err := event.DecodeStored(canon)
		if err != nil || len(evs) == 0 || evs[0].Seq != seq || evs[len(evs)-1].Seq != last {
			t.Fatalf("%s: row %d..%d decodes to %d events (%v)", id, seq, last, len(evs), err)
		}
		if have := int64(len(out[id])); seq != have {
			t.Fatalf("%s: row at seq %d after %d events: a gap or an overlap", id, seq, have)
		}
		out[id] = append(out[id], evs...)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for id, n := range next {
		if int64(len(out[id])) != n {
			t.Fatalf("%s: next_seq %d, rows hold %d events: a partial batch", id, n, len(out[id]))
		}
	}
	return out
}

// fleetContiguous fails t unless every session's rows run from seq 0 without a gap or an overlap up to its
// next_seq: what a committed Ingest leaves, and what no kill may break.
func fleetContiguous(t *testing.T, dsn string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var bad, badNext int
	err = c.QueryRow(ctx, `SELECT
  (SELECT count(*) FROM (SELECT seq, lag(last_seq) OVER w AS prev, row_number() OVER w AS n FROM events
     WINDOW w AS (PARTITION BY session_id ORDER BY seq)) x WHERE (n = 1 AND seq <> 0) OR (n > 1 AND seq <> prev + 1)),
  (SELECT count(*) FROM sessions s WHERE next_seq <> COALESCE((SELECT max(last_seq) + 1 FROM events e WHERE e.session_id = s.id), 0))`).
		Scan(&bad, &badNext)
	if err != nil && strings.Contains(err.Error(), "does not exist") {
		return // no schema yet: the first run was killed before it made one
	}
	if err != nil {
		t.Fatal(err)
	}
	if bad != 0 || badNext != 0 {
		t.Fatalf("%d rows out of sequence, %d sessions whose next_seq is not where their rows end", bad, badNext)
	}
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// prefixOf checks that held is a prefix of the session's stored log (all of it when whole).
func prefixOf(t *testing.T, id string, held []event.Event, p *eventstore.Prefix, whole bool) {
	t.Helper()
	if len(held) > len(p.Events) || (whole && len(held) != len(p.Events)) {
		t.Fatalf("%s: the fleet store holds %d events, the source %d", id, len(held), len(p.Events))
	}
	for i := range held {
		if !bytes.Equal(held[i].Raw, p.Events[i].Raw) {
			t.Fatalf("%s: event %d differs:\n got %s\nwant %s", id, i, held[i].Raw, p.Events[i].Raw)
		}
	}
}

// TestSyncKill kills `dshfs sync` with SIGKILL at random moments (-sync.kills cycles, 50 by default) while
// the source keeps growing, and runs it again each time: after every kill the fleet store holds, for each
// session, a contiguous prefix of the source's stored log; after a last complete run, all of it.
func TestSyncKill(t *testing.T) {
	dshfs := filepath.Join(binDir(t), "dshfs")
	dsn := fleetDB(t)
	root := filepath.Join(t.TempDir(), "sessions")
	var ids []string
	for i := range 10 {
		id := fmt.Sprintf("kill-%02d", i)
		ids = append(ids, id)
		if err := synth.Write(root, jsonl.Zstd, id, 1000); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	t.Logf("-sync.kills=%d", *syncKills)
	// The kill lands uniformly within [0, window): the window shrinks after a run that finished before
	// its kill and grows after one that was killed, so the kills keep landing while a run copies.
	window := 500 * time.Millisecond
	killed, completed := 0, 0
	logs := map[string]*eventstore.Prefix{} // the source's stored logs, read again when they grow
	for _, id := range ids {
		logs[id] = storedLog(t, root, id)
	}
	seq := func(id string) int { return len(logs[id].Events) }
	for cycle := 0; cycle < *syncKills; cycle++ {
		if cycle > 0 { // the source grows between runs, as a live host's does: a batch, one frame
			for range 2 {
				id := ids[rng.IntN(len(ids))]
				var text []byte
				for range 40 {
					line := fmt.Sprintf(`{"type":"session/note","seq":%d,"time":%d,"data":{"cycle":%d}}`, seq(id), time.Now().UnixMilli(), cycle)
					text = append(append(text, line...), '\n')
					logs[id].Events = append(logs[id].Events, event.Event{Raw: []byte(line)})
				}
				appendBytes(t, logs[id].Path, jsonl.EncodeFrame(nil, text))
			}
		}
		cmd := exec.Command(dshfs, "sync", "--host", "h1", root, dsn)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(window))))
		cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok && ee.Sys().(syscall.WaitStatus).Signaled() {
			killed++
			window = min(time.Second, window*11/10)
		} else if err == nil {
			completed++
			window = max(10*time.Millisecond, window*6/10)
		} else {
			t.Fatalf("cycle %d: %v\n%s", cycle, err, stderr.String())
		}
		fleetContiguous(t, dsn) // no gap, no overlap, no partial batch
		if cycle%10 == 9 {
			for id, evs := range fleetRows(t, dsn) {
				prefixOf(t, id, evs, logs[id], false)
			}
		}
	}
	t.Logf("%d runs killed, %d completed before the kill", killed, completed)
	if killed < *syncKills/2 {
		t.Errorf("only %d of %d runs were killed while syncing", killed, *syncKills)
	}
	r := run(t, "", dshfs, "sync", "--host", "h1", root, dsn)
	if r.code != 0 {
		t.Fatalf("final sync: exit %d\n%s", r.code, r.stderr)
	}
	held := fleetRows(t, dsn)
	if len(held) != len(ids) {
		t.Fatalf("the fleet store holds %d sessions, want %d", len(held), len(ids))
	}
	for _, id := range ids {
		p := storedLog(t, root, id)
		if len(p.Events) != len(logs[id].Events) {
			t.Fatalf("%s: the source holds %d events, the test wrote %d", id, len(p.Events), len(logs[id].Events))
		}
		prefixOf(t, id, held[id], p, true)
	}
	// and a run after that copies nothing
	r = run(t, "", dshfs, "sync", "--host", "h1", root, dsn)
	if r.code != 0 || strings.Count(string(r.stdout), "unchanged\t") != len(ids) {
		t.Errorf("rerun: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestSyncWatchFollows runs `dshfs sync --watch`, appends to a session of the source, awaits the new
// events in the fleet store, and stops the sync with SIGTERM: exit 0, a line per copy, the summary.
func TestSyncWatchFollows(t *testing.T) {
	dshfs := filepath.Join(binDir(t), "dshfs")
	dsn := fleetDB(t)
	root := filepath.Join(t.TempDir(), "sessions")
	if err := synth.Write(root, jsonl.None, "live", 40); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(dshfs, "sync", "--watch", "--host", "h1", root, dsn)
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	holds := func(n int) func() (bool, string) {
		return func() (bool, string) {
			held := fleetRows(t, dsn)
			return len(held["live"]) == n, fmt.Sprintf("%d events held, want %d\n%s", len(held["live"]), n, stderr.String())
		}
	}
	waitFor(t, "the first pass", holds(len(storedLog(t, root, "live").Events)))
	waitFor(t, "the watch to start", func() (bool, string) {
		return strings.Contains(stderr.String(), "following"), stderr.String()
	})
	for range 3 {
		if err := synth.Append(root, jsonl.None, "live", 1); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the appended events", holds(len(storedLog(t, root, "live").Events)))
	}
	prefixOf(t, "live", fleetRows(t, dsn)["live"], storedLog(t, root, "live"), true)
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sync --watch after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(deadline):
		t.Fatal("sync --watch did not stop on SIGTERM")
	}
	if n := strings.Count(stdout.String(), "\tcopied\tlive\t"); n < 3 {
		t.Errorf("%d stamped copy lines, want at least 3:\n%s", n, stdout.String())
	}
	if !strings.Contains(stderr.String(), "dshfs: sync as host h1:") {
		t.Errorf("no summary on stderr:\n%s", stderr.String())
	}
}

// TestSyncSecondHost: a second host syncing a store holding one of the same sessions with other events is
// refused for that session (exit 1, a refused line naming the first host), which stays as it was, while
// its other sessions sync.
func TestSyncSecondHost(t *testing.T) {
	dshfs := filepath.Join(binDir(t), "dshfs")
	dsn := fleetDB(t)
	rootA := fixtures.CopyTree(t, fixtures.Path(t, "generated/raw"))
	rootB := fixtures.CopyTree(t, fixtures.Path(t, "generated/raw"))
	if r := run(t, "", dshfs, "sync", "--host", "a", rootA, dsn); r.code != 0 {
		t.Fatalf("host a: exit %d\n%s", r.code, r.stderr)
	}
	const clean = "main-session-fa821f4b-98fd-46aa-86bc-0955a88ef4b8"
	before := fleetRows(t, dsn)
	p := storedLog(t, rootB, clean)
	f, err := os.OpenFile(p.Path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, `{"type":"session/note","seq":%d,"time":1,"data":{}}`+"\n", len(p.Events))
	f.Close()
	if err := synth.Write(rootB, jsonl.None, "only-on-b", 1); err != nil {
		t.Fatal(err)
	}
	r := run(t, "", dshfs, "sync", "--host", "b", rootB, dsn)
	if r.code != 1 {
		t.Errorf("host b: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(string(r.stdout), "refused\t"+clean+"\t0\t0\t") || !strings.Contains(string(r.stdout), `host "a"`) {
		t.Errorf("no refusal of %s naming host a:\n%s", clean, r.stdout)
	}
	if !strings.Contains(string(r.stdout), "copied\tonly-on-b\t") {
		t.Errorf("host b's own session was not copied:\n%s", r.stdout)
	}
	after := fleetRows(t, dsn)
	if len(after[clean]) != len(before[clean]) {
		t.Errorf("the refused session changed: %d events, was %d", len(after[clean]), len(before[clean]))
	}
	prefixOf(t, clean, after[clean], storedLog(t, rootA, clean), true)
}

// TestSyncReleaseCLI: `sync --release ID` copies what is left and hands the session over (sync_host
// cleared); lines the host writes to it later are not copied, and reported.
func TestSyncReleaseCLI(t *testing.T) {
	dshfs := filepath.Join(binDir(t), "dshfs")
	dsn := fleetDB(t)
	root := filepath.Join(t.TempDir(), "sessions")
	if err := synth.Write(root, jsonl.Zstd, "handed", 30); err != nil {
		t.Fatal(err)
	}
	r := run(t, "", dshfs, "sync", "--host", "h1", "--release", "handed", root, dsn)
	if r.code != 0 || !strings.Contains(string(r.stdout), "copied\thanded\t") || !strings.HasSuffix(string(r.stdout), "released\thanded\n") {
		t.Fatalf("sync --release: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	syncHost := func() *string {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		var h *string
		if err := c.QueryRow(ctx, `SELECT sync_host FROM sessions WHERE id = 'handed'`).Scan(&h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	if h := syncHost(); h != nil {
		t.Fatalf("released, yet synced by %q", *h)
	}
	held := len(fleetRows(t, dsn)["handed"])
	if err := synth.Append(root, jsonl.Zstd, "handed", 1); err != nil {
		t.Fatal(err)
	}
	r = run(t, "", dshfs, "sync", "--host", "h1", root, dsn)
	if r.code != 1 || !strings.Contains(string(r.stdout), "refused\thanded\t0\t0\t") {
		t.Errorf("sync after release: exit %d, want 1 and a refusal\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := len(fleetRows(t, dsn)["handed"]); n != held || syncHost() != nil {
		t.Errorf("the released session changed: %d events, was %d", n, held)
	}
}
