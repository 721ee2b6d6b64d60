// Package backup takes, verifies and restores copies of a store, following the operator's backup
// checklist (docs/backups.md): quiesce and flush before the copy; for JSONL copy each raw artifact
// with its header, frozen at a flush point; inventory the spill locators separately; restore into an
// isolated root and validate continuity before enabling writes; never modify the backup.
//
// A backup directory is itself a store in the harness's own layout (project/session/session.jsonl[.zstd], and
// every other generation file beside a session's artifact, byte for byte),
// beside two files of dshfs's: MANIFEST.json (what was copied, with a SHA-256 per artifact and the events
// each session held) and spill-index.jsonl (every spill locator of every session, with its status at the
// time of the backup); with --with-spill, spill/ holds the present spill files.
package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/spill"
	"github.com/dshfs/dshfs/views"
)

// Names of dshfs's own files in a backup.
const (
	ManifestFile   = "MANIFEST.json"
	SpillIndexFile = "spill-index.jsonl"
	SpillDir       = "spill"
)

// Options are what taking, verifying and restoring need from the caller.
type Options struct {
	// Open opens a store root (the CLI's opener: encoding detected from what the root holds).
	Open func(root string) (*eventstore.Store, error)
	// Create opens a new, empty root for writing (the CLI's opener with the configured compression):
	// FromSessions converts a store without artifact files into it.
	Create func(root string) (eventstore.Backend, error)
	// Spill is the spill-root policy locators are resolved against.
	Spill *spill.Roots
	// WithSpill copies the present spill files into the backup.
	WithSpill bool
	// Progress, when set, is told how many of the artifacts are copied.
	Progress func(done, total int)
	// Version and HarnessRelease are recorded in the manifest.
	Version, HarnessRelease string
	// SourceSessions is how many sessions the source listed when the backup began (as ls counts them): a
	// copy holding fewer is refused, as a backup that missed some.
	SourceSessions int
	// AllowEmpty lets Restore restore a backup of no sessions.
	AllowEmpty bool
	// Force lets Restore restore a backup that does not verify; Warn is told each problem.
	Force bool
	// Warn, when set, is told what a command goes ahead despite.
	Warn func(format string, a ...any)
	// LockWait is how long a session whose writer lock another process holds is waited for (default 10 s).
	LockWait time.Duration
}

// artifact is one file to copy: its path relative to the root and how to read its frozen bytes.
type artifact struct {
	rel  string
	open func(ctx context.Context) (io.ReadCloser, int64, time.Time, fs.FileMode, error) // bytes, size, mtime, mode
}

// emptyDir refuses a destination that exists and is not an empty directory, and creates it otherwise.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	case err != nil:
		return err
	case len(entries) > 0:
		return fmt.Errorf("%s is not empty: a backup or a restore goes into a new, empty directory only", dir)
	}
	return nil
}

// copyFile writes the n bytes of r to dst (through a temp file and a rename, so a crash leaves no torn
// file under the final name), with mtime and mode, and returns their SHA-256.
func copyFile(dst string, r io.Reader, n int64, mtime time.Time, mode fs.FileMode) (string, error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	tmp := dst + ".dshfs-partial"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode.Perm()|0o200)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	copied, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, n))
	if err == nil && copied != n {
		err = fmt.Errorf("%s: read %d of %d bytes", dst, copied, n)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, mode.Perm())
	}
	if err == nil {
		err = os.Chtimes(tmp, mtime, mtime)
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashFile is the SHA-256 and size of a file.
func hashFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// copyAll copies every artifact into dest and returns their checksums and sizes by relative path.
func copyAll(ctx context.Context, dest string, arts []artifact, opts Options) (map[string]copied, error) {
	out := map[string]copied{}
	for i, a := range arts {
		if opts.Progress != nil {
			opts.Progress(i, len(arts))
		}
		r, n, mtime, mode, err := a.open(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.rel, err)
		}
		sum, err := copyFile(filepath.Join(dest, filepath.FromSlash(a.rel)), r, n, mtime, mode)
		r.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.rel, err)
		}
		out[a.rel] = copied{sum: sum, size: n}
	}
	if opts.Progress != nil {
		opts.Progress(len(arts), len(arts))
	}
	return out, nil
}

