package procscan

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestOpenWriters: a process holding a file open for writing is listed with its command name; one holding
// it open for reading only is not, nor is this process's own descriptor.
func TestOpenWriters(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	own, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name  string
		redir string
		want  bool
	}{
		{"append", ">>", true},
		{"read", "<", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The shell opens the file on descriptor 3 before it becomes sleep, so the file is open once
			// the child's ready file appears.
			ready := filepath.Join(dir, "ready-"+tc.name)
			child := exec.Command("sh", "-c", `exec 3`+tc.redir+`"$1"; : > "$2"; exec sleep 30`, "sh", path, ready)
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { child.Process.Kill(); child.Wait() }()
			waitFor(t, ready)
			// sh execs sleep after the ready file: wait until the command name says so.
			deadline := time.Now().Add(10 * time.Second)
			for Comm(child.Process.Pid) != "sleep" {
				if time.Now().After(deadline) {
					t.Fatalf("child is %q, not sleep", Comm(child.Process.Pid))
				}
				time.Sleep(5 * time.Millisecond)
			}
			ws := OpenWriters(path, fi)
			var mine []FileWriter
			for _, w := range ws {
				if w.PID == child.Process.Pid {
					mine = append(mine, w)
				}
			}
			if got := len(mine) == 1; got != tc.want {
				t.Fatalf("writers %v: child %d listed %v, want %v", ws, child.Process.Pid, got, tc.want)
			}
			if tc.want && mine[0].Comm != "sleep" {
				t.Fatalf("writer's command %q, want sleep", mine[0].Comm)
			}
		})
	}
}

func waitFor(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFlockHolder: the pid /proc/locks names for a flock is this process's while it holds one, and 0 for
// a file nobody locks.
func TestFlockHolder(t *testing.T) {
	dir := t.TempDir()
	locked, err := os.Create(filepath.Join(dir, "locked"))
	if err != nil {
		t.Fatal(err)
	}
	defer locked.Close()
	if err := lockFile(locked); err != nil {
		t.Fatal(err)
	}
	free, err := os.Create(filepath.Join(dir, "free"))
	if err != nil {
		t.Fatal(err)
	}
	defer free.Close()
	for _, tc := range []struct {
		f    *os.File
		want int
	}{{locked, os.Getpid()}, {free, 0}} {
		fi, err := tc.f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		if got := FlockHolder(fi); got != tc.want {
			t.Errorf("%s: holder %d, want %d", tc.f.Name(), got, tc.want)
		}
	}
}

// TestFlockHolderParse: the table's FLOCK lines are matched on device and inode; POSIX locks and
// waiters are not holders.
func TestFlockHolderParse(t *testing.T) {
	const table = `1: POSIX  ADVISORY  WRITE 111 08:01:42 0 EOF
2: FLOCK  ADVISORY  WRITE 222 08:01:43 0 EOF
2: -> FLOCK  ADVISORY  WRITE 333 08:01:42 0 EOF
3: FLOCK  ADVISORY  WRITE 444 08:01:42 0 EOF
4: FLOCK  ADVISORY  WRITE x 00:2a:7 0 EOF
`
	for _, tc := range []struct {
		want string
		pid  int
	}{
		{"08:01:42", 444},
		{"08:01:43", 222},
		{"08:01:44", 0},
		{"00:2a:7", 0}, // an unreadable pid
	} {
		if got := flockHolder(strings.NewReader(table), tc.want); got != tc.pid {
			t.Errorf("%s: holder %d, want %d", tc.want, got, tc.pid)
		}
	}
}

func lockFile(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) }
