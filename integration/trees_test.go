package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEvictionKeepsWorkingDirectory: once more than 128 other sessions were shown, a session falls out of
// the mount's working set and the kernel is asked to drop its nodes (stats.json "evicted", for sessions
// holding more than the few nodes a grep -l leaves) — except the directories a process works in: a shell whose current directory is inside the session can still
// getcwd(3) and list it afterwards, and every session still reads the same.
func TestEvictionKeepsWorkingDirectory(t *testing.T) {
	t.Parallel()
	store, _ := emptyStore(t, "zstd")
	const n = 140
	for i := 0; i < n; i++ {
		mustRun(t, gensessionBin(t), "-mode", "zstd", "-id", fmt.Sprintf("s%03d", i), store, "4")
	}
	m := startMount(t, "--read-only", store)
	work := filepath.Join(m.dir, "sessions", "s000")
	// a shell working in s000: it waits for a line, then reports where it is and what it sees
	sh := exec.Command("bash", "-c", `cd "$1" || exit 1; read -r _; readlink /proc/self/cwd; ls | wc -l`, "bash", work)
	in, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sh.Stdout, sh.Stderr = &out, &out
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	defer sh.Process.Kill()
	waitFor(t, "the shell to enter "+work, func() (bool, string) {
		cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", sh.Process.Pid))
		return cwd == work, cwd
	})
	wantEntries := strings.Count(string(mustRun(t, "ls", work)), "\n")
	evicted := func() int { return storeCounters(t, m.dir).Evicted }
	for i := 1; i < n; i++ { // walk every other session: s000 and s001 .. s011 fall out
		readFile(t, filepath.Join(m.dir, "sessions", fmt.Sprintf("s%03d", i), "events.jsonl"))
		if _, err := os.ReadDir(filepath.Join(m.dir, "sessions", fmt.Sprintf("s%03d", i), "events")); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "sessions to be evicted", func() (bool, string) {
		e := evicted()
		return e >= n-128, fmt.Sprintf("evicted %d", e)
	})
	if _, err := in.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	if err := sh.Wait(); err != nil {
		t.Fatalf("the shell in the evicted session: %v: %s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || lines[0] != work {
		t.Fatalf("the shell in the evicted session says:\n%s\nwant %s and its entry count", out.String(), work)
	}
	if got := strings.TrimSpace(lines[1]); got != fmt.Sprint(wantEntries) || wantEntries == 0 {
		t.Errorf("ls in the working directory counts %s entries, want %d", got, wantEntries)
	}
	// every evicted session reads as before
	for i := 0; i <= n-128; i++ {
		id := fmt.Sprintf("s%03d", i)
		if got, want := readFile(t, filepath.Join(m.dir, "sessions", id, "events.jsonl")), cli(t, 0, "cat", "--view", "events", store, id); !bytes.Equal(got, want) {
			t.Errorf("%s: events.jsonl after the eviction differs from dshfs cat", id)
		}
	}
}
