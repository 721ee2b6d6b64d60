package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
