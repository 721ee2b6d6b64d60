package procscan

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// FlockHolder finds the pid holding a flock on the file fi describes in /proc/locks (0 when unknown).
// The pid is the process that took the lock; that is enough to tell a user which process to stop.
// /proc/locks is the kernel's own table, not another process's entries, so reading it cannot stall.
func FlockHolder(fi os.FileInfo) int {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0
	}
	defer f.Close()
	return flockHolder(f, fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino))
}

// flockHolder reads a /proc/locks table for the flock on the file want names ("MAJ:MIN:INODE").
func flockHolder(locks io.Reader, want string) int {
	sc := bufio.NewScanner(locks)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" ("->" marks a waiter)
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[1] == "->" {
			continue
		}
		if fields[5] == want {
			if pid, err := strconv.Atoi(fields[4]); err == nil {
				return pid
			}
		}
	}
	return 0
}
