package integration

// Helpers for the mount tests: they build the dshfs and gensession binaries once per test binary, run
// `dshfs mount` as a subprocess (the test process never serves the mount it reads, so a blocked FUSE
// request can never deadlock the reader against itself), and drive the mount with the shell tools users
// use, every call bounded by a timeout so a hung mount fails the test instead of hanging it.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dshfs/dshfs/backup"
	"github.com/dshfs/dshfs/internal/pgtest"
)

// deadline bounds every wait on a condition; generous, because CI machines are slow and -race slows the
// test process further.
const deadline = 30 * time.Second

// toolTimeout bounds one shell tool run against a mount.
const toolTimeout = 60 * time.Second

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// binDir builds dshfs and gensession once per test binary (plain builds: the race detector watches the
// test process, and the binaries under test run as they ship).
func binDir(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "dshfs-integration-bin-")
		if err != nil {
			buildErr = err
			return
		}
		// world-readable, so the unprivileged-user test can run a copy
		if err := os.Chmod(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		buildDir = dir
		for _, b := range []struct{ out, pkg, tags string }{
			{"dshfs", "./cmd/dshfs", ""},
			{"gensession", "./bench/gensession", ""},
			// the same dshfs with the fault-injection hook (crash soak, injected I/O errors)
			{"dshfs-faults", "./cmd/dshfs", "dshfsfaults"},
		} {
			cmd := exec.Command("go", "build", "-tags", b.tags, "-o", filepath.Join(dir, b.out), b.pkg)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildDir
}

// TestMain gives the run a home of its own and removes it and the binaries built for the mount tests
// after. $HOME and $XDG_CACHE_HOME, inherited by every dshfs, CLI and script the tests start, point into
// it, so the mounts' persistent index and anything else a default would put in the user's home stay out
// of it. The Go toolchain the tests build with keeps the user's caches (pinned before HOME moves).
func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "dshfs-integration-home-")
	if err == nil {
		err = pinGoEnv()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Setenv("HOME", home)
	os.Setenv("XDG_CACHE_HOME", filepath.Join(home, ".cache"))
	code := m.Run()
	pgtest.StopShared() // the fleet store tests' private server, if one was started
	os.RemoveAll(home)
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// pinGoEnv sets the Go toolchain's cache and module directories explicitly, as `go env` reports them
// now, so that `go build` keeps using them once HOME points elsewhere.
func pinGoEnv() error {
	vars := []string{"GOCACHE", "GOMODCACHE", "GOPATH"}
	out, err := exec.Command("go", append([]string{"env"}, vars...)...).Output()
	if err != nil {
		return fmt.Errorf("go env: %v", err)
	}
	vals := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(vals) != len(vars) {
		return fmt.Errorf("go env: %q", out)
	}
	for i, v := range vars {
		os.Setenv(v, vals[i])
	}
	return nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

func dshfsBin(t testing.TB) string      { return filepath.Join(binDir(t), "dshfs") }
func faultsBin(t testing.TB) string     { return filepath.Join(binDir(t), "dshfs-faults") }
func gensessionBin(t testing.TB) string { return filepath.Join(binDir(t), "gensession") }

// syncBuffer collects a subprocess's output while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// mountProc is one running `dshfs mount`.
type mountProc struct {
	dir  string
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan struct{} // closed when the process exited; then err is its exit error
	err  error
}

// exited reports whether the process has ended.
func (m *mountProc) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the mount process (if it still runs).
func (m *mountProc) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if m.exited() {
		t.Fatalf("dshfs mount already exited (%v); log:\n%s", m.err, m.log)
	}
	if err := m.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// waitExit waits for the process to end and fails unless it exited with status 0.
func (m *mountProc) waitExit(t testing.TB) {
	t.Helper()
	select {
	case <-m.done:
	case <-time.After(deadline):
		t.Fatalf("dshfs mount did not exit within %v; log:\n%s", deadline, m.log)
	}
	if m.err != nil {
		t.Fatalf("dshfs mount exited with %v; log:\n%s", m.err, m.log)
	}
}

// startMount runs `dshfs mount ARGS... MNT` on a fresh mountpoint and waits until the mount answers. On
// cleanup it unmounts with SIGTERM (unless the test already ended the process), requires exit status 0 and
// checks that nothing is left in /proc/mounts.
func startMount(t testing.TB, args ...string) *mountProc {
	t.Helper()
	mnt := freshMountpoint(t)
	return startMountAt(t, mnt, nil, append(append([]string{dshfsBin(t), "mount"}, args...), mnt))
}

// freshMountpoint is an empty directory for a mount, its path canonical so that it compares equal to what
// /proc/mounts and /proc/PID/fd report.
func freshMountpoint(t testing.TB) string {
	t.Helper()
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(tmp, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	return mnt
}

// startMountAt starts argv (ending in the mountpoint mnt) with an optional wrapper prefix (e.g. setpriv).
func startMountAt(t testing.TB, mnt string, prefix []string, argv []string) *mountProc {
	t.Helper()
	full := append(append([]string(nil), prefix...), argv...)
	m := &mountProc{dir: mnt, log: &syncBuffer{}, done: make(chan struct{})}
	m.cmd = exec.Command(full[0], full[1:]...)
	m.cmd.Stdout = m.log
	m.cmd.Stderr = m.log
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		m.err = m.cmd.Wait()
		close(m.done)
	}()
	t.Cleanup(func() { m.stop(t) })
	waitFor(t, "mount of "+mnt+" to appear in /proc/mounts", func() (bool, string) {
		if m.exited() {
			t.Fatalf("dshfs mount exited before mounting (%v); log:\n%s", m.err, m.log)
		}
		_, ok := mountEntry(t, mnt)
		return ok, m.log.String()
	})
	return m
}

// stop is the cleanup of a mount: SIGTERM, exit status 0, no entry left. A mount that will not go away
// is detached and killed so one failing test cannot leave a hung mount behind for the rest.
func (m *mountProc) stop(t testing.TB) {
	if !m.exited() {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.done:
		case <-time.After(deadline):
			t.Errorf("dshfs mount did not exit within %v of SIGTERM; log:\n%s", deadline, m.log)
			_ = syscall.Unmount(m.dir, syscall.MNT_DETACH)
			_ = m.cmd.Process.Kill()
			<-m.done
			return
		}
		if m.err != nil {
			t.Errorf("dshfs mount exited with %v after SIGTERM; log:\n%s", m.err, m.log)
		}
	}
	if e, ok := mountEntry(t, m.dir); ok {
		t.Errorf("%s still mounted after dshfs exited: %s", m.dir, e)
		_ = syscall.Unmount(m.dir, syscall.MNT_DETACH)
	}
}

// mountStore mounts store (plus extra flags such as --config) and returns the mountpoint.
func mountStore(t testing.TB, store string, extraArgs ...string) (mnt string) {
	t.Helper()
	return startMount(t, append(append([]string(nil), extraArgs...), store)...).dir
}

// mountEntry returns the /proc/mounts line whose mountpoint is dir.
func mountEntry(t testing.TB, dir string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && backup.UnescapeMount(f[1]) == dir {
			return line, true
		}
	}
	return "", false
}

