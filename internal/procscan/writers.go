package procscan

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// FileWriter is another process that holds a file open for writing.
type FileWriter struct {
	PID  int
	Comm string // the process's command name (/proc/PID/comm), "" when unreadable
}

// OpenWriters lists the other processes that hold the file at path (fi its stat) open for writing, as
// /proc shows them to this user (processes of other users are not visible and are not listed). A harness
// without the write lease keeps no lock and no descriptor between its batches, but while a batch is
// written its descriptor is open with write access: seen here, that write is about to land. The scan
// reads every visible process's descriptor table, so it runs right before a write, never on a read.
//
// Nothing here touches the file through a descriptor's link: a stat of /proc/PID/fd/N would reach the
// file system the descriptor is on, which may be a FUSE mount — this process's own, which cannot answer
// while its caller holds a session's locks. A descriptor is matched by its link text (the path with
// symlinks resolved, as the kernel prints it) and, where fdinfo carries it, its inode number.
func OpenWriters(path string, fi os.FileInfo) []FileWriter {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil
	}
	if real, err = filepath.Abs(real); err != nil {
		return nil
	}
	found, complete := Scan(&writers, scanTimeout, func(pid int) (FileWriter, bool) {
		if !writesFile(pid, real, st.Ino) {
			return FileWriter{}, false
		}
		return FileWriter{PID: pid, Comm: Comm(pid)}, true
	})
	if !complete {
		return nil // the revision and quiet-period checks still stand; the open descriptor is unknown
	}
	return found
}

// writers is OpenWriters' scanner: a process stuck in the kernel (in D state on a hung FUSE mount) blocks
// reads of its /proc entries for as long as it is stuck; a scan waits scanTimeout at most, and later scans
// skip a process still being read, so one stuck process costs one blocked goroutine, never a hung write.
var writers Scanner

const scanTimeout = 500 * time.Millisecond

// writesFile reports whether process pid has the file at real (inode ino) open with write access.
func writesFile(pid int, real string, ino uint64) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	d, err := os.Open(dir)
	if err != nil {
		return false // gone, or another user's
	}
	fds, _ := d.Readdirnames(-1)
	d.Close()
	for _, fd := range fds {
		if link, err := os.Readlink(dir + fd); err == nil && link == real && fdWrites(pid, fd, ino) {
			return true
		}
	}
	return false
}

// fdWrites reads descriptor fd of pid from /proc/PID/fdinfo ("flags:\t0100001", "ino:\t1234"): whether
// its access mode writes, and it names inode ino (when the kernel prints the inode).
func fdWrites(pid int, fd string, ino uint64) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/fdinfo/" + fd)
	if err != nil {
		return false
	}
	writes := false
	for _, l := range bytes.Split(b, []byte{'\n'}) {
		if v, ok := bytes.CutPrefix(l, []byte("flags:")); ok {
			flags, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 8, 64)
			writes = err == nil && flags&unix.O_ACCMODE != unix.O_RDONLY
		}
		if v, ok := bytes.CutPrefix(l, []byte("ino:")); ok {
			if n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64); err == nil && n != ino {
				return false // the path names another file now (replaced since)
			}
		}
	}
	return writes
}
