package jsonl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/internal/namecodec"
	"github.com/dshfs/dshfs/internal/procscan"
)

// LeaseName is the harness's write lease file in a session's directory (0.1.5 and later: its lease.ts).
// A harness writer holds flock(LOCK_EX|LOCK_NB) on it from opening a session for writing until it
// closes; dshfs takes the same lock before every write, so the two never write a session at once. The
// file is never deleted: the next locker verifies its inode against it.
const LeaseName = "session.lock"

// lease is a held write lease: the descriptor whose close releases the flock.
type lease struct{ f *os.File }

func (l *lease) Release() error { return l.f.Close() }

// Lease takes session id's write lease on `<session dir>/session.lock` (eventstore.Leaser).
func (b *Backend) Lease(ctx context.Context, id string) (eventstore.WriterLock, error) {
	path, err := b.find(id)
	if err == nil {
		// refused before the lease file is made: no write to a later generation, so nothing in its directory
		err = b.requireWritable(path)
	}
	if err != nil {
		return nil, err
	}
	return acquireLease(filepath.Dir(path), id)
}

// acquireLease takes the lease of the session directory dir with the harness's protocol: open the lock file
// for writing (created if absent, with the harness's mode 0666 less the umask), flock it exclusively
// without waiting, then check that the locked descriptor is still the file at the path — a lock on an
// inode that was unlinked and recreated meanwhile proves nothing, so that is tried again, as the harness
// does, three times. The file is opened without O_TRUNC (the harness truncates an always empty file):
// its mtime is the stamp dshfs leaves after each write (stampLease), which must survive the next locker.
func acquireLease(dir, id string) (eventstore.WriterLock, error) {
	path := filepath.Join(dir, LeaseName)
	for range 3 {
		f, err := openLease(path)
		if err != nil {
			return nil, &eventstore.IOError{Err: err}
		}
		holder, err := eventstore.TryFlock(f)
		if err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, owned(id, holder)
			}
			return nil, &eventstore.IOError{Err: err}
		}
		held, herr := f.Stat()
		cur, cerr := os.Stat(path)
		if herr == nil && cerr == nil && os.SameFile(held, cur) {
			return &lease{f: f}, nil
		}
		f.Close()
		if herr != nil || (cerr != nil && !errors.Is(cerr, os.ErrNotExist)) {
			return nil, &eventstore.IOError{Err: errors.Join(herr, cerr)}
		}
	}
	return nil, owned(id, 0)
}

// openLease opens the lease file for writing, creating it if absent. A file this call creates carries the
// epoch as its mtime, not now: it is a stamp of nothing, so that it cannot pass off a change made just
// before (by a writer without the lease) as dshfs's own.
func openLease(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if errors.Is(err, os.ErrExist) {
		return os.OpenFile(path, os.O_WRONLY, 0)
	}
	if err != nil {
		return nil, err
	}
	epoch := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {}}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, path, epoch, 0); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// owned is the refusal of a session whose lease another process holds: the harness's
// SessionAlreadyOwnedError text, then what dshfs saw.
func owned(id string, holder int) error {
	who := ""
	if holder > 0 {
		who = ", pid " + strconv.Itoa(holder)
		if c := procscan.Comm(holder); c != "" {
			who += " (" + c + ")"
		}
	}
	return &eventstore.CommandError{Failure: eventstore.Busy, Code: eventstore.CodeOwned,
		Message: `session "` + id + `" is already owned by an active write handle: its write lease is held by another process (` +
			LeaseName + ")" + who + "; nothing was written, and writes are refused until that writer closes the session"}
}

// stampLease marks the session directory's lease file as changed now, after a write this process made
// under the lease: an artifact no newer than its lease file was last written (or acknowledged) by dshfs,
// while a newer one was changed by a writer that takes no lease — a harness before 0.1.5, which only
// ever writes the artifact. The stamp comes from the same clock as the artifact's mtime.
func stampLease(dir string) error {
	now := []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_NOW}}
	err := unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(dir, LeaseName), now, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil // written without the lease (a test's own backend use): nothing to stamp
	}
	return err
}

