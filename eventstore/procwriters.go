package eventstore

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// FileWriter is another process that holds a file open for writing.
type FileWriter struct {
	PID  int
	Comm string // the process's command name (/proc/PID/comm), "" when unreadable
}

// OpenWriters lists the other processes that hold the file fi describes open for writing, as /proc shows
// them to this user (processes of other users are not visible and are not listed). A harness without the
// write lease keeps no lock and no descriptor between its batches, but while a batch is written its
// descriptor is open with write access: seen here, that write is about to land. The scan reads every
// visible process's descriptor table, so it runs right before a write, never on a read. name, when not
// "", is the file's base name: only descriptors whose link ends with it are stat'ed.
func OpenWriters(fi os.FileInfo, name string) []FileWriter {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	proc, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	pids, _ := proc.Readdirnames(-1)
	proc.Close()
	self := os.Getpid()
	var out []FileWriter
	for _, p := range pids {
		pid, err := strconv.Atoi(p)
		if err != nil || pid == self {
			continue
		}
		if writesFile(pid, st, name) {
			out = append(out, FileWriter{PID: pid, Comm: comm(pid)})
		}
	}
	return out
}

// writesFile reports whether process pid has the file st open with write access.
func writesFile(pid int, st *syscall.Stat_t, name string) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	d, err := os.Open(dir)
	if err != nil {
		return false // gone, or another user's
	}
	fds, _ := d.Readdirnames(-1)
	d.Close()
	for _, fd := range fds {
		link, err := os.Readlink(dir + fd)
		if err != nil || (name != "" && !strings.HasSuffix(link, "/"+name) && !strings.HasSuffix(link, "/"+name+" (deleted)")) {
			continue
		}
		var fst unix.Stat_t
		if unix.Stat(dir+fd, &fst) != nil || fst.Dev != st.Dev || fst.Ino != st.Ino {
			continue
		}
		if fdWrites(pid, fd) {
			return true
		}
	}
	return false
}

// fdWrites reads the access mode of descriptor fd of pid from /proc/PID/fdinfo ("flags:\t0100001").
func fdWrites(pid int, fd string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/fdinfo/" + fd)
	if err != nil {
		return false
	}
	for _, l := range bytes.Split(b, []byte{'\n'}) {
		if v, ok := bytes.CutPrefix(l, []byte("flags:")); ok {
			flags, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 8, 64)
			return err == nil && flags&unix.O_ACCMODE != unix.O_RDONLY
		}
	}
	return false
}

func comm(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
