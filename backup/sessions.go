package backup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dshfs/dshfs/convert"
	"github.com/dshfs/dshfs/eventstore"
)

// FromSessions takes a backup of a store that keeps no artifact files — a fleet store, whose sessions are
// rows of a database: every session is converted (package convert: header and stored events identical, a
// crashed session still crashed) into a JSONL store, which is then described like any other backup. The
// result is a JSONL root the harness opens and `verify` proves; source is how the manifest names the store
// (without its password).
//
// Each session is copied from one read of it (one consistent view of its rows); the backup as a whole is
// not one instant of the fleet — the database's own tools (pg_dump) give that. The copy is made in a
// staging directory beside dest and renamed into place when it is whole, so a failed backup (a dropped
// connection) leaves no half-written dest behind. A session the copy cannot hold as stored (the source
// refuses it; a JSONL root cannot represent it, as an id over the harness's limits) does not fail the rest:
// the backup is taken without it, and a *PartialError with m names it.
func FromSessions(ctx context.Context, st *eventstore.Store, source, dest string, opts Options) (m *Manifest, err error) {
	if opts.Create == nil {
		return nil, errors.New("backup: no writable store opener for the copy")
	}
	dest, err = filepath.Abs(dest)
	if err != nil {
		return nil, err
	}
	if err := absentOrEmpty(dest); err != nil {
		return nil, err
	}
	parent := filepath.Dir(dest)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	staging, err := os.MkdirTemp(parent, "."+filepath.Base(dest)+".dshfs-partial-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(staging)
		}
	}()
	if err := os.Chmod(staging, 0o755); err != nil {
		return nil, err
	}
	b, err := opts.Create(staging)
	if err != nil {
		return nil, err
	}
	copts := convert.Options{}
	if opts.Progress != nil {
		copts.Progress = func(done, total, _ int) { opts.Progress(done, total) }
	}
	reports, err := convert.Run(ctx, st, b, copts)
	if c, ok := b.(interface{ Close() error }); ok {
		c.Close()
	}
	if err != nil {
		return nil, err
	}
	// A session the copy cannot hold as stored (refused by the source, not representable in a JSONL root)
	// is left out and named, the others copied; a read or write that failed fails the backup as a whole,
	// since what it would have left out is not known.
	var failed []string
	var skipped []Skipped
	for _, r := range reports {
		switch r.Outcome {
		case convert.Converted:
		case convert.Failed:
			failed = append(failed, fmt.Sprintf("%s %s: %s", r.ID, r.Outcome, r.Reason))
		default:
			skipped = append(skipped, Skipped{ID: r.ID, Reason: string(r.Outcome) + ": " + r.Reason})
		}
	}
	if n := len(failed); n > 0 {
		if n > 3 {
			failed = append(failed[:3], fmt.Sprintf("... and %d more", n-3))
		}
		return nil, fmt.Errorf("%d of %d sessions could not be read or written, so the backup would not hold the store: %s",
			n, len(reports), strings.Join(failed, "; "))
	}
	files := map[string]copied{}
	err = filepath.WalkDir(staging, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(staging, p)
		if err != nil {
			return err
		}
		sum, size, err := hashFile(p)
		if err != nil {
			return err
		}
		if err := syncFile(p); err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = copied{sum: sum, size: size}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The manifest names paths relative to the backup's root, so it is written in the staging directory
	// and moves with it.
	if m, err = describe(ctx, staging, source, files, skipped, opts); err != nil {
		return nil, err
	}
	// a dest made empty beforehand takes the copy as well (os.Rename never replaces a directory); one that
	// is no longer empty stays, and the rename is refused
	if err := os.Remove(dest); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w (the backup was not moved into place)", dest, err)
	}
	if err := os.Rename(staging, dest); err != nil {
		return nil, err
	}
	if err := syncDir(parent); err != nil {
		return m, err
	}
	if len(skipped) > 0 {
		return m, &PartialError{Dest: dest, Skipped: skipped, Of: len(reports)}
	}
	return m, nil
}

// PartialError is a backup taken without some of the store's sessions, which the copy could not hold as
// stored: DEST holds (and its manifest lists) every other session, and names these under "skipped".
type PartialError struct {
	Dest    string
	Skipped []Skipped
	Of      int // the sessions of the store
}

func (e *PartialError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s holds %d of the store's %d sessions; left out, as the copy cannot hold them as stored:", e.Dest, e.Of-len(e.Skipped), e.Of)
	for i, s := range e.Skipped {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " %s (%s)", strconv.Quote(s.ID), s.Reason)
	}
	return b.String()
}

// absentOrEmpty refuses a destination that exists and is not an empty directory.
func absentOrEmpty(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case len(entries) > 0:
		return fmt.Errorf("%s is not empty: a backup or a restore goes into a new, empty directory only", dir)
	}
	return nil
}

// syncFile makes a written file durable before the directory holding it is renamed into place.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
