package spill

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// layout is a spill root and an outside directory, with the root resolved so expectations can name
// canonical paths (t.TempDir itself may sit behind a symlink).
type layout struct {
	root, outside string
	roots         *Roots
}

func newLayout(t *testing.T) layout {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l := layout{root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{l.root, l.outside} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	l.roots = NewRootsExact([]string{l.root})
	return l
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

// guarded runs fn and fails the test if it has not returned within a few seconds: a check that opened a
// FIFO for reading would block forever waiting for a writer.
func guarded(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s blocked: a FIFO was opened", what)
	}
}

func TestResolve(t *testing.T) {
	l := newLayout(t)
	present := filepath.Join(l.root, "session-abc", "0123456789ab-bash.txt")
	write(t, present, "full output\n")
	write(t, filepath.Join(l.outside, "secret.txt"), "not yours")
	deleted := filepath.Join(l.root, "session-abc", "gone.txt")
	write(t, deleted, "x")
	if err := os.Remove(deleted); err != nil {
		t.Fatal(err)
	}
	symlink(t, filepath.Join(l.outside, "secret.txt"), filepath.Join(l.root, "escape.txt"))
	symlink(t, present, filepath.Join(l.root, "alias.txt"))
	symlink(t, present, filepath.Join(l.outside, "into-root.txt"))
	symlink(t, filepath.Join(l.outside, "nothing.txt"), filepath.Join(l.root, "dangling-out.txt"))
	symlink(t, filepath.Join(l.root, "nothing.txt"), filepath.Join(l.root, "dangling-in.txt"))
	symlink(t, l.outside, filepath.Join(l.root, "dirlink"))
	symlink(t, "loop", filepath.Join(l.root, "loop"))
	mkfifo(t, filepath.Join(l.root, "fifo"))
	if err := os.Mkdir(filepath.Join(l.root, "subdir"), 0o700); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name     string
		path     string
		status   Status
		resolved string
		size     int64
	}{
		{"regular file in root", present, Present, present, 12},
		{"deleted file", deleted, Missing, deleted, 0},
		{"never existed, in root", filepath.Join(l.root, "never.txt"), Missing, filepath.Join(l.root, "never.txt"), 0},
		{"never existed, missing dirs in root", filepath.Join(l.root, "a", "b", "c.txt"), Missing, filepath.Join(l.root, "a", "b", "c.txt"), 0},
		{"never existed, outside", filepath.Join(l.outside, "never.txt"), OutsideRoots, filepath.Join(l.outside, "never.txt"), 0},
		{"regular file outside", filepath.Join(l.outside, "secret.txt"), OutsideRoots, filepath.Join(l.outside, "secret.txt"), 0},
		{"symlink in root to outside", filepath.Join(l.root, "escape.txt"), OutsideRoots, filepath.Join(l.outside, "secret.txt"), 0},
		{"symlink in root to inside", filepath.Join(l.root, "alias.txt"), Present, present, 12},
		{"symlink outside to inside", filepath.Join(l.outside, "into-root.txt"), Present, present, 12},
		{"dir symlink in root to outside", filepath.Join(l.root, "dirlink", "secret.txt"), OutsideRoots, filepath.Join(l.outside, "secret.txt"), 0},
		{"dangling symlink to outside", filepath.Join(l.root, "dangling-out.txt"), OutsideRoots, filepath.Join(l.outside, "nothing.txt"), 0},
		{"dangling symlink to inside", filepath.Join(l.root, "dangling-in.txt"), Missing, filepath.Join(l.root, "nothing.txt"), 0},
		{"symlink loop in root", filepath.Join(l.root, "loop"), Missing, "", 0},
		{"FIFO in root is not a regular file", filepath.Join(l.root, "fifo"), OutsideRoots, filepath.Join(l.root, "fifo"), 0},
		{"below a FIFO in root", filepath.Join(l.root, "fifo", "x"), Missing, filepath.Join(l.root, "fifo", "x"), 0},
		{"directory in root", filepath.Join(l.root, "subdir"), OutsideRoots, filepath.Join(l.root, "subdir"), 0},
		{"the root itself", l.root, OutsideRoots, l.root, 0},
		{"unclean but plain path", l.root + "//session-abc/./0123456789ab-bash.txt", Present, present, 12},
		{"dot-dot component", filepath.Join(l.root, "session-abc") + "/../session-abc/0123456789ab-bash.txt", OutsideRoots, "", 0},
		{"relative path", "session-abc/0123456789ab-bash.txt", OutsideRoots, "", 0},
		{"empty path", "", OutsideRoots, "", 0},
		{"NUL byte", present + "\x00", OutsideRoots, "", 0},
		{"root-prefix sibling", l.root + "-evil/x.txt", OutsideRoots, l.root + "-evil/x.txt", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var (
				status   Status
				resolved string
				size     int64
			)
			guarded(t, "Resolve", func() { status, resolved, size = l.roots.Resolve(c.path) })
			if status != c.status || resolved != c.resolved || size != c.size {
				t.Fatalf("Resolve(%q) = %q, %q, %d; want %q, %q, %d", c.path, status, resolved, size, c.status, c.resolved, c.size)
			}
		})
	}
}

