package backup

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ProbeTimeout is how long a probe of another dshfs mount (its status.json, a stat through it) is given.
// A live mount answers in milliseconds; one whose server is stopped or wedged never does, and the kernel
// holds the caller of the request in uninterruptible sleep: no signal, not even `timeout`, frees it.
var ProbeTimeout = 3 * time.Second

// ErrUnresponsive is the error of a probe that did not finish within its deadline.
var ErrUnresponsive = errors.New("did not answer")

// Probe runs fn with a deadline and returns its result, or ErrUnresponsive when fn has not returned after
// d. A syscall blocked on a FUSE server cannot be interrupted, so fn runs in its own goroutine and is
// abandoned there: its thread stays blocked, but the process still exits (os.Exit ends every thread; a
// request the stopped server never read is withdrawn when its caller is killed — shown by
// TestStoppedMount in integration/). Callers probe each mount once and skip it afterwards, so abandoned
// goroutines do not pile up.
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
	b, err := Probe(ProbeTimeout, func() ([]byte, error) { return os.ReadFile(filepath.Join(mnt, "status.json")) })
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
