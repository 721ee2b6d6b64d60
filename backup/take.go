package backup

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dshfs/dshfs/eventstore"
)

// quiesceFor is how long a backup through a mount holds its writes at the most; the backup ends the
// quiesce itself as soon as the copy is done.
const quiesceFor = 10 * time.Minute

// FromMount takes a backup through a running dshfs mount of the store: on a writable mount it quiesces the
// store first (every live session flushed, new batches held), copies MNT/store/ — every artifact frozen at
// its last flush, all of them one instant — and ends the quiesce, whatever happened.
func FromMount(ctx context.Context, mnt, dest string, opts Options) (m *Manifest, err error) {
	dest, err = filepath.Abs(dest) // the copy's listing names absolute paths, made relative to dest
	if err != nil {
		return nil, err
	}
	if err := emptyDir(dest); err != nil {
		return nil, err
	}
	ctl := filepath.Join(mnt, "ctl")
	if _, serr := os.Stat(ctl); serr == nil { // a read-only mount has no ctl, and no writer to hold
		if err := writeCtl(ctl, fmt.Sprintf("quiesce %d", int(quiesceFor.Seconds()))); err != nil {
			return nil, fmt.Errorf("quiesce %s: %w (see %s)", mnt, err, filepath.Join(mnt, "status.json"))
		}
		defer func() {
			if rerr := writeCtl(ctl, "resume-writes"); rerr != nil && err == nil {
				err = fmt.Errorf("resume-writes %s: %w", mnt, rerr)
			}
		}()
	}
	store := filepath.Join(mnt, "store")
	var arts []artifact
	err = filepath.WalkDir(store, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(store, p)
		arts = append(arts, artifact{rel: filepath.ToSlash(rel), open: func(context.Context) (io.ReadCloser, int64, time.Time, fs.FileMode, error) {
			f, err := os.Open(p)
			if err != nil {
				return nil, 0, time.Time{}, 0, err
			}
			fi, err := f.Stat() // the open handle's own frozen size
			if err != nil {
				f.Close()
				return nil, 0, time.Time{}, 0, err
			}
			return f, fi.Size(), fi.ModTime(), fi.Mode(), nil
		}})
		return nil
	})
	if err != nil {
		return nil, err
	}
	files, err := copyAll(ctx, dest, arts, opts)
	if err != nil {
		return nil, err
	}
	root, err := MountRoot(mnt)
	if err != nil {
		return nil, fmt.Errorf("the mount at %s: %w", mnt, err)
	}
	return describe(ctx, dest, root, files, nil, opts)
}