func TestRootBehindSymlink(t *testing.T) {
	l := newLayout(t)
	real := filepath.Join(l.outside, "real-root")
	write(t, filepath.Join(real, "f.txt"), "abc")
	link := filepath.Join(l.root, "..", "link-root")
	symlink(t, real, link)
	roots := NewRootsExact([]string{link})
	if st, res, size := roots.Resolve(filepath.Join(link, "f.txt")); st != Present || res != filepath.Join(real, "f.txt") || size != 3 {
		t.Fatalf("via link: %q %q %d", st, res, size)
	}
	if st, _, _ := roots.Resolve(filepath.Join(real, "f.txt")); st != Present {
		t.Fatalf("via real path: %q", st)
	}
	// A root that does not exist yet still classifies would-be paths, and starts serving once created.
	later := filepath.Join(l.outside, "later")
	roots = NewRootsExact([]string{later})
	p := filepath.Join(later, "session-x", "f.txt")
	if st, _, _ := roots.Resolve(p); st != Missing {
		t.Fatalf("before the root exists: %q", st)
	}
	write(t, p, "now")
	if st, _, _ := roots.Resolve(p); st != Present {
		t.Fatalf("after the root exists: %q", st)
	}
	if st, _, _ := NewRootsExact(nil).Resolve(p); st != OutsideRoots {
		t.Fatalf("no roots: %q", st)
	}
	var none *Roots
	if st, _, _ := none.Resolve(p); st != OutsideRoots {
		t.Fatalf("nil roots: %q", st)
	}
}

func TestDefaultRoots(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(base, "tmp")
	home := filepath.Join(base, "dsh-home")
	extra := filepath.Join(base, "extra")
	t.Setenv("TMPDIR", tmp)
	t.Setenv("DSH_HOME", home)
	roots := NewRoots([]string{extra, ""})

	inTemp := filepath.Join(tmp, "dsh-spill-Ab12Cd", "session-5e53dc8acfe4", "2ce9d7a31a38-bash.txt")
	inHome := filepath.Join(home, "spill", "session-1", "f.txt")
	inExtra := filepath.Join(extra, "f.txt")
	otherTemp := filepath.Join(tmp, "dsh-acp-snap-ee77dff02", "session-5e53dc8acfe4", "2ce9d7a31a38-bash.txt")
	looseTemp := filepath.Join(tmp, "dsh-spill-loose.txt")
	for _, p := range []string{inTemp, inHome, inExtra, otherTemp, looseTemp} {
		write(t, p, "data")
	}
	cases := []struct {
		path string
		want Status
	}{
		{inTemp, Present},
		{inHome, Present},
		{inExtra, Present},
		{otherTemp, OutsideRoots},
		{looseTemp, OutsideRoots}, // a file named like a root is not inside one
		{filepath.Join(tmp, "dsh-spill-cleaned", "session-1", "f.txt"), Missing},
		{filepath.Join(tmp, "dsh-spill-Ab12Cd", "later.txt"), Missing},
		{filepath.Join(home, "spill", "nope.txt"), Missing},
		{filepath.Join(home, "sessions", "x.txt"), OutsideRoots},
	}
	for _, c := range cases {
		if got, _, _ := roots.Resolve(c.path); got != c.want {
			t.Errorf("Resolve(%q) = %q, want %q", c.path, got, c.want)
		}
	}
	// The temp pattern is checked at every call: a root made after NewRoots counts.
	fresh := filepath.Join(tmp, "dsh-spill-new123", "s", "f.txt")
	write(t, fresh, "x")
	if got, _, _ := roots.Resolve(fresh); got != Present {
		t.Fatalf("fresh temp root: %q", got)
	}
	dirs := roots.Dirs()
	want := []string{filepath.Join(home, "spill"), extra, filepath.Join(tmp, "dsh-spill-*")}
	if len(dirs) != len(want) {
		t.Fatalf("Dirs() = %q, want %q", dirs, want)
	}
	for i := range want {
		if dirs[i] != want[i] {
			t.Fatalf("Dirs() = %q, want %q", dirs, want)
		}
	}
}

