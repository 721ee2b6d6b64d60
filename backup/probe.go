package backup

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ProbeTimeout is how long a probe of another dshfs mount (its status.json, a stat through it) is given.
// A live mount answers in milliseconds; one whose server is stopped or wedged never does, and the kernel
// holds the caller of the request in uninterruptible sleep: no signal, not even `timeout`, frees it.
var ProbeTimeout = 3 * time.Second

// ErrUnresponsive is the error of a probe that did not finish within its deadline.
var ErrUnresponsive = errors.New("did not answer")

// Probe runs fn with a deadline and returns its result, or ErrUnresponsive when fn has not returned after
// d; fn runs in its own goroutine and is abandoned there. Only for what cannot block in the kernel
// uninterruptibly: a thread stuck so keeps the process from being reaped after it exits (see probeChild).
func Probe[T any](d time.Duration, fn func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1) // buffered: an abandoned probe that returns late does not block forever
	go func() {
		v, err := fn()
		ch <- result{v, err}
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-t.C:
		var zero T
		return zero, fmt.Errorf("%w within %v", ErrUnresponsive, d)
	}
}

// probeEnv marks a process started by probeChild.
const probeEnv = "DSHFS_PROBE_CHILD"

// init runs a probe child's one operation (before main: nothing else of the program runs in it). It
// prints the result on stdout: the bytes read, or "errno N" / "error TEXT" with exit status 3.
func init() {
	if os.Getenv(probeEnv) != "1" || len(os.Args) != 3 {
		return
	}
	op, path := os.Args[1], os.Args[2]
	var err error
	switch op {
	case "read":
		var b []byte
		if b, err = os.ReadFile(path); err == nil {
			os.Stdout.Write(b)
		}
	case "statfs":
		var sfs syscall.Statfs_t
		err = syscall.Statfs(path, &sfs)
	default:
		err = fmt.Errorf("unknown probe %q", op)
	}
	if err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			fmt.Printf("errno %d", int(errno))
		} else {
			fmt.Printf("error %v", err)
		}
		os.Exit(3)
	}
	os.Exit(0)
}

// probeChild runs one probe of a path through another mount (op "read" or "statfs") in a child process
// of this program, and abandons it after d. A request to a stopped FUSE server can leave its caller in a
// wait no signal ends (a second lookup of a name the first is still looking up waits uninterruptibly),
// and a process with such a thread cannot finish exiting: its parent — a cron job, a shell — would wait
// forever. A child stuck so is killed if it can be, and left to init otherwise; it holds none of this
// process's descriptors (its stdout is a pipe of its own, stdin and stderr /dev/null).
func probeChild(d time.Duration, op, path string) ([]byte, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command(self, op, path)
	cmd.Env = append(os.Environ(), probeEnv+"=1")
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		return nil, err
	}
	type result struct {
		out []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		out, _ := io.ReadAll(r) // EOF when the child exits
		ch <- result{out, cmd.Wait()}
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case res := <-ch:
		if res.err == nil {
			return res.out, nil
		}
		text := string(res.out)
		if n, ok := strings.CutPrefix(text, "errno "); ok {
			if v, err := strconv.Atoi(n); err == nil {
				return nil, &os.PathError{Op: op, Path: path, Err: syscall.Errno(v)}
			}
		}
		if msg, ok := strings.CutPrefix(text, "error "); ok {
			return nil, fmt.Errorf("%s %s: %s", op, path, msg)
		}
		return nil, fmt.Errorf("%s %s: probe: %w", op, path, res.err)
	case <-t.C:
		_ = cmd.Process.Kill() // ends it if its wait is killable; else it lingers until the mount answers
		return nil, fmt.Errorf("%w within %v", ErrUnresponsive, d)
	}
}

// Statfs statfs's a path, probing it in a child process under ProbeTimeout (see probeChild).
func Statfs(path string) error {
	_, err := probeChild(ProbeTimeout, "statfs", path)
	return err
}

// MountEntry is one line of /proc/mounts: the mountpoint (unescaped), the filesystem type and the source.
type MountEntry struct {
	Source, Point, Type string
}

