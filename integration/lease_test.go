package integration

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dshfs/dshfs/internal/harness"
	"github.com/dshfs/dshfs/internal/helperproc"
)

// leaseHolderEnv makes this test binary a lease holder (init below): a process holding the write lease of
// a session directory as a harness of 0.1.5 does — session.lock opened for writing, flock(LOCK_EX|LOCK_NB)
// — until its stdin closes.
const leaseHolderEnv = "DSHFS_TEST_HOLD_LEASE"

func init() {
	dir := os.Getenv(leaseHolderEnv)
	if dir == "" {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, "session.lock"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err == nil {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// holdLease has another process hold the lease of session directory dir until the returned func is called
// (or the test ends).
func holdLease(t *testing.T, dir string) (release func()) {
	t.Helper()
	line, release := helperproc.Start(t, leaseHolderEnv, dir)
	if line != "ready" {
		t.Fatalf("lease holder: %q", line)
	}
	return release
}

// linesFile writes lines as an input file for `dshfs append`.
func linesFile(t *testing.T, lines []string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// wantRefused checks that a CLI write exited 1 saying text.
func wantRefused(t *testing.T, r result, what, text string) {
	t.Helper()
	if r.code != 1 || !strings.Contains(string(r.stderr), text) {
		t.Errorf("%s: exit %d %s; want exit 1 saying %q", what, r.code, r.stderr, text)
	}
}

const ownedText = "held by another process (session.lock)"

// TestWriteLeaseHeld: while another process holds a session's write lease (a harness of 0.1.5 writing it),
// every write path — the CLI's append, resume, fork and compact, and the mount's append file and ctl
// resume and compact — is refused with EBUSY and the harness's SessionAlreadyOwnedError text, status.json
// and the mount's log say so, and not one byte of the store changes; once the holder is gone, writes work.
func TestWriteLeaseHeld(t *testing.T) {
	t.Parallel()
	store, _ := emptyStore(t, "zstd")
	cli(t, 0, "create", "--cwd", "/srv", store, "s")
	turn := turnLines(1, 0, false)
	cli(t, 0, "append", store, "s", linesFile(t, turn))
	m := startMount(t, "--config", writeConfig(t, "[writer]\nbatch_window = \"1h\"\n"), store)
	s := filepath.Join(m.dir, "sessions", "s")
	release := holdLease(t, filepath.Dir(artifactOf(t, store, "s")))
	before := storeSum(t, store)

	next := turnLines(2, int64(len(turn)), false)
	for _, args := range [][]string{{"append", store, "s", linesFile(t, next)}, {"resume", store, "s"}, {"fork", store, "s"}, {"compact", store, "s"}} {
		wantRefused(t, run(t, "", dshfsBin(t), args...), "dshfs "+args[0], ownedText)
	}
	wantErrno(t, "append through the mount", writeAppend(t, s, next), syscall.EBUSY)
	if st := statusOf(t, s); st.lastErrorCode() != "SESSION_ALREADY_OWNED" || !strings.Contains(st.LastError.Message, `session "s" is already owned by an active write handle`) ||
		!strings.Contains(st.LastError.Message, ownedText) {
		t.Errorf("status.json lastError %+v", st.LastError)
	}
	for _, c := range []string{"resume", "compact"} {
		wantErrno(t, "ctl "+c, ctl(t, filepath.Join(s, "ctl"), c), syscall.EBUSY)
		if st := statusOf(t, s); st.LastError == nil || !strings.Contains(st.LastError.Message, ownedText) {
			t.Errorf("ctl %s: lastError %+v", c, st.LastError)
		}
	}
	// the mount logs a refusal as it answers it: the line may land just after the errno does
	waitFor(t, "the refusal in the mount's log", func() (bool, string) {
		return strings.Contains(m.log.String(), "SESSION_ALREADY_OWNED"), m.log.String()
	})
	sameSums(t, before, storeSum(t, store))

	release()
	mustAppend(t, s, next)
	mustCtl(t, filepath.Join(s, "ctl"), "flush")
	stopAndVerify(t, m, store)
}

// TestWriteLeaseBetweenMounts: two dshfs processes exclude each other through the lease: while one mount
// writes a session, the other mount's append and the CLI are refused (EBUSY, SESSION_ALREADY_OWNED) and
// nothing is written; after the first closes it, the second writes.
func TestWriteLeaseBetweenMounts(t *testing.T) {
	t.Parallel()
	store, _ := emptyStore(t, "none")
	cfg := writeConfig(t, "[writer]\ncompression = \"none\"\nbatch_window = \"1h\"\n")
	a := startMount(t, "--config", cfg, store)
	b := startMount(t, "--config", cfg, store)
	sa := newSessionOnMount(t, a.dir, "s")
	turn := turnLines(1, 0, false)
	mustAppend(t, sa, turn)
	mustCtl(t, filepath.Join(sa, "ctl"), "flush") // a is the live writer, holding the lease
	sb := filepath.Join(b.dir, "sessions", "s")
	waitFor(t, "the session in the second mount", func() (bool, string) {
		_, err := os.Stat(filepath.Join(sb, "append"))
		return err == nil, fmt.Sprint(err)
	})
	before := storeSum(t, store)
	next := turnLines(2, int64(len(turn)), false)
	wantErrno(t, "append through the second mount", writeAppend(t, sb, next), syscall.EBUSY)
	if st := statusOf(t, sb); st.lastErrorCode() != "SESSION_ALREADY_OWNED" {
		t.Errorf("second mount's lastError %+v", st.LastError)
	}
	wantRefused(t, run(t, "", dshfsBin(t), "append", store, "s", linesFile(t, next)), "dshfs append", ownedText)
	sameSums(t, before, storeSum(t, store))

	mustCtl(t, filepath.Join(sa, "ctl"), "close")
	mustAppend(t, sb, next)
	mustCtl(t, filepath.Join(sb, "ctl"), "flush")
	a.stop(t)
	stopAndVerify(t, b, store)
}

// TestInteropLiveWriter: the harness's own rc.8 packages write a session live (livewriter.mjs: turns
// appended and flushed every ~150 ms, no lease, the next seq numbered in memory). Meanwhile every dshfs
// write path — an append through the mount, ctl resume, the CLI's append, resume and compact — is refused
// as live elsewhere, and accepts nothing; afterwards the harness's inspect() and `dshfs check` both open the
// session with exactly the harness's events.
func TestInteropLiveWriter(t *testing.T) {
	t.Parallel()
	h := harness.Get(t)
	writer, inspect := h.Script(t, "livewriter.mjs"), h.Script(t, "inspect.mjs")
	store, _ := emptyStore(t, "zstd")
	m := startMount(t, "--config", writeConfig(t, "[writer]\nbatch_window = \"50ms\"\n"), store)
	const turns = 16
	cmd := exec.Command(h.Node, writer, store, "live", fmt.Sprint(turns), "300", "--modules", filepath.Join(h.Cache, "node_modules"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	said := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			said <- sc.Text()
		}
		close(said)
	}()
	if line := <-said; line != "ready" {
		t.Fatalf("livewriter: %q", line)
	}
	s := filepath.Join(m.dir, "sessions", "live")
	waitFor(t, "the live session in the mount", func() (bool, string) {
		_, err := os.Stat(filepath.Join(s, "append"))
		return err == nil, fmt.Sprint(err)
	})

	const text = `session "live" is live elsewhere: `
	extra := []string{`{"type":"plugin/x","data":{},"ignorable":true}`}
	rounds := 0
	for running := true; running && rounds < 3; {
		wantErrno(t, "append through the mount", writeAppend(t, s, extra), syscall.EBUSY)
		if st := statusOf(t, s); st.lastErrorCode() != "LIVE_ELSEWHERE" || !strings.Contains(st.LastError.Message, text) {
			t.Errorf("status.json after the mount's append: %+v", st.LastError)
		}
		wantErrno(t, "ctl resume", ctl(t, filepath.Join(s, "ctl"), "resume"), syscall.EBUSY)
		if st := statusOf(t, s); st.LastError == nil || !strings.Contains(st.LastError.Message, text) {
			t.Errorf("status.json after ctl resume: %+v", st.LastError)
		}
		for _, args := range [][]string{{"append", store, "live", linesFile(t, extra)}, {"resume", store, "live"}, {"compact", store, "live"}} {
			wantRefused(t, run(t, "", dshfsBin(t), args...), "dshfs "+args[0], text)
		}
		rounds++
		select {
		case line := <-said:
			if !strings.HasPrefix(line, "done ") {
				t.Fatalf("livewriter: %q", line)
			}
			running = false
		default:
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("livewriter: %v", err)
	}
	want := 5 * turns
	if line, ok := <-said; ok && line != fmt.Sprint("done ", want) {
		t.Fatalf("livewriter: %q, want done %d", line, want)
	}
	t.Logf("%d rounds of dshfs writes refused while the harness wrote", rounds)

	r := run(t, "", h.Node, inspect, store, "live", "events")
	if r.code != 0 || strings.Contains(string(r.stdout), "ERROR") || len(lines(r.stdout)) != want {
		t.Fatalf("the harness's inspect(): exit %d, %d events (want %d)\n%s%s", r.code, len(lines(r.stdout)), want, r.stdout, r.stderr)
	}
	if strings.Contains(string(r.stdout), "plugin/x") || strings.Contains(string(r.stdout), "session/end-seed") {
		t.Errorf("a dshfs write reached the session:\n%s", r.stdout)
	}
	cli(t, 0, "check", store)
	if seqs := seqsOf(t, cli(t, 0, "cat", store, "live")); !contiguous(seqs) || len(seqs) != want {
		t.Errorf("dshfs reads seqs %v", seqs)
	}
}

// TestWriteForeignChangeAcknowledged: a change another process made within [writer] foreign_quiet refuses
// every write as live elsewhere, saying when and how to override it; the CLI's --force, or the mount's
// rescan after the refusal, acknowledges it, and the next write goes on after the foreign event.
func TestWriteForeignChangeAcknowledged(t *testing.T) {
	t.Parallel()
	store, _ := emptyStore(t, "none")
	cfg := writeConfig(t, "[writer]\ncompression = \"none\"\nbatch_window = \"1h\"\nforeign_quiet = \"10m\"\n")
	cli(t, 0, "create", "--config", cfg, store, "s")
	turn := turnLines(1, 0, false)
	cli(t, 0, "append", "--config", cfg, store, "s", linesFile(t, turn))
	art := artifactOf(t, store, "s")
	foreign := func(seq int) {
		afterStamp(t, filepath.Dir(art))
		line := fmt.Sprintf(`{"type":"plugin/foreign","seq":%d,"time":1,"data":{},"ignorable":true}`, seq)
		run(t, "", "sh", "-c", `echo "$0" >> "$1"`, line, art)
	}
	foreign(len(turn))
	next := turnLines(2, int64(len(turn)+1), false)
	before := storeSum(t, store)
	for _, args := range [][]string{{"append", store, "s", linesFile(t, next)}, {"resume", store, "s"}, {"compact", store, "s"}} {
		r := run(t, "", dshfsBin(t), append([]string{args[0], "--config", cfg}, args[1:]...)...)
		wantRefused(t, r, "dshfs "+args[0], "session.jsonl changed ")
		wantRefused(t, r, "dshfs "+args[0], "ago by another process")
		wantRefused(t, r, "dshfs "+args[0], "--force")
	}
	sameSums(t, before, storeSum(t, store))
	cli(t, 0, "append", "--config", cfg, "--force", store, "s", linesFile(t, next))

	m := startMount(t, "--config", cfg, store)
	s := filepath.Join(m.dir, "sessions", "s")
	seq := 2*len(turn) + 1
	foreign(seq)
	third := turnLines(3, int64(seq+1), false)
	wantErrno(t, "append through the mount", writeAppend(t, s, third), syscall.EBUSY)
	if st := statusOf(t, s); st.lastErrorCode() != "LIVE_ELSEWHERE" || !strings.Contains(st.LastError.Message, "rescan") {
		t.Errorf("status.json lastError %+v", st.LastError)
	}
	mustCtl(t, filepath.Join(m.dir, "ctl"), "rescan")
	mustAppend(t, s, third)
	mustCtl(t, filepath.Join(s, "ctl"), "flush")
	m.stop(t)
	if seqs := seqsOf(t, cli(t, 0, "cat", store, "s")); !contiguous(seqs) || len(seqs) != 3*len(turn)+2 {
		t.Errorf("seqs after the acknowledged writes: %v", seqs)
	}
	cli(t, 0, "check", store)
}

// afterStamp waits until the file clock has passed the stamp dshfs left on the session directory's lease
// file: file times are coarse (a few ms), and a foreign change in the very tick of dshfs's own last write
// cannot be told from it by time (docs/writing.md).
func afterStamp(t *testing.T, dir string) {
	t.Helper()
	stamp, err := os.Stat(filepath.Join(dir, "session.lock"))
	if err != nil {
		return // no stamp: any change is newer
	}
	probe := filepath.Join(t.TempDir(), "tick")
	waitFor(t, "the file clock to pass the lease's stamp", func() (bool, string) {
		if err := os.WriteFile(probe, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(probe)
		return err == nil && fi.ModTime().After(stamp.ModTime()), ""
	})
}
