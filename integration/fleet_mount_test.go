package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore/postgres"
	"github.com/dshfs/dshfs/internal/pgtest"
)

// Mounts of a fleet store (PostgreSQL) on a real private server: each mount is a dshfs process of its own,
// and what one host writes — through its mount, or by syncing — reaches every other mount live.

// syncedSession is a session of at least n events written by gensession, as a host's dshfs sync hands it to the fleet store:
// its header line and its stored lines (a packed chunk row is one line), verbatim, without their LF;
// split, the index of its last turn's first line; and its events view as the CLI reads it from the JSONL
// store it came from.
type syncedSession struct {
	header []byte
	lines  [][]byte
	split  int
	view   []byte
}

func syncedLines(t *testing.T, id string, events int) syncedSession {
	t.Helper()
	root := filepath.Join(t.TempDir(), "sessions")
	mustRun(t, gensessionBin(t), "-mode", "none", "-id", id, root, fmt.Sprint(events))
	files, _ := filepath.Glob(filepath.Join(root, "*", "*", "session.jsonl"))
	if len(files) != 1 {
		t.Fatalf("gensession wrote %v", files)
	}
	var ls [][]byte
	for _, l := range lines(readFile(t, files[0])) {
		ls = append(ls, bytes.TrimSuffix(l, []byte("\n")))
	}
	s := syncedSession{header: ls[0], lines: ls[1:], view: cli(t, 0, "cat", "--view", "events", root, id)}
	for i, l := range s.lines {
		if bytes.Contains(l, []byte(`"type":"turn/start"`)) {
			s.split = i
		}
	}
	if s.split == 0 {
		t.Fatalf("gensession wrote one turn or none: %d lines", len(s.lines))
	}
	return s
}

// seqOf is a stored line's first seq (a packed row's seq0).
func seqOf(t *testing.T, line []byte) int64 {
	t.Helper()
	var l struct {
		Seq  *int64 `json:"seq"`
		Seq0 *int64 `json:"seq0"`
	}
	if err := json.Unmarshal(line, &l); err != nil {
		t.Fatal(err)
	}
	switch {
	case l.Seq != nil:
		return *l.Seq
	case l.Seq0 != nil:
		return *l.Seq0
	}
	t.Fatalf("no seq in %.100s", line)
	return 0
}

// fleetHost is a host that syncs into the fleet store: a backend of the test process's own, under another
// host name (never the mount's).
func fleetHost(t *testing.T, dsn, host string) *postgres.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	b, err := postgres.Open(ctx, dsn, postgres.Options{Host: host})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func ingest(t *testing.T, b *postgres.Backend, host, id string, header []byte, from int64, events [][]byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := b.Ingest(ctx, host, id, header, from, events); err != nil {
		t.Fatalf("ingest %s from %d: %v", id, from, err)
	}
}

// follow runs `tail -n 0 -f -s 0.1 file` and returns its output so far, once tail has the file open.
func follow(t *testing.T, file string) *syncBuffer {
	t.Helper()
	var out, errs syncBuffer
	tail := exec.Command("tail", "-n", "0", "-f", "-s", "0.1", file)
	tail.Stdout, tail.Stderr = &out, &errs
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = tail.Process.Signal(syscall.SIGTERM)
		_ = tail.Wait()
	})
	waitFor(t, "tail to open "+file, func() (bool, string) { return openedBy(tail.Process.Pid, file), errs.String() })
	return &out
}

