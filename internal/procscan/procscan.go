// Package procscan reads what /proc tells about other processes: which hold a file open for writing
// (OpenWriters), which holds a flock (FlockHolder), and any per-process question a caller asks (Scan),
// without letting one stuck process stall the reader. Reading another process's /proc entries (its
// links, its descriptor table) blocks for as long as that process is stuck in the kernel — a process in
// D state on a hung FUSE mount — so each process is read on its own goroutine, the scan answers within a
// deadline, and a process whose read has not returned is skipped by later scans: one stuck process costs
// one blocked goroutine, never a hung caller.
package procscan

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Scanner scans processes; it remembers the ones whose reads have not returned. Each user of /proc keeps
// a Scanner of its own, so that one's stuck reads never hide a process from another.
type Scanner struct {
	busy sync.Map // pid → true while a read of it runs
}

// Scan calls read for every process but this one, in ascending pid order of its answers, and returns the
// answers read gave (ok) within d. complete is false when some process did not answer in time; the
// processes still being read from an earlier scan are skipped and do not count as missing.
func Scan[T any](s *Scanner, d time.Duration, read func(pid int) (T, bool)) (found []T, complete bool) {
	self := os.Getpid()
	proc, err := os.Open("/proc")
	if err != nil {
		return nil, true
	}
	names, _ := proc.Readdirnames(-1)
	proc.Close()
	type answer struct {
		pid int
		v   T
		ok  bool
	}
	answers := make(chan answer, len(names))
	n := 0
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == self {
			continue
		}
		if _, reading := s.busy.LoadOrStore(pid, true); reading {
			continue // stuck since an earlier scan, or being read by another one
		}
		n++
		go func() {
			v, ok := read(pid)
			s.busy.Delete(pid)
			answers <- answer{pid, v, ok}
		}()
	}
	var got []answer
	deadline := time.After(d)
	complete = true
collect:
	for range n {
		select {
		case a := <-answers:
			if a.ok {
				got = append(got, a)
			}
		case <-deadline:
			complete = false
			break collect
		}
	}
	slices.SortFunc(got, func(a, b answer) int { return a.pid - b.pid })
	for _, a := range got {
		found = append(found, a.v)
	}
	return found, complete
}

// Comm is process pid's command name (/proc/PID/comm), "" when it cannot be read.
func Comm(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
