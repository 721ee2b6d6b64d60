package eventstore

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// Failure classifies why a command or a read failed. The mount maps it to an errno, the CLI to an exit
// code and status.json names it, all from the one table below, so all three read the same value.
type Failure string

// The failure classes of docs/writing.md.
const (
	// Busy: another writer holds the session, a turn is open, a compaction lock is held, or the artifact
	// changed under this writer (EBUSY).
	Busy Failure = "busy"
	// Invalid: the input or the arguments are wrong (EINVAL); nothing was written.
	Invalid Failure = "invalid"
	// Exists: the session to create already exists (EEXIST).
	Exists Failure = "exists"
	// Missing: the session does not exist (ENOENT).
	Missing Failure = "missing"
	// Failed: the storage failed; accepted events are kept and a later flush retries (EIO).
	Failed Failure = "io"
	// Refused: the stored log is refused or corrupt, so it cannot be written (EIO).
	Refused Failure = "refused"
	// Again: what the command was computed from changed while it ran (a compaction's selected span);
	// nothing was changed and trying again may succeed (EAGAIN).
	Again Failure = "again"
)

// failures is the one translation of a failure class: the errno the mount returns (status.json and the
// log print its name), and whether the CLI reports it as a refusal — the command was turned down, the
// store is as it was — or as a failure to reach the session or the storage. A class not listed (the zero
// Failure) translates as Failed.
var failures = map[Failure]struct {
	errno   syscall.Errno
	refusal bool
}{
	Busy:    {syscall.EBUSY, true},
	Invalid: {syscall.EINVAL, true},
	Exists:  {syscall.EEXIST, true},
	Missing: {syscall.ENOENT, false},
	Failed:  {syscall.EIO, false},
	Refused: {syscall.EIO, true},
	Again:   {syscall.EAGAIN, true},
}

// Errno is the errno the mount returns for the failure class.
func (f Failure) Errno() syscall.Errno {
	if t, ok := failures[f]; ok {
		return t.errno
	}
	return syscall.EIO
}

// ErrnoName is the POSIX name of the class's errno ("EBUSY"), as status.json and the log print it.
func (f Failure) ErrnoName() string { return unix.ErrnoName(f.Errno()) }

// Refusal reports whether the class is a refusal (the CLI exits 1) rather than a failure to reach the
// session or the storage (the CLI exits 2).
func (f Failure) Refusal() bool { return failures[f].refusal }

// WriteErrno is the errno of a write-side error (0 for nil): the Failure of AsCommandError.
func WriteErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	return AsCommandError(err).Failure.Errno()
}

// ReadFailure classifies an error met while answering a read (a listing, a view's bytes, an artifact's
// size): the name being read was found, so whatever keeps its bytes from being served is an I/O failure
// of that read — Refused for a refused or corrupt log, Failed for anything else, a session gone meanwhile
// included — and never a refusal the caller could fix by the name it read (docs/tree.md: EIO).
func ReadFailure(err error) Failure {
	var u *UnsupportedError
	var c *CorruptionError
	if errors.As(err, &u) || errors.As(err, &c) {
		return Refused
	}
	return Failed
}

// ReadErrno is the errno of a read-side error (0 for nil), by ReadFailure.
func ReadErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	return ReadFailure(err).Errno()
}