// writeCtl writes one command to a ctl file; the errno is the command's outcome.
func writeCtl(ctl, cmd string) error {
	f, err := os.OpenFile(ctl, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(cmd + "\n")
	cerr := f.Close()
	if werr != nil {
		return werr
	}
	return cerr
}

// FromStore takes a backup of a store no mount serves: each session's artifact is copied under its writer
// lock (another dshfs writer waits, or gets EBUSY, meanwhile), frozen at its last complete line or frame.
// The harness takes no lock: a backup of a store it is writing is still whole, but not one instant. A
// SQLite store is copied as one consistent database (sessions.db), one instant whoever writes.
func FromStore(ctx context.Context, st *eventstore.Store, root, dest string, opts Options) (*Manifest, error) {
	dest, err := filepath.Abs(dest) // the copy's listing names absolute paths, made relative to dest
	if err != nil {
		return nil, err
	}
	if err := emptyDir(dest); err != nil {
		return nil, err
	}
	l, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	wait := opts.LockWait
	if wait <= 0 {
		wait = 10 * time.Second
	}
	var arts []artifact
	if name, e, ok := st.Database(); ok {
		// a store that is one database: one consistent copy of it (SQLite's online backup API), which
		// needs no session's lock
		arts = append(arts, artifact{rel: name, open: func(ctx context.Context) (io.ReadCloser, int64, time.Time, fs.FileMode, error) {
			f, art, _, err := st.OpenArtifact(ctx, e.Path)
			if err != nil {
				return nil, 0, time.Time{}, 0, err
			}
			return f, art.Size, art.ModTime, 0o600, nil
		}})
		l.Entries = nil
	}
	for _, e := range l.Entries {
		rel, err := filepath.Rel(root, e.Path)
		if err != nil || !filepath.IsLocal(rel) {
			continue
		}
		e := e
		arts = append(arts, artifact{rel: filepath.ToSlash(rel), open: func(ctx context.Context) (io.ReadCloser, int64, time.Time, fs.FileMode, error) {
			return openFrozen(ctx, st, e, wait)
		}})
		for _, p := range e.Beside {
			rel, err := filepath.Rel(root, p)
			if err != nil || !filepath.IsLocal(rel) {
				continue
			}
			arts = append(arts, artifact{rel: filepath.ToSlash(rel), open: func(ctx context.Context) (io.ReadCloser, int64, time.Time, fs.FileMode, error) {
				return openWhole(ctx, st, p)
			}})
		}
	}
	files, err := copyAll(ctx, dest, arts, opts)
	if err != nil {
		return nil, err
	}
	return describe(ctx, dest, root, files, nil, opts)
}

// openFrozen opens one artifact for copying: a refused session's whole, any other's frozen prefix, read
// while holding the session's writer lock (released when the reader is closed) where dshfs could write it
// (v0 and v4; a v2 or v3 artifact is only ever written by the harness).
func openFrozen(ctx context.Context, st *eventstore.Store, e eventstore.Entry, wait time.Duration) (io.ReadCloser, int64, time.Time, fs.FileMode, error) {
	var lock eventstore.WriterLock
	if e.Refusal == nil && (e.Generation == 0 || e.Generation == 4) {
		deadline := time.Now().Add(wait)
		for {
			l, err := st.Backend().Lock(ctx, e.ID)
			if err == nil {
				lock = l
				break
			}
			if ce := eventstore.AsCommandError(err); ce.Failure != eventstore.Busy || time.Now().After(deadline) {
				return nil, 0, time.Time{}, 0, err
			}
			time.Sleep(50 * time.Millisecond) // another writer's run: they are short
		}
	}
	release := func() {
		if lock != nil {
			lock.Release()
		}
	}
	f, art, _, err := st.OpenArtifact(ctx, e.Path)
	if err != nil {
		release()
		return nil, 0, time.Time{}, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		release()
		return nil, 0, time.Time{}, 0, err
	}
	size, mtime := art.Size, art.ModTime
	if e.Refusal == nil {
		fr, _, err := st.Frozen(ctx, e.ID, e.Path, eventstore.Frozen{})
		if err != nil {
			f.Close()
			release()
			return nil, 0, time.Time{}, 0, err
		}
		if fr.Identity != art.Identity {
			f.Close()
			release()
			return nil, 0, time.Time{}, 0, fmt.Errorf("the artifact was replaced while it was opened")
		}
		size, mtime = fr.Size, fr.ModTime
	}
	return &lockedFile{File: f, release: release}, size, mtime, fi.Mode(), nil
}

// openWhole opens a generation file beside a session's artifact for copying, whole and as it is: the
// harness never writes an older generation again once a newer one is beside it, so it needs no lock, and
// nothing of it is cut.
func openWhole(ctx context.Context, st *eventstore.Store, path string) (io.ReadCloser, int64, time.Time, fs.FileMode, error) {
	f, art, _, err := st.OpenArtifact(ctx, path)
	if err != nil {
		return nil, 0, time.Time{}, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, time.Time{}, 0, err
	}
	return f, art.Size, art.ModTime, fi.Mode(), nil
}

type lockedFile struct {
	*os.File
	release func()
}

func (l *lockedFile) Close() error {
	err := l.File.Close()
	l.release()
	return err
}

// UnescapeMount undoes /proc/mounts' octal escapes in a mountpoint field (\040 for a space).
func UnescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
