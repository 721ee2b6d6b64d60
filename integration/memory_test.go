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
	"testing"
	"time"
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
	// written by gensession processes (plain builds: the race detector would make this test process slow),
	// the first alone so that the others find the project directory in place; 500 sessions a process,
	// since a process start costs about 20 ms of page faults on these VMs (one each took 42 s for 2,000)
	mustRun(t, gensessionBin(t), "-id", "s00000", store, "20")
	// (a minute or more on a machine busy with the rest of the suite: not bounded like a tool's run)
	if r := runWithin(t, 10*time.Minute, "", "sh", "-c", `seq -f 's%05g' 1 $(($3 - 1)) | xargs -P 2 -n 500 "$1" "$2" 20`,
		"sh", gensessionBin(t), store, strconv.Itoa(*walkSessions)); r.code != 0 || len(r.stderr) != 0 {
		t.Fatalf("generating %d sessions: exit %d, stderr:\n%s", *walkSessions, r.code, r.stderr)
	}
	generated := time.Now()
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
	t.Logf("walk of %d sessions (%s files, %s bytes read) in %v: dshfs VmHWM %d KiB", *walkSessions, out[1], out[0],
		time.Since(generated).Round(time.Second), peak)
	if peak > 256<<10 {
		t.Fatalf("dshfs peaked at %d KiB (VmHWM) during the walk: more than 256 MiB", peak)
	}
}