// waitFor polls cond until it holds, failing after deadline with what cond last reported.
func waitFor(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(deadline)
	delay := 5 * time.Millisecond
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s; last state:\n%s", deadline, what, state)
		}
		time.Sleep(delay)
		if delay < 100*time.Millisecond {
			delay *= 2
		}
	}
}

// result is one finished tool run.
type result struct {
	stdout, stderr []byte
	code           int // exit status; -1 when killed by the timeout or a signal
}

// run runs a program with a timeout and returns what it printed and its exit status; it fails t only when
// the program cannot be started or times out.
func run(t testing.TB, dir string, name string, args ...string) result {
	t.Helper()
	return runWithin(t, toolTimeout, dir, name, args...)
}

// runWithin is run with a timeout of its own, for work that is long by nature rather than a tool's run
// against a mount (generating a large store on a loaded machine).
func runWithin(t testing.TB, timeout time.Duration, dir string, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %s: timed out after %v (a hung mount?); stderr: %s", name, strings.Join(args, " "), timeout, errb.String())
	}
	r := result{stdout: out.Bytes(), stderr: errb.Bytes()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

// mustRun runs a program and fails t unless it exits 0 with an empty stderr.
func mustRun(t testing.TB, name string, args ...string) []byte {
	t.Helper()
	r := run(t, "", name, args...)
	if r.code != 0 || len(r.stderr) != 0 {
		t.Fatalf("%s %s: exit %d, stderr:\n%s", name, strings.Join(shortArgs(args), " "), r.code, r.stderr)
	}
	return r.stdout
}

// shortArgs keeps failure messages readable when a tool ran over hundreds of files.
func shortArgs(args []string) []string {
	if len(args) <= 8 {
		return args
	}
	return append(append([]string(nil), args[:8]...), fmt.Sprintf("... (%d more)", len(args)-8))
}

// cli runs the dshfs CLI and returns stdout; want is the exit status the call must have.
func cli(t testing.TB, want int, args ...string) []byte {
	t.Helper()
	r := run(t, "", dshfsBin(t), args...)
	if r.code != want {
		t.Fatalf("dshfs %s: exit %d, want %d; stderr:\n%s", strings.Join(args, " "), r.code, want, r.stderr)
	}
	return r.stdout
}

// storeSum is the sha256 of every file of a store tree (and its path): proof a mount wrote nothing.
func storeSum(t testing.TB, root string) map[string]string {
	t.Helper()
	sums := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			sums[rel+"/"] = "dir"
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		h := sha256.Sum256(b)
		sums[rel] = hex.EncodeToString(h[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

// sameSums fails t when a store changed.
func sameSums(t testing.TB, before, after map[string]string) {
	t.Helper()
	var diffs []string
	for k, v := range before {
		if after[k] != v {
			diffs = append(diffs, fmt.Sprintf("%s: %s -> %s", k, v, after[k]))
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: new (%s)", k, v))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Fatalf("the store changed under a read-only mount:\n%s", strings.Join(diffs, "\n"))
	}
}

// lines splits LF-terminated output into lines, each with its LF.
func lines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, b)
			break
		}
		out = append(out, b[:i+1])
		b = b[i+1:]
	}
	return out
}

// openedBy reports whether process pid holds an open descriptor on path (read from /proc), so a test can
// wait until a reader really has a file open instead of sleeping.
func openedBy(pid int, path string) bool {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && target == path {
			return true
		}
	}
	return false
}

// copyTree copies files and directories (the fixtures hold nothing else) with cp, keeping modes.
func copyTree(t testing.TB, src, dst string) string {
	t.Helper()
	if out, err := exec.Command("cp", "-R", "--preserve=mode", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp %s: %v\n%s", src, err, out)
	}
	return dst
}
