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
// dshfs. A /proc read of a process stuck in the kernel can block for as long as it is stuck, so each
// process is read by its own goroutine and whatever has not answered within d is left out (and skipped
// from then on: its goroutine stays blocked, one per stuck process). At most max entries.
func holders(mountpoint string, max int, d time.Duration) []string {
	if mountpoint == "" {
		return nil
	}
	self := strconv.Itoa(os.Getpid())
	procs, _ := os.ReadDir("/proc")
	results := make(chan string, len(procs))
	var pending []string
	for _, p := range procs {
		pid := p.Name()
		if pid == "" || pid[0] < '0' || pid[0] > '9' || pid == self {
			continue
		}
		if _, stuck := stuckProcs.Load(pid); stuck {
			continue
		}
		pending = append(pending, pid)
		stuckProcs.Store(pid, true) // until it answers
		go func() {
			results <- holder(pid, mountpoint)
			stuckProcs.Delete(pid)
		}()
	}
	var out []string
	deadline := time.After(d)
collect:
	for range pending {
		select {
		case h := <-results:
			if h != "" {
				out = append(out, h)
			}
		case <-deadline:
			break collect
		}
	}
	sort.Strings(out)
	if len(out) > max {
		out = append(out[:max], fmt.Sprintf("%d more", len(out)-max))
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
