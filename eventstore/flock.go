package eventstore

import (
	"errors"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshfs/dshfs/internal/procscan"
)

// flockLock is a session's single-writer lock: an exclusive flock(2) held through an open descriptor. The
// kernel drops it when the holder dies, so a killed writer never leaves a stale lock.
type flockLock struct{ f *os.File }

func (l *flockLock) Release() error { return l.f.Close() }

// Flock takes the writer lock of session id on f without blocking, and owns f from then on (closed on
// failure, or by Release). When another descriptor — another dshfs process, or another Store — holds it,
// the refusal is a *CommandError (Busy, CodeLocked) naming the holder's pid when /proc/locks shows it.
func Flock(f *os.File, id string) (WriterLock, error) {
	holder, err := TryFlock(f)
	if err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			who := "another writer"
			switch {
			case holder == os.Getpid():
				who = "another writer in this dshfs process (pid " + strconv.Itoa(holder) + ")"
			case holder > 0:
				who = "another dshfs writer (pid " + strconv.Itoa(holder) + ")"
			}
			return nil, &CommandError{Failure: Busy, Code: CodeLocked,
				Message: "session " + jsQuote(id) + " is being written by " + who + "; reads work, writes are refused until it releases the session"}
		}
		return nil, &IOError{Err: err}
	}
	return &flockLock{f: f}, nil
}

// TryFlock takes an exclusive flock(2) on f without blocking. On contention the error is EWOULDBLOCK
// and holder the pid /proc/locks names as the holder (0 when unknown); f stays open either way.
func TryFlock(f *os.File) (holder int, err error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	// A lock this process just released can still be held for a moment by a child being forked (it shares
	// the descriptor until its exec closes it): a holder that is this very process is waited for briefly —
	// and so is one that is gone by the time /proc/locks is read (the child's exec already released it).
	for wait := time.Millisecond; errors.Is(err, unix.EWOULDBLOCK) && wait < 256*time.Millisecond; wait *= 2 {
		if holder := procscan.FlockHolder(fi); holder != os.Getpid() && holder != 0 {
			break // another process's lock: refused at once, naming it
		}
		time.Sleep(wait)
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	if errors.Is(err, unix.EWOULDBLOCK) {
		return procscan.FlockHolder(fi), err
	}
	return 0, err
}
