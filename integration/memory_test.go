package integration

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/synth"
)

var walkSessions = flag.Int("walk.sessions", 2000, "sessions of the memory walk test")

// vmHWM is a process's peak resident set size in KiB, from /proc/PID/status.
func vmHWM(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			n, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// TestWalkMemory: a walk of every file of a 2,000-session mount (find, then cat of each file) with the
// default configuration keeps the dshfs process within 256 MiB at every moment (VmHWM, the kernel's own
// peak). The binary under test is a plain build (the race detector would inflate its memory).
func TestWalkMemory(t *testing.T) {
	t.Parallel()
	store := filepath.Join(t.TempDir(), "sessions")
	// the first session makes the project directory; the rest are written on two goroutines
	if err := synth.Write(store, jsonl.Zstd, "s00000", 20); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1 + w; i < *walkSessions; i += 2 {
				if err := synth.Write(store, jsonl.Zstd, fmt.Sprintf("s%05d", i), 20); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	m := startMount(t, "--read-only", store)
	list := filepath.Join(t.TempDir(), "files")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a long walk: not a hung mount
	defer cancel()
	walk := exec.CommandContext(ctx, "sh", "-c", `find "$1/sessions" -type f > "$2" && tr '\n' '\0' < "$2" | xargs -0 cat | wc -c && wc -l < "$2"`, "sh", m.dir, list)
	stdout, err := walk.Output()
	out := strings.Fields(string(stdout))
	if err != nil || len(out) != 2 {
		t.Fatalf("walk: %v: %s", err, stdout)
	}
	if n, _ := strconv.Atoi(out[1]); n < 30**walkSessions {
		t.Fatalf("the walk found only %s files", out[1])
	}
	peak := vmHWM(t, m.cmd.Process.Pid)
	t.Logf("walk of %d sessions (%s files, %s bytes read): dshfs VmHWM %d KiB", *walkSessions, out[1], out[0], peak)
	if peak > 256<<10 {
		t.Fatalf("dshfs peaked at %d KiB (VmHWM) during the walk: more than 256 MiB", peak)
	}
}
