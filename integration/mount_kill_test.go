package integration

import (
	"flag"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/demo"
)

var earlyKills = flag.Int("early.kills", 10, "SIGKILLs within the first 10 ms of a mount (the long run uses 100)")

// TestMountEarlyKill: a dshfs mount SIGKILLed within the first 10 ms after its mount appears always exits
// — the daemon never waits on its own mount, as go-fuse's WaitMount poll hack would make it — and never
// leaves a hung mountpoint: a stat of it answers at once (a dead mount says "not connected"), and a fresh
// mount at the same path clears what is left and serves.
func TestMountEarlyKill(t *testing.T) {
	dir := t.TempDir()
	if err := demo.Write(dir); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "sessions")
	mnt := freshMountpoint(t)
	for i := range *earlyKills {
		cmd := exec.Command(dshfsBin(t), "mount", "--read-only", store, mnt)
		var log syncBuffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// kill within 10 ms of the mount appearing (polled every 0.2 ms): the window of WaitMount's hack
		// (nothing is mounted there now: the previous cycle ended by checking so)
		end := time.Now().Add(deadline)
		for mountCount(t, mnt) == 0 {
			if time.Now().After(end) {
				t.Fatalf("cycle %d: the mount never appeared; log:\n%s", i, log.String())
			}
			select {
			case err := <-done:
				t.Fatalf("cycle %d: dshfs mount exited before mounting (%v); log:\n%s", i, err, log.String())
			default:
			}
			time.Sleep(200 * time.Microsecond)
		}
		time.Sleep(time.Duration(rand.Int64N(int64(10 * time.Millisecond))))
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(deadline):
			state, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
			t.Fatalf("cycle %d: a SIGKILLed dshfs did not exit within %v (stat: %s)", i, deadline, state)
		}
		// the mountpoint answers (ENOTCONN, or its directory once the kernel dropped the mount)
		if r := run(t, "", "stat", "-f", mnt); r.code != 0 && !strings.Contains(string(r.stderr), "not connected") {
			t.Fatalf("cycle %d: stat -f of the mountpoint after the kill: exit %d %s", i, r.code, r.stderr)
		}
		// a fresh mount at the same path clears the dead one and serves
		m := startMountAt(t, mnt, nil, []string{dshfsBin(t), "mount", "--read-only", store, mnt})
		waitFor(t, "the fresh mount to serve README", func() (bool, string) {
			r := run(t, "", "head", "-c", "5", filepath.Join(mnt, "README"))
			return r.code == 0 && string(r.stdout) == "dshfs", string(r.stderr) + m.log.String()
		})
		m.signal(t, syscall.SIGTERM)
		m.waitExit(t)
		if n := mountCount(t, mnt); n != 0 {
			t.Fatalf("cycle %d: %d mounts left at %s after the fresh mount ended", i, n, mnt)
		}
	}
}

// mountCount is how many mounts /proc/mounts has at dir (stacked mounts count each).
func mountCount(t testing.TB, dir string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[1] == dir {
			n++
		}
	}
	return n
}
