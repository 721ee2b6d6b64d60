package spill

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Status is what a locator's target is, from dshfs's point of view, at the time of the check.
type Status string

// The three statuses of docs/tree.md's spill index.
const (
	// Present: a regular file under a spill root (after resolving symlinks); it is served.
	Present Status = "present"
	// Missing: nothing is there, but the path would lie under a spill root (typically a temp root that
	// was cleaned up, or a file on another host).
	Missing Status = "missing"
	// OutsideRoots: the path resolves outside every spill root, is not an absolute clean path, or names
	// something under a root that is not a regular file (a FIFO, device, socket or directory); it is
	// never opened.
	OutsideRoots Status = "outside-roots"
)

// TempRootPrefix names the per-process directories the harness's spill-local backend makes with
// mkdtemp(<os tmpdir>/dsh-spill-XXXXXX) when no root is configured (docs/harness.md#spill-notices).
const TempRootPrefix = "dsh-spill-"

// ErrOutsideRoots is the reason Open refuses a path that the spill-root policy does not allow.
var ErrOutsideRoots = errors.New("outside spill roots")

// maxLinkHops bounds how many dangling symlinks canonical follows when placing a missing target, as the
// kernel's ELOOP bound does for lookups.
const maxLinkHops = 40

// Roots is the spill-root policy: the harness's default roots (the dsh-spill-* directories directly in
// os.TempDir(), and $DSH_HOME/spill, default ~/.dsh/spill) plus configured ones. Roots are resolved with
// EvalSymlinks at every check rather than once, because spill roots come and go while a mount runs (the
// harness makes a fresh temp root per process; $DSH_HOME/spill may not exist yet at mount time).
// A Roots is immutable and safe for concurrent use.
type Roots struct {
	dirs    []string // absolute, clean; resolved per check
	tempDir string   // directory whose dsh-spill-* children are roots; "" when not a default
}

// NewRoots returns the default roots plus extra (config [spill] roots); relative extras are taken against
// the working directory and empty ones are ignored.
func NewRoots(extra []string) *Roots {
	r := &Roots{tempDir: absClean(os.TempDir())}
	r.dirs = append(r.dirs, filepath.Join(dshHome(), "spill"))
	r.add(extra)
	return r
}

// HomeRoot is the spill root of the dsh home a store directory belongs to. A dsh home holds its sessions
// in HOME/sessions and its spill files in HOME/spill, which is why $DSH_HOME/spill is a default root; a
// store at HOME/sessions is such a home's store, so HOME/spill is where the files its logs cite lie — also
// when HOME is not this process's $DSH_HOME (another user's home, a copied home, the demo's directory).
// ok is false for a store directory of any other name, whose home is unknown.
func HomeRoot(store string) (root string, ok bool) {
	if store == "" {
		return "", false
	}
	s := absClean(store)
	if filepath.Base(s) != "sessions" || filepath.Dir(s) == s {
		return "", false
	}
	return filepath.Join(filepath.Dir(s), "spill"), true
}

// NewRootsExact returns a policy with exactly roots and no defaults (tests, --demo).
func NewRootsExact(roots []string) *Roots {
	r := &Roots{}
	r.add(roots)
	return r
}

func (r *Roots) add(roots []string) {
	for _, d := range roots {
		if d != "" && !strings.ContainsRune(d, 0) {
			r.dirs = append(r.dirs, absClean(d))
		}
	}
}

// Dirs lists the fixed roots as given (absolute and clean) and, for the defaults, the temp-root pattern;
// it is for status output and logs, not for checks.
func (r *Roots) Dirs() []string {
	if r == nil {
		return nil
	}
	out := append([]string(nil), r.dirs...)
	if r.tempDir != "" {
		out = append(out, filepath.Join(r.tempDir, TempRootPrefix+"*"))
	}
	return out
}

// Resolve classifies path. resolved is the path with every symlink resolved (for a missing target: where
// it would be) and size the file's length when present. Only Lstat and EvalSymlinks touch the filesystem:
// nothing is opened, so a FIFO or device node, inside or outside the roots, cannot block or be triggered.
func (r *Roots) Resolve(path string) (status Status, resolved string, size int64) {
	if !acceptable(path) || r == nil {
		return OutsideRoots, "", 0
	}
	p := filepath.Clean(path)
	c, exists, err := canonical(p, 0)
	if err != nil {
		// Unresolvable (permission denied, a symlink loop): nothing can be served; say whether it would
		// be ours by where the path itself points.
		if r.contains(p) {
			return Missing, "", 0
		}
		return OutsideRoots, "", 0
	}
	if !r.contains(c) {
		return OutsideRoots, c, 0
	}
	if !exists {
		return Missing, c, 0
	}
	fi, err := os.Lstat(c)
	switch {
	case err != nil:
		return Missing, c, 0
	case !fi.Mode().IsRegular():
		return OutsideRoots, c, 0
	}
	return Present, c, fi.Size()
}