// Acknowledge accepts every change made to session id so far (eventstore.LiveProber): its lease file is
// stamped (created if absent, never locked: a harness holding the lease still refuses every write).
func (b *Backend) Acknowledge(ctx context.Context, id string) error {
	path, err := b.find(id)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(filepath.Dir(path), LeaseName), os.O_WRONLY|os.O_CREATE, 0o666)
	if err != nil {
		return &eventstore.IOError{Err: err}
	}
	f.Close()
	return stampLease(filepath.Dir(path))
}

// LiveElsewhere looks for a writer of the session that takes no lease (eventstore.LiveProber): a change
// since the state the caller last saw, or — when it saw none — a change within the quiet period newer
// than the lease file's stamp; and, when asked, another process holding the artifact open for writing.
// An rc.8 harness opens the artifact (O_WRONLY|O_APPEND) only while it writes a batch and closes it
// after the fsync, holding no lock: between its batches, the change it made is all there is to see.
func (b *Backend) LiveElsewhere(ctx context.Context, c eventstore.LiveCheck) error {
	path := c.Path
	if path == "" {
		var err error
		if path, err = b.find(c.ID); err != nil {
			return nil // the read that follows reports it
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	name := filepath.Base(path)
	cur := artifactOf(fi)
	if c.Expect.Token != "" && cur.Token != c.Expect.Token {
		return liveElsewhere(c.ID, fmt.Sprintf("%s changed under this writer (another process wrote it: revision %s became %s)", name, c.Expect.Token, cur.Token), true)
	}
	if c.Expect.Token == "" && c.Quiet > 0 {
		if age := time.Since(fi.ModTime()); age < c.Quiet && !stamped(filepath.Dir(path), fi) {
			return liveElsewhere(c.ID, fmt.Sprintf("%s changed %.1f s ago by another process (a quiet period of [writer] foreign_quiet = %s has not passed)", name, max(age, 0).Seconds(), c.Quiet), true)
		}
	}
	if c.Scan {
		if ws := procscan.OpenWriters(path, fi); len(ws) > 0 {
			return liveElsewhere(c.ID, "pid "+strconv.Itoa(ws[0].PID)+" ("+ws[0].Comm+") has "+name+" open for writing", false)
		}
	}
	return nil
}

// stamped reports whether the lease file's stamp is at least as new as the artifact: its last change was
// made or acknowledged by dshfs.
func stamped(dir string, art os.FileInfo) bool {
	li, err := os.Stat(filepath.Join(dir, LeaseName))
	if err != nil {
		return false
	}
	ls, ok1 := li.Sys().(*syscall.Stat_t)
	as, ok2 := art.Sys().(*syscall.Stat_t)
	if !ok1 || !ok2 {
		return !li.ModTime().Before(art.ModTime())
	}
	return ls.Mtim.Nano() >= as.Mtim.Nano()
}

// liveElsewhere is the refusal of a session another writer is writing, saying what was seen and how to
// override it.
// A change can be acknowledged; a descriptor open for writing cannot: that write is landing now.
func liveElsewhere(id, seen string, ack bool) error {
	msg := `session "` + id + `" is live elsewhere: ` + seen + "; a harness that takes no write lease (before 0.1.5) may be writing it, " +
		"so nothing was written or accepted. "
	if ack {
		msg += "Once no harness runs this session, acknowledge its changes with the store's rescan (mount: echo rescan > ctl) " +
			"or the command's --force, then write again"
	} else {
		msg += "Write again once that process has closed it"
	}
	return &eventstore.CommandError{Failure: eventstore.Busy, Code: eventstore.CodeLiveElsewhere, Message: msg}
}

// sessionOf is the session id of an artifact path (its directory's decoded name).
func sessionOf(path string) string {
	seg := filepath.Base(filepath.Dir(path))
	if id, ok := namecodec.DecodeSegment(seg); ok {
		return id
	}
	return seg
}
