package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestByProjectNamesAsOnDisk: by-project/ names each project by its directory's name on disk — the
// harness's encoding of the project key, non-ASCII included — so by-project/, store/ and the store agree
// (it once encoded the encoded name again: ~00DC became ~007E00DC).
func TestByProjectNamesAsOnDisk(t *testing.T) {
	store := filepath.Join(t.TempDir(), "sessions")
	cli(t, 0, "create", "--cwd", "/home/dev/Über", store, "umlaut")
	cli(t, 0, "create", "--cwd", "/home/dev/plain", store, "plain")
	var disk []string
	entries, err := os.ReadDir(store)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		disk = append(disk, e.Name())
	}
	if !strings.Contains(strings.Join(disk, "\n"), "~00DC") {
		t.Fatalf("the store's project directories %q: want the harness's ~00DC for Ü", disk)
	}
	m := startMount(t, "--read-only", store)
	for _, dir := range []string{"by-project", "store"} {
		r := run(t, "", "ls", filepath.Join(m.dir, dir))
		if r.code != 0 || !sameSet(string(r.stdout), strings.Join(disk, "\n")) {
			t.Errorf("ls %s: exit %d %q; the store holds %q", dir, r.code, r.stdout, disk)
		}
	}
	for _, p := range disk {
		r := run(t, "", "ls", filepath.Join(m.dir, "by-project", p))
		if r.code != 0 || len(strings.Fields(string(r.stdout))) != 1 {
			t.Errorf("ls by-project/%s: exit %d %q %s", p, r.code, r.stdout, r.stderr)
		}
	}
}

// TestMountOntoLiveMount: a second mount onto a live dshfs mount is refused as what it is — already a
// dshfs mount of that store, served by that pid — not as a directory that "holds README".
func TestMountOntoLiveMount(t *testing.T) {
	dir := t.TempDir()
	cli(t, 0, "demo", dir)
	store := filepath.Join(dir, "sessions")
	m := startMount(t, "--read-only", store)
	r := run(t, "", dshfsBin(t), "mount", "--read-only", store, m.dir)
	want := fmt.Sprintf("mountpoint %s is already a dshfs mount of %s (pid %d): unmount it first with kill -TERM %d", m.dir, store, m.cmd.Process.Pid, m.cmd.Process.Pid)
	if r.code != 2 || !strings.Contains(string(r.stderr), want) {
		t.Errorf("mount onto a live mount: exit %d %q, want exit 2 and %q", r.code, r.stderr, want)
	}
	if n := mountCount(t, m.dir); n != 1 {
		t.Errorf("%d mounts at %s after the refused mount", n, m.dir)
	}
}

// TestBusyUnmountNamesHolder: a SIGTERMed mount that a process keeps busy says so once, naming the process
// and how it holds the mount, not once per retry; it unmounts as soon as the process lets go.
func TestBusyUnmountNamesHolder(t *testing.T) {
	dir := t.TempDir()
	cli(t, 0, "demo", dir)
	m := startMount(t, "--read-only", filepath.Join(dir, "sessions"))
	hold := exec.Command("sleep", "120")
	hold.Dir = filepath.Join(m.dir, "sessions")
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	held := true
	t.Cleanup(func() {
		if held {
			hold.Process.Kill()
			hold.Wait()
		}
	})
	m.signal(t, syscall.SIGTERM)
	want := fmt.Sprintf("pid %d (sleep: cwd)", hold.Process.Pid)
	waitFor(t, "the busy unmount to be logged with its holder", func() (bool, string) {
		return strings.Contains(m.log.String(), want), m.log.String()
	})
	// the retries go on every second; the next report is due after 5 s: a window of 3 s shows one line
	time.Sleep(3 * time.Second)
	if n := strings.Count(m.log.String(), " is busy"); n != 1 {
		t.Errorf("%d busy lines within 3 s of the first, want 1:\n%s", n, m.log)
	}
	if strings.Contains(m.log.String(), `\n`) {
		t.Errorf("the log carries escaped newlines:\n%s", m.log)
	}
	hold.Process.Kill()
	hold.Wait()
	held = false
	m.waitExit(t)
}