// Open opens the content of a present locator for reading. It re-checks the policy at open time (a status
// seen earlier may have changed), opens the resolved path with O_NOFOLLOW|O_NONBLOCK, and then verifies
// with Fstat that it holds a regular file that is the very inode a fresh check finds under a root — so a
// file or directory swapped for a symlink or FIFO between the check and the open is refused, not served.
// Errors wrap fs.ErrNotExist (missing) or ErrOutsideRoots.
func (r *Roots) Open(path string) (*os.File, error) {
	refuse := func(reason error) (*os.File, error) {
		return nil, &fs.PathError{Op: "open", Path: path, Err: reason}
	}
	status, resolved, _ := r.Resolve(path)
	switch status {
	case Missing:
		return refuse(fs.ErrNotExist)
	case OutsideRoots:
		return refuse(ErrOutsideRoots)
	}
	f, err := os.OpenFile(resolved, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return refuse(fmt.Errorf("%w: replaced by a symlink", ErrOutsideRoots))
		}
		if errors.Is(err, fs.ErrNotExist) {
			return refuse(fs.ErrNotExist)
		}
		return refuse(err)
	}
	fail := func(reason error) (*os.File, error) {
		f.Close()
		return refuse(reason)
	}
	fi, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if !fi.Mode().IsRegular() {
		return fail(fmt.Errorf("%w: not a regular file", ErrOutsideRoots))
	}
	status, again, _ := r.Resolve(path)
	if status != Present {
		if status == Missing {
			return fail(fs.ErrNotExist)
		}
		return fail(ErrOutsideRoots)
	}
	now, err := os.Lstat(again)
	if err != nil || !os.SameFile(fi, now) {
		return fail(fmt.Errorf("%w: changed while opening", ErrOutsideRoots))
	}
	return f, nil
}

// acceptable admits only absolute paths without ".." components or NUL bytes: a relative locator would
// depend on dshfs's working directory, and ".." after a symlink means something else to the kernel than
// to a lexical Clean.
func acceptable(path string) bool {
	if !filepath.IsAbs(path) || strings.ContainsRune(path, 0) {
		return false
	}
	for _, part := range strings.Split(path, string(filepath.Separator)) {
		if part == ".." {
			return false
		}
	}
	return true
}

// contains reports whether the canonical path c lies strictly inside a root (a root itself is a
// directory, never a spill file).
func (r *Roots) contains(c string) bool {
	for _, d := range r.dirs {
		if cd, _, err := canonical(d, 0); err == nil && inside(c, cd) {
			return true
		}
	}
	if r.tempDir != "" {
		if td, _, err := canonical(r.tempDir, 0); err == nil && inside(c, td) {
			rest := strings.TrimPrefix(c[len(td):], string(filepath.Separator))
			first, after, ok := strings.Cut(rest, string(filepath.Separator))
			return ok && after != "" && strings.HasPrefix(first, TempRootPrefix)
		}
	}
	return false
}

// inside reports whether p lies strictly below dir (both clean and absolute).
func inside(p, dir string) bool {
	if dir == string(filepath.Separator) {
		return len(p) > 1
	}
	return len(p) > len(dir)+1 && strings.HasPrefix(p, dir) && p[len(dir)] == filepath.Separator
}

// canonical resolves every symlink in the absolute clean path p. When p does not exist it still says
// where p would be: the deepest existing ancestor is resolved and the missing rest appended, and a
// dangling symlink is followed to where its target would be. exists reports whether p itself exists.
// An error means p cannot be resolved for another reason (EACCES, ELOOP).
func canonical(p string, hops int) (c string, exists bool, err error) {
	var rest []string
	cur := p
	for {
		res, err := filepath.EvalSymlinks(cur)
		if err == nil {
			for i := len(rest) - 1; i >= 0; i-- {
				res = filepath.Join(res, rest[i])
			}
			return res, len(rest) == 0, nil
		}
		if !absent(err) {
			return "", false, err
		}
		if fi, lerr := os.Lstat(cur); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			// cur exists but dangles: its would-be location is wherever its target would be.
			if hops >= maxLinkHops {
				return "", false, syscall.ELOOP
			}
			target, rerr := os.Readlink(cur)
			if rerr != nil {
				return "", false, rerr
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(cur), target)
			}
			if !acceptable(target) {
				return "", false, fmt.Errorf("symlink %s: target %q is not a plain absolute path", cur, target)
			}
			res, _, err := canonical(filepath.Clean(target), hops+1)
			if err != nil {
				return "", false, err
			}
			for i := len(rest) - 1; i >= 0; i-- {
				res = filepath.Join(res, rest[i])
			}
			return res, false, nil
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p, false, nil
		}
		rest = append(rest, filepath.Base(cur))
		cur = parent
	}
}

// absent reports errors that mean "no such path": a missing component, or a non-directory in the middle.
func absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// dshHome is the harness home as upstream resolveDshHome computes it (blank $DSH_HOME counts as unset).
func dshHome() string {
	home := os.Getenv("DSH_HOME")
	if strings.TrimSpace(home) == "" {
		h, err := os.UserHomeDir()
		if err != nil || h == "" {
			h = "/"
		}
		return filepath.Join(h, ".dsh")
	}
	if home == "~" || strings.HasPrefix(home, "~/") {
		if h, err := os.UserHomeDir(); err == nil && h != "" {
			home = filepath.Join(h, strings.TrimPrefix(home[1:], "/"))
		}
	}
	return absClean(home)
}

func absClean(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}
