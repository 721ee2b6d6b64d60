package mount

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dshfs/dshfs/internal/procscan"
)

// holders names the processes that keep mountpoint busy: those whose working directory, root or an open
// file lies at or below it, as "pid 812 (bash: cwd)". Read from /proc by readlink, which asks no FUSE
// server (the kernel prints the path it holds); processes of other users are invisible to an unprivileged
// dshfs, and a process that does not answer within d is left out (procscan). At most max entries.
func holders(mountpoint string, max int, d time.Duration) []string {
	if mountpoint == "" {
		return nil
	}
	out, _ := procscan.Scan(&procs, d, func(pid int) (string, bool) {
		h := holder(strconv.Itoa(pid), mountpoint)
		return h, h != ""
	})
	sort.Strings(out)
	if len(out) > max {
		out = append(out[:max], fmt.Sprintf("%d more", len(out)-max))
	}
	return out
}

// procs is the mount's own /proc scanner (its stuck processes are its own to skip).
var procs procscan.Scanner

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
	n, _ := strconv.Atoi(pid)
	return fmt.Sprintf("pid %s (%s: %s)", pid, procscan.Comm(n), strings.Join(how, ", "))
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
