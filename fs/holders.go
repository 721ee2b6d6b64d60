package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// holders names the processes that keep mountpoint busy: those whose working directory, root or an open
// file lies at or below it, as "pid 812 (bash: cwd)". Read from /proc by readlink, which asks no FUSE
// server (the kernel prints the path it holds); processes of other users are invisible to an unprivileged
// dshfs, and a process that does not answer within d is left out (scanProcs). At most max entries.
func holders(mountpoint string, max int, d time.Duration) []string {
	if mountpoint == "" {
		return nil
	}
	out := scanProcs(d, func(pid string) string { return holder(pid, mountpoint) })
	sort.Strings(out)
	if len(out) > max {
		out = append(out[:max], fmt.Sprintf("%d more", len(out)-max))
	}
	return out
}

// scanProcs calls read for every process but this one, each in its own goroutine, and returns the
// non-empty answers given within d. A /proc read of a process stuck in the kernel blocks for as long as it
// is stuck: its pid is skipped from then on (its goroutine stays blocked, one per stuck process) rather
// than stall every scan.
func scanProcs(d time.Duration, read func(pid string) string) []string {
	self := strconv.Itoa(os.Getpid())
	procs, _ := os.ReadDir("/proc")
	results := make(chan string, len(procs))
	n := 0
	for _, p := range procs {
		pid := p.Name()
		if pid == "" || pid[0] < '0' || pid[0] > '9' || pid == self {
			continue
		}
		if _, stuck := stuckProcs.LoadOrStore(pid, true); stuck {
			continue // stuck, or being read by another scan
		}
		n++
		go func() {
			r := read(pid)
			stuckProcs.Delete(pid)
			results <- r
		}()
	}
	var out []string
	deadline := time.After(d)
	for range n {
		select {
		case r := <-results:
			if r != "" {
				out = append(out, r)
			}
		case <-deadline:
			return out
		}
	}
	return out
}

// stuckProcs are the pids whose /proc entries did not answer a scan (holders), by pid.
var stuckProcs sync.Map

// holder is how process pid holds mountpoint ("" when it does not).
func holder(pid, mountpoint string) string {
	under := func(p string) bool {
		return p == mountpoint || strings.HasPrefix(p, mountpoint+"/")
	}
	var how []string
	for _, link := range []string{"cwd", "root"} {
		if t, err := os.Readlink(filepath.Join("/proc", pid, link)); err == nil && under(t) {
			how = append(how, link)
		}
	}
	fds, _ := os.ReadDir(filepath.Join("/proc", pid, "fd"))
	files := 0
	for _, fd := range fds {
		if t, err := os.Readlink(filepath.Join("/proc", pid, "fd", fd.Name())); err == nil && under(t) {
			files++
		}
	}
	if files == 1 {
		how = append(how, "an open file")
	} else if files > 1 {
		how = append(how, fmt.Sprintf("%d open files", files))
	}
	if len(how) == 0 {
		return ""
	}
	comm, _ := os.ReadFile(filepath.Join("/proc", pid, "comm"))
	return fmt.Sprintf("pid %s (%s: %s)", pid, strings.TrimSpace(string(comm)), strings.Join(how, ", "))
}

// backoff is when a still-busy mount is reported again: once at the first failed unmount, then after 5 s,
// doubling up to every 5 minutes, so a mount held busy for hours logs a line now and then, not one per retry.
type backoff struct {
	next time.Time
	gap  time.Duration
}

// due reports whether a report is due at now, and schedules the next.
func (b *backoff) due(now time.Time) bool {
	if !b.next.IsZero() && now.Before(b.next) {
		return false
	}
	switch {
	case b.gap == 0:
		b.gap = 5 * time.Second
	case b.gap < 5*time.Minute:
		b.gap = min(2*b.gap, 5*time.Minute)
	}
	b.next = now.Add(b.gap)
	return true
}