// awaitLine polls out (every 10 ms, so the latency is measured to that) until it holds want, and returns
// how long that took from since.
func awaitLine(t *testing.T, what string, out *syncBuffer, want []byte, since time.Time, logs ...*syncBuffer) time.Duration {
	t.Helper()
	for !strings.Contains(out.String(), string(want)) {
		if time.Since(since) > deadline {
			var l strings.Builder
			for _, b := range logs {
				l.WriteString(b.String())
			}
			t.Fatalf("%s: tail -f did not show %.200s within %v; it printed %q; mount logs:\n%s", what, want, deadline, out.String(), l.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(since)
}

// mountStats is the root stats.json's watch mode.
func watchMode(t *testing.T, mnt string) string {
	t.Helper()
	var st struct {
		Watch string `json:"watch"`
	}
	if err := json.Unmarshal(readFile(t, filepath.Join(mnt, "stats.json")), &st); err != nil {
		t.Fatal(err)
	}
	return st.Watch
}

// followLatency bounds how long a write may take to reach tail -f on another mount: the feed announces it
// at commit and tail polls every 0.1 s, so it takes well under a second (logged); without the feed the
// listing safety net would take a minute. The bound leaves room for a loaded CI machine.
const followLatency = 5 * time.Second

// TestFleetMountsFollowEachOther: two dshfs mounts of one fleet store, one over the unix socket and writable,
// one read-only over TCP as a read-only role with a password. A session created and written through the first is followed
// by tail -f on the second; so is a session another host syncs; by-host/ names where each came from; grep
// -l over every events.jsonl finds what was written; status.json names the store without its password.
func TestFleetMountsFollowEachOther(t *testing.T) {
	srv := pgtest.Shared(t)
	db := srv.NewDatabase(t)
	socketDSN := srv.DSN(db)
	// the reading mount connects as a read-only role, with a password: all a read-only mount needs
	const readerPassword = "reader-secret-9Kq"
	srv.CreateRole(t, db, db+"_reader", readerPassword, true)
	tcpDSN := srv.TCPDSN(db, db+"_reader", readerPassword)
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	const runner = "ci-runner-7"
	b := fleetHost(t, socketDSN, runner)
	synced := syncedLines(t, "synced-1", 150)
	ingest(t, b, runner, "synced-1", synced.header, 0, synced.lines[:synced.split])

	a := startMount(t, socketDSN)
	r := startMount(t, "--read-only", tcpDSN)
	for _, m := range []*mountProc{a, r} {
		if got := watchMode(t, m.dir); got != "listen" {
			t.Errorf("%s: stats.json watch %q, want listen; log:\n%s", m.dir, got, m.log)
		}
	}

	// a session created through one mount appears in the other's sessions/
	mustCtl(t, filepath.Join(a.dir, "ctl"), "create made-here cwd=/home/dev/fleet")
	waitFor(t, "made-here in the other mount's sessions/", func() (bool, string) {
		ls := string(mustRun(t, "ls", filepath.Join(r.dir, "sessions")))
		return strings.Contains(ls, "made-here\n"), ls
	})

	// written through one mount, followed by tail -f on the other
	out := follow(t, filepath.Join(r.dir, "sessions", "made-here", "events.jsonl"))
	const needle = "needle-4f1c9a"
	src := filepath.Join(a.dir, "sessions", "made-here")
	mustAppend(t, src, append(turnLines(1, 0, false), `{"type":"feedback/record","data":{"text":"`+needle+`"}}`))
	mustCtl(t, filepath.Join(src, "ctl"), "flush")
	flushed := time.Now()
	written := readFile(t, filepath.Join(src, "events.jsonl"))
	last := lines(written)[len(lines(written))-1]
	latency := awaitLine(t, "a write through the other mount", out, last, flushed, a.log, r.log)
	t.Logf("a flushed append reached tail -f on the other mount %v after the flush", latency)
	if latency > followLatency {
		t.Errorf("the append reached the other mount's tail -f after %v, want under %v", latency, followLatency)
	}
	waitFor(t, "tail -f to print exactly the written events", func() (bool, string) {
		return out.String() == string(written), out.String()
	})

	// synced by another host, followed too: tail prints the last turn, as the CLI reads it from the JSONL
	// store the session came from
	syncFile := filepath.Join(r.dir, "sessions", "synced-1", "events.jsonl")
	before := readFile(t, syncFile)
	if !bytes.HasPrefix(synced.view, before) || len(before) == len(synced.view) {
		t.Fatalf("the synced turns read %d bytes through the mount, not a prefix of the session's %d", len(before), len(synced.view))
	}
	syncOut := follow(t, syncFile)
	ingest(t, b, runner, "synced-1", synced.header, seqOf(t, synced.lines[synced.split]), synced.lines[synced.split:])
	committed := time.Now()
	viewLines := lines(synced.view)
	latency = awaitLine(t, "a sync by another host", syncOut, viewLines[len(viewLines)-1], committed, a.log, r.log)
	t.Logf("a synced turn reached tail -f %v after its commit", latency)
	if latency > followLatency {
		t.Errorf("the synced turn reached tail -f after %v, want under %v", latency, followLatency)
	}
	waitFor(t, "tail -f to print exactly the synced turn", func() (bool, string) {
		return syncOut.String() == string(synced.view[len(before):]), syncOut.String()
	})

	// by-host/: each session under the host it came from, a link into sessions/
	for _, m := range []*mountProc{a, r} {
		for host, id := range map[string]string{runner: "synced-1", hostname: "made-here"} {
			dir := filepath.Join(m.dir, "by-host", host)
			if ls := string(mustRun(t, "ls", dir)); ls != id+"\n" {
				t.Errorf("ls %s: %q, want %s", dir, ls, id)
			}
			if target, err := os.Readlink(filepath.Join(dir, id)); err != nil || target != "../../sessions/"+id {
				t.Errorf("%s/%s links to %q (%v)", dir, id, target, err)
			}
			for _, elsewhere := range []string{"synced-1", "made-here"} {
				if _, err := os.Lstat(filepath.Join(dir, elsewhere)); elsewhere != id && !os.IsNotExist(err) {
					t.Errorf("%s/%s: %v, want ENOENT (another host's session)", dir, elsewhere, err)
				}
			}
		}
		if got := mustRun(t, "cat", filepath.Join(m.dir, "by-host", runner, "synced-1", "events.jsonl")); !bytes.Equal(got, mustRun(t, "cat", filepath.Join(m.dir, "sessions", "synced-1", "events.jsonl"))) {
			t.Errorf("%s: by-host/%s/synced-1 does not lead to the session", m.dir, runner)
		}
	}

	// grep over every session of the fleet
	g := run(t, r.dir, "sh", "-c", "grep -l "+needle+" sessions/*/events.jsonl")
	if g.code != 0 || string(g.stdout) != "sessions/made-here/events.jsonl\n" {
		t.Errorf("grep -l %s: exit %d, %q %s", needle, g.code, g.stdout, g.stderr)
	}

	// the store is named without its password, wherever the mount names it
	status := readFile(t, filepath.Join(r.dir, "status.json"))
	var st struct {
		Backend, Root string
		Sessions      int
	}
	if err := json.Unmarshal(status, &st); err != nil {
		t.Fatal(err)
	}
	if st.Backend != "postgres" || st.Sessions != 2 || !strings.Contains(st.Root, fmt.Sprintf("127.0.0.1:%d/%s", srv.Port, db)) {
		t.Errorf("status.json: %s", status)
	}
	for what, text := range map[string]string{"status.json": string(status), "the mount's log": r.log.String(),
		"the session's status.json": string(readFile(t, filepath.Join(r.dir, "sessions", "synced-1", "status.json")))} {
		if strings.Contains(text, readerPassword) {
			t.Errorf("%s holds the password:\n%s", what, text)
		}
	}
}

// TestFleetMountAllowOther: a fleet session has no file whose mode could say who reads it; a mount shared
// with --allow-other serves it as the mounting user's, 0600, so another user neither lists nor reads it.
func TestFleetMountAllowOther(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test creates a user and must run as root (as CI does)")
	}
	uid, gid := testUser(t)
	asUser := func(name string, args ...string) result {
		return run(t, "", "setpriv", append([]string{"--reuid=" + uid, "--regid=" + gid, "--clear-groups", "--", name}, args...)...)
	}
	srv := pgtest.Shared(t)
	db := srv.NewDatabase(t)
	dsn := srv.DSN(db)
	b := fleetHost(t, dsn, "ci-runner-7")
	synced := syncedLines(t, "private-1", 50)
	ingest(t, b, "ci-runner-7", "private-1", synced.header, 0, synced.lines)

	// t.TempDir's parents are 0700 root: the user gets a world-traversable mountpoint
	base, err := os.MkdirTemp("", "dshfs-fleet-access-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	startMountAt(t, mnt, nil, []string{dshfsBin(t), "mount", "--read-only", "--allow-other", dsn, mnt})

	file := filepath.Join(mnt, "sessions", "private-1", "events.jsonl")
	// root first: the kernel now caches the names the other user will try
	if r := run(t, "", "cat", file); r.code != 0 || len(r.stdout) == 0 {
		t.Fatalf("the mounting user cannot read the session: %s", r.stderr)
	}
	if got := strings.TrimSpace(string(mustRun(t, "stat", "-c", "%a %u %g", file))); got != "400 0 0" {
		t.Errorf("events.jsonl is %q, want 400 0 0 (the mounting user's, read-only)", got)
	}
	if got := strings.TrimSpace(string(mustRun(t, "stat", "-c", "%a", filepath.Dir(file)))); got != "700" {
		t.Errorf("the session directory is %s, want 700", got)
	}
	denied := func(r result) bool { return r.code != 0 && strings.Contains(string(r.stderr), "Permission denied") }
	if r := asUser("cat", file); !denied(r) {
		t.Errorf("another user reads the fleet session: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := asUser("stat", file); !denied(r) {
		t.Errorf("another user stats the fleet session: exit %d %q", r.code, r.stderr)
	}
	if r := asUser("ls", filepath.Join(mnt, "sessions")); r.code != 0 || len(r.stdout) != 0 {
		t.Errorf("another user lists sessions/: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := asUser("ls", filepath.Join(mnt, "by-host", "ci-runner-7")); !denied(r) {
		t.Errorf("another user lists by-host/ci-runner-7: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	// what is not a session stays readable, as on any mount
	if r := asUser("cat", filepath.Join(mnt, "README")); r.code != 0 {
		t.Errorf("another user cannot read README: %s", r.stderr)
	}
	storeFilesHide(t, mnt, asUser, "private-1", "")
}

// TestFleetMountAfterReconnect: the server goes away under a mount and comes back. What is committed while
// the mount's feed is not listening yet raises no notification it could hear; the feed's reconnect has the
// whole store listed again, so the mount shows it anyway — a grown session to tail -f, a new session in
// sessions/ — and goes on following later writes. A server of its own: stopping the shared one would
// break the tests that run beside this one.
func TestFleetMountAfterReconnect(t *testing.T) {
	srv, err := pgtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	db := srv.NewDatabase(t)
	dsn := srv.DSN(db)
	const runner = "ci-runner-7"
	synced := syncedLines(t, "across", 150)
	b := fleetHost(t, dsn, runner)
	ingest(t, b, runner, "across", synced.header, 0, synced.lines[:synced.split])
	m := startMount(t, "--read-only", dsn)
	file := filepath.Join(m.dir, "sessions", "across", "events.jsonl")
	before := readFile(t, file)
	out := follow(t, file)

	srv.Pause()
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	// at once, before the mount's feed listens again (it retries every second); by a sync run anew, as the
	// old one's connections died with the server
	b = fleetHost(t, dsn, runner)
	ingest(t, b, runner, "across", synced.header, seqOf(t, synced.lines[synced.split]), synced.lines[synced.split:])
	other := syncedLines(t, "while-away", 150)
	ingest(t, b, runner, "while-away", other.header, 0, other.lines[:other.split])
	waitFor(t, "tail -f to print the turn committed across the reconnect", func() (bool, string) {
		return out.String() == string(synced.view[len(before):]), out.String() + "\nmount log:\n" + m.log.String()
	})
	waitFor(t, "the session created across the reconnect in sessions/", func() (bool, string) {
		ls := string(mustRun(t, "ls", filepath.Join(m.dir, "sessions")))
		return ls == "across\nwhile-away\n", ls
	})
	if !strings.Contains(m.log.String(), "listing the store again") {
		t.Errorf("the mount's log does not say its feed reconnected:\n%s", m.log)
	}
	otherFile := filepath.Join(m.dir, "sessions", "while-away", "events.jsonl")
	if got := readFile(t, otherFile); !bytes.HasPrefix(other.view, got) || len(got) == 0 {
		t.Errorf("while-away's events.jsonl (%d bytes) is no prefix of the session it was synced from", len(got))
	}
	// and the feed follows live again: the next write is announced, not found by a safety-net listing
	more := follow(t, otherFile)
	ingest(t, b, runner, "while-away", other.header, seqOf(t, other.lines[other.split]), other.lines[other.split:])
	committed := time.Now()
	viewLines := lines(other.view)
	latency := awaitLine(t, "a sync after the reconnect", more, viewLines[len(viewLines)-1], committed, m.log)
	if latency > followLatency {
		t.Errorf("a sync after the reconnect reached tail -f after %v, want under %v", latency, followLatency)
	}
}

// TestFleetMountReplacedSession: a fleet session deleted and created again (a new incarnation: its
// artifact replaced, in a JSONL store's terms) gets new inodes on a mount that follows the store, as a
// replaced JSONL artifact does: a fresh read shows the new session, a reader of the old inode is not mixed
// with the new bytes.
func TestFleetMountReplacedSession(t *testing.T) {
	srv := pgtest.Shared(t)
	db := srv.NewDatabase(t)
	dsn := srv.DSN(db)
	const runner = "ci-runner-7"
	b := fleetHost(t, dsn, runner)
	old := syncedLines(t, "again", 150)
	ingest(t, b, runner, "again", old.header, 0, old.lines)
	m := startMount(t, "--read-only", dsn)
	file := filepath.Join(m.dir, "sessions", "again", "events.jsonl")
	if got := readFile(t, file); !bytes.Equal(got, old.view) {
		t.Fatalf("events.jsonl differs from the synced session")
	}
	inode := strings.TrimSpace(string(mustRun(t, "stat", "-c", "%i", file)))

	if err := srv.Exec(db, "DELETE FROM sessions WHERE id = 'again'"); err != nil {
		t.Fatal(err)
	}
	renewed := syncedLines(t, "again", 60)
	ingest(t, b, runner, "again", renewed.header, 0, renewed.lines)
	waitFor(t, "the session created again to show through the mount", func() (bool, string) {
		got := readFile(t, file)
		now := strings.TrimSpace(string(mustRun(t, "stat", "-c", "%i", file)))
		return bytes.Equal(got, renewed.view) && now != inode, fmt.Sprintf("%d bytes (the new session: %d), inode %s (was %s)", len(got), len(renewed.view), now, inode)
	})
}

// TestFleetMountFrozenServer: the server stops answering (SIGSTOP of the postmaster and its backends, as
// a network partition looks) under a writable mount. An uncached read answers EIO within the timeout
// instead of blocking; mkdir of a new session answers EIO, never EEXIST; a live session's flush fails
// with its events kept pending; status.json says why. Once the server answers again, the same reads and
// writes succeed and the pending events are written.
func TestFleetMountFrozenServer(t *testing.T) {
	srv, err := pgtest.Start() // its own: freezing the shared one would stall the tests beside this one
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Thaw(); srv.Stop() })
	db := srv.NewDatabase(t)
	dsn := srv.DSN(db)
	const runner = "ci-runner-7"
	synced := syncedLines(t, "cold", 150)
	b := fleetHost(t, dsn, runner)
	ingest(t, b, runner, "cold", synced.header, 0, synced.lines)
	const limit = 2 * time.Second
	cfg := writeConfig(t, "[fleet]\ntimeout = %q\n", limit.String())
	m := startMount(t, "--config", cfg, dsn)
	file := filepath.Join(m.dir, "sessions", "cold", "events.jsonl")
	mustRun(t, "ls", filepath.Join(m.dir, "sessions")) // known to the mount, its events never read
	live := newSessionOnMount(t, m.dir, "live")
	first := turnLines(1, 0, false)
	mustAppend(t, live, first) // the session is live here, its writer lock held
	mustCtl(t, filepath.Join(live, "ctl"), "flush")

	srv.Freeze()
	timed := func(what string, errno syscall.Errno, name string, args ...string) {
		t.Helper()
		start := time.Now()
		r := run(t, "", name, args...)
		took := time.Since(start)
		wantErrno(t, what+" on a frozen server", r, errno)
		if took > 4*limit {
			t.Errorf("%s on a frozen server took %v, [fleet] timeout %v", what, took, limit)
		}
	}
	timed("cat events.jsonl", syscall.EIO, "cat", file)
	timed("mkdir sessions/new", syscall.EIO, "mkdir", filepath.Join(m.dir, "sessions", "new"))
	// a writer's events are accepted, and its flush fails with them kept pending
	second := turnLines(2, int64(len(first)), false)
	if r := writeAppend(t, live, second); r.code != 0 {
		t.Fatalf("append to a live session on a frozen server (accepted in memory): exit %d %s", r.code, r.stderr)
	}
	timed("flush", syscall.EIO, "bash", "-c", `echo flush > "$0"`, filepath.Join(live, "ctl"))
	var status struct {
		Pending   int
		LastError struct{ Errno, Message string }
	}
	if err := json.Unmarshal(readFile(t, filepath.Join(live, "status.json")), &status); err != nil {
		t.Fatal(err)
	}
	if status.Pending != len(second) || status.LastError.Errno != "EIO" || !strings.Contains(status.LastError.Message, "([fleet] timeout)") {
		t.Errorf("the session's status.json after the failed flush: %+v; want %d pending and the timeout as lastError", status, len(second))
	}
	srv.Thaw()

	mustCtl(t, filepath.Join(live, "ctl"), "flush")
	if n := len(lines(readFile(t, filepath.Join(live, "events.jsonl")))); n != len(first)+len(second) {
		t.Errorf("the live session holds %d events after the server resumed, want %d", n, len(first)+len(second))
	}
	if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, synced.view) {
		t.Fatalf("events.jsonl after the server resumed: %v, %d bytes, want the %d synced\nmount log:\n%s", err, len(got), len(synced.view), m.log)
	}
	if root := string(readFile(t, filepath.Join(m.dir, "status.json"))); !strings.Contains(root, "([fleet] timeout)") {
		t.Errorf("status.json does not say why the create failed:\n%s", root)
	}
	mustRun(t, "mkdir", filepath.Join(m.dir, "sessions", "new"))
	if _, err := os.Stat(filepath.Join(m.dir, "sessions", "new", "events.jsonl")); err != nil {
		t.Errorf("the session created after the server resumed: %v", err)
	}
}
