package procscan

import (
	"os/exec"
	"sync/atomic"
	"testing"
	"time"
)

// TestScanFindsAProcess: a scan sees another process of this user, with its command name, and skips this
// one; a process whose read has not returned is skipped by the next scan and makes the first incomplete.
func TestScanFindsAProcess(t *testing.T) {
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	var s Scanner
	found, complete := Scan(&s, 5*time.Second, func(pid int) (string, bool) {
		return Comm(pid), pid == child.Process.Pid
	})
	if !complete || len(found) != 1 || found[0] != "sleep" {
		t.Fatalf("found %q, complete %v", found, complete)
	}

	release := make(chan struct{})
	defer close(release)
	_, complete = Scan(&s, 50*time.Millisecond, func(pid int) (struct{}, bool) {
		if pid == child.Process.Pid {
			<-release // a process stuck in the kernel
		}
		return struct{}{}, false
	})
	if complete {
		t.Fatal("a scan with a read that never returned is complete")
	}
	var seen atomic.Bool // read runs on a goroutine per process
	_, complete = Scan(&s, 5*time.Second, func(pid int) (struct{}, bool) {
		if pid == child.Process.Pid {
			seen.Store(true)
		}
		return struct{}{}, false
	})
	if !complete || seen.Load() {
		t.Fatalf("the next scan read the stuck process again (%v) or did not complete (%v)", seen.Load(), complete)
	}
}