func TestOpen(t *testing.T) {
	l := newLayout(t)
	present := filepath.Join(l.root, "s", "f.txt")
	write(t, present, "the full result")
	write(t, filepath.Join(l.outside, "secret.txt"), "not yours")
	symlink(t, present, filepath.Join(l.root, "alias.txt"))
	symlink(t, filepath.Join(l.outside, "secret.txt"), filepath.Join(l.root, "escape.txt"))
	mkfifo(t, filepath.Join(l.root, "fifo"))
	mkfifo(t, filepath.Join(l.outside, "fifo"))
	symlink(t, filepath.Join(l.outside, "fifo"), filepath.Join(l.root, "fifo-out"))

	for _, p := range []string{present, filepath.Join(l.root, "alias.txt")} {
		f, err := l.roots.Open(p)
		if err != nil {
			t.Fatalf("Open(%q): %v", p, err)
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil || string(b) != "the full result" {
			t.Fatalf("read %q: %q, %v", p, b, err)
		}
	}

	refusals := []struct {
		name string
		path string
		want error
	}{
		{"missing", filepath.Join(l.root, "s", "none.txt"), fs.ErrNotExist},
		{"outside", filepath.Join(l.outside, "secret.txt"), ErrOutsideRoots},
		{"symlink escape", filepath.Join(l.root, "escape.txt"), ErrOutsideRoots},
		{"FIFO in root", filepath.Join(l.root, "fifo"), ErrOutsideRoots},
		{"FIFO outside", filepath.Join(l.outside, "fifo"), ErrOutsideRoots},
		{"symlink in root to a FIFO outside", filepath.Join(l.root, "fifo-out"), ErrOutsideRoots},
		{"relative", "s/f.txt", ErrOutsideRoots},
	}
	for _, c := range refusals {
		t.Run(c.name, func(t *testing.T) {
			var (
				f   *os.File
				err error
			)
			guarded(t, "Open", func() { f, err = l.roots.Open(c.path) })
			if f != nil {
				f.Close()
				t.Fatalf("Open(%q) succeeded", c.path)
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("Open(%q) = %v, want %v", c.path, err, c.want)
			}
			var pe *fs.PathError
			if !errors.As(err, &pe) || pe.Path != c.path {
				t.Fatalf("Open(%q) error %v does not name the path", c.path, err)
			}
		})
	}

	// Status can change between listing and opening: deleted after a present check → ErrNotExist.
	if st, _, _ := l.roots.Resolve(present); st != Present {
		t.Fatalf("precondition: %q", st)
	}
	if err := os.Remove(present); err != nil {
		t.Fatal(err)
	}
	if _, err := l.roots.Open(present); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open after delete = %v", err)
	}
	// Replaced by a symlink to the outside: refused.
	symlink(t, filepath.Join(l.outside, "secret.txt"), present)
	if _, err := l.roots.Open(present); !errors.Is(err, ErrOutsideRoots) {
		t.Fatalf("Open after swap = %v", err)
	}
}

// TestHomeRoot: a store named sessions belongs to the dsh home above it, whose spill directory is a root;
// a store of any other name has no home.
func TestHomeRoot(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		store, root string
		ok          bool
	}{
		{"/home/dev/.dsh/sessions", "/home/dev/.dsh/spill", true},
		{"/tmp/demo/sessions/", "/tmp/demo/spill", true},
		{"/tmp/demo/./x/../sessions", "/tmp/demo/spill", true},
		{"demo/sessions", filepath.Join(wd, "demo", "spill"), true},
		{"/sessions", "/spill", true},
		{"/tmp/demo/store", "", false},
		{"/tmp/demo/sessions.db", "", false},
		{"/", "", false},
		{"", "", false},
	} {
		root, ok := HomeRoot(c.store)
		if root != c.root || ok != c.ok {
			t.Errorf("HomeRoot(%q) = %q, %v; want %q, %v", c.store, root, ok, c.root, c.ok)
		}
	}
	// a file in the home's spill directory is served; one beside the store, outside it, is not
	home := t.TempDir()
	t.Setenv("DSH_HOME", filepath.Join(home, "elsewhere"))
	for _, d := range []string{"sessions", "spill", "other"} {
		if err := os.Mkdir(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	in, out := filepath.Join(home, "spill", "a.txt"), filepath.Join(home, "other", "b.txt")
	for _, p := range []string{in, out} {
		if err := os.WriteFile(p, []byte("spilled"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, _ := HomeRoot(filepath.Join(home, "sessions"))
	roots := NewRoots([]string{root})
	if st, _, size := roots.Resolve(in); st != Present || size != 7 {
		t.Errorf("%s: %s %d, want present", in, st, size)
	}
	if st, _, _ := roots.Resolve(out); st != OutsideRoots {
		t.Errorf("%s: %s, want outside-roots", out, st)
	}
}