// Dshfs reports whether the entry is a dshfs FUSE mount.
func (e MountEntry) Dshfs() bool {
	return e.Source == "dshfs" && strings.HasPrefix(e.Type, "fuse")
}

// Mounts reads /proc/mounts. The kernel writes that table from its own records, without asking any FUSE
// server, so reading it cannot hang on a stopped mount; it is still read under ProbeTimeout, as every
// probe is, so that no command depends on that.
func Mounts() ([]MountEntry, error) {
	b, err := Probe(ProbeTimeout, func() ([]byte, error) { return os.ReadFile("/proc/mounts") })
	if err != nil {
		return nil, fmt.Errorf("/proc/mounts: %w", err)
	}
	return parseMounts(b), nil
}

func parseMounts(b []byte) []MountEntry {
	var out []MountEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			continue
		}
		out = append(out, MountEntry{Source: f[0], Point: UnescapeMount(f[1]), Type: f[2]})
	}
	return out
}

// MountRoot is the store root a dshfs mount serves, as its status.json names it, read under ProbeTimeout
// (an error wrapping ErrUnresponsive when the mount does not answer).
func MountRoot(mnt string) (string, error) {
	b, err := probeChild(ProbeTimeout, "read", filepath.Join(mnt, "status.json"))
	if err != nil {
		return "", err
	}
	var st struct{ Root string }
	if err := json.Unmarshal(b, &st); err != nil {
		return "", fmt.Errorf("%s: %w", filepath.Join(mnt, "status.json"), err)
	}
	if st.Root == "" {
		return "", fmt.Errorf("%s names no store root", filepath.Join(mnt, "status.json"))
	}
	return st.Root, nil
}

// MountPid is the process serving a dshfs mount, as its stats.json names it, read under ProbeTimeout.
func MountPid(mnt string) (int, error) {
	b, err := probeChild(ProbeTimeout, "read", filepath.Join(mnt, "stats.json"))
	if err != nil {
		return 0, err
	}
	var st struct{ Pid int }
	if err := json.Unmarshal(b, &st); err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Join(mnt, "stats.json"), err)
	}
	if st.Pid <= 0 {
		return 0, fmt.Errorf("%s names no pid", filepath.Join(mnt, "stats.json"))
	}
	return st.Pid, nil
}

// EnclosingMount returns the dshfs mount whose mountpoint is path or lies above it (lexically, on the
// absolute path: resolving symlinks would mean a lookup through that mount), and whether there is one.
func EnclosingMount(mounts []MountEntry, path string) (MountEntry, bool) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return MountEntry{}, false
	}
	var best MountEntry
	found := false
	for _, m := range mounts {
		if !m.Dshfs() {
			continue
		}
		rel, err := filepath.Rel(m.Point, abs)
		if err != nil || !filepath.IsLocal(rel) {
			continue
		}
		if !found || len(m.Point) > len(best.Point) {
			best, found = m, true
		}
	}
	return best, found
}

// FindMount returns the mountpoint of a running dshfs mount serving the store at root ("" when none): a
// dshfs mount of /proc/mounts whose status.json names root. A mount that does not answer within
// ProbeTimeout is skipped, and warn is told which (it cannot be the mount of root: a backup through it
// could not quiesce it anyway).
func FindMount(root string, warn func(format string, a ...any)) (string, error) {
	want, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	mounts, err := Mounts()
	if err != nil {
		return "", err
	}
	for _, m := range mounts {
		if !m.Dshfs() {
			continue
		}
		got, err := MountRoot(m.Point)
		if errors.Is(err, ErrUnresponsive) {
			warn("skipping the dshfs mount at %s: its status.json %v (a stopped or wedged dshfs; if it serves this store, its writers are not quiesced)", m.Point, err)
			continue
		}
		if err != nil {
			continue // not readable by us (another user's mount), or not ours to judge
		}
		if r, err := filepath.EvalSymlinks(got); err == nil && r == want {
			return m.Point, nil
		}
	}
	return "", nil
}