type copied struct {
	sum  string
	size int64
}

// describe reads the copied store back and writes the manifest, the spill index and (WithSpill) the
// present spill files.
// skipped are the sessions of the store left out of the copy, recorded in the manifest.
func describe(ctx context.Context, dest, source string, files map[string]copied, skipped []Skipped, opts Options) (*Manifest, error) {
	st, err := opts.Open(dest)
	if err != nil {
		return nil, err
	}
	l, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	m := &Manifest{DshfsVersion: opts.Version, HarnessRelease: opts.HarnessRelease, Backend: st.Backend().Name(),
		FormatVersion: event.FormatVersion, CreatedAt: time.Now().UTC(), Source: source, Skipped: skipped}
	var index []byte
	for _, e := range l.Entries {
		rel, err := filepath.Rel(dest, e.Path)
		if err != nil {
			return nil, err
		}
		rel = filepath.ToSlash(rel)
		c, ok := files[rel]
		if !ok {
			continue
		}
		s := SessionEntry{ID: e.ID, Path: rel, Bytes: c.size, SHA256: c.sum, DurableSeq: -1}
		for _, p := range e.Beside {
			prel, err := filepath.Rel(dest, p)
			if err != nil {
				return nil, err
			}
			prel = filepath.ToSlash(prel)
			if pc, ok := files[prel]; ok {
				s.Beside = append(s.Beside, FileEntry{Path: prel, Bytes: pc.size, SHA256: pc.sum})
			}
		}
		if e.Refusal != nil {
			s.Refusal = e.Refusal.Error()
			m.Sessions = append(m.Sessions, s)
			continue
		}
		sess, err := views.Load(ctx, st, e.ID, views.Options{Spill: opts.Spill, Entry: &e})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.ID, err)
		}
		if sess.Refusal != nil {
			s.Refusal = sess.Refusal.Error()
			m.Sessions = append(m.Sessions, s)
			continue
		}
		s.Events = int64(sess.EventCount())
		s.DurableSeq = s.Events - 1
		rows, err := sess.SpillRows()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.ID, err)
		}
		for _, r := range rows {
			loc := Locator{Locator: r.Locator, Status: string(r.Status), Seq: r.Seq, CallID: r.CallID, Shadowed: r.Shadowed, Bytes: -1}
			if r.Status == spill.Present {
				loc.Bytes = r.Bytes
				if opts.WithSpill {
					if loc.File, err = copySpill(dest, e.ID, r, opts.Spill); err != nil {
						return nil, fmt.Errorf("%s: spill %s: %w", e.ID, r.Locator, err)
					}
				}
			}
			s.Spill = append(s.Spill, loc)
			index = append(index, loc.indexLine(e.ID)...)
		}
		m.Sessions = append(m.Sessions, s)
	}
	sort.Slice(m.Sessions, func(i, j int) bool { return m.Sessions[i].Path < m.Sessions[j].Path })
	if len(m.Sessions)+len(skipped) < opts.SourceSessions {
		return nil, fmt.Errorf("the copy holds %d sessions, the store listed %d when the backup began: %s is incomplete; take the backup again into a new directory", len(m.Sessions), opts.SourceSessions, dest)
	}
	e := m.expected()
	m.Expected = &e
	if err := writeFileSync(filepath.Join(dest, SpillIndexFile), index); err != nil {
		return nil, err
	}
	if err := writeFileSync(filepath.Join(dest, ManifestFile), m.JSON()); err != nil {
		return nil, err
	}
	return m, nil
}

// copySpill copies one present spill file (opened through the spill roots, so nothing outside them is
// read) into dest/spill/<session>/<row file name>, and returns that path relative to dest.
func copySpill(dest, id string, r spill.Row, roots *spill.Roots) (string, error) {
	f, err := roots.Open(r.Locator)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	rel := filepath.ToSlash(filepath.Join(SpillDir, spill.NameSegment(id), spill.FileName(r.Row, r.CallID)))
	if _, err := copyFile(filepath.Join(dest, filepath.FromSlash(rel)), f, fi.Size(), fi.ModTime(), 0o644); err != nil {
		return "", err
	}
	return rel, nil
}

func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
