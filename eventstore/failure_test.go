package eventstore

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"
)

// TestFailureTable: every class's errno, its name as status.json prints it, and whether the CLI calls it
// a refusal (exit 1) or a failure (exit 2).
func TestFailureTable(t *testing.T) {
	for _, tc := range []struct {
		f       Failure
		errno   syscall.Errno
		name    string
		refusal bool
	}{
		{Busy, syscall.EBUSY, "EBUSY", true},
		{Invalid, syscall.EINVAL, "EINVAL", true},
		{Exists, syscall.EEXIST, "EEXIST", true},
		{Missing, syscall.ENOENT, "ENOENT", false},
		{Failed, syscall.EIO, "EIO", false},
		{Refused, syscall.EIO, "EIO", true},
		{Again, syscall.EAGAIN, "EAGAIN", true},
		{"", syscall.EIO, "EIO", false}, // an unclassified failure is an I/O failure
	} {
		if got := tc.f.Errno(); got != tc.errno {
			t.Errorf("%q: errno %v, want %v", tc.f, got, tc.errno)
		}
		if got := tc.f.ErrnoName(); got != tc.name {
			t.Errorf("%q: errno name %s, want %s", tc.f, got, tc.name)
		}
		if got := tc.f.Refusal(); got != tc.refusal {
			t.Errorf("%q: refusal %v, want %v", tc.f, got, tc.refusal)
		}
	}
	if len(failures) != 7 {
		t.Errorf("the table has %d classes; a new class needs a row here", len(failures))
	}
}

// TestErrnoOfErrors: a write's error takes its class from AsCommandError, a read's from ReadFailure (a
// missing session is ENOENT to a write and EIO to a read of a name already found).
func TestErrnoOfErrors(t *testing.T) {
	busy := &CommandError{Failure: Busy, Code: CodeLocked, Message: "held"}
	corrupt := &CorruptionError{ID: "s", Cause: errors.New("bad line")}
	missing := &NotFoundError{ID: "s"}
	for _, tc := range []struct {
		name        string
		err         error
		write, read syscall.Errno
	}{
		{"none", nil, 0, 0},
		{"command error", busy, syscall.EBUSY, syscall.EIO},
		{"wrapped command error", fmt.Errorf("append: %w", busy), syscall.EBUSY, syscall.EIO},
		{"corrupt log", corrupt, syscall.EIO, syscall.EIO},
		{"unsupported log", &UnsupportedError{Message: "v9"}, syscall.EIO, syscall.EIO},
		{"missing session", missing, syscall.ENOENT, syscall.EIO},
		{"storage", &IOError{Err: fs.ErrPermission}, syscall.EIO, syscall.EIO},
		{"anything else", errors.New("boom"), syscall.EIO, syscall.EIO},
	} {
		if got := WriteErrno(tc.err); got != tc.write {
			t.Errorf("%s: write errno %v, want %v", tc.name, got, tc.write)
		}
		if got := ReadErrno(tc.err); got != tc.read {
			t.Errorf("%s: read errno %v, want %v", tc.name, got, tc.read)
		}
	}
	if ReadFailure(corrupt) != Refused || ReadFailure(missing) != Failed {
		t.Errorf("read classes: corrupt %q, missing %q", ReadFailure(corrupt), ReadFailure(missing))
	}
}
