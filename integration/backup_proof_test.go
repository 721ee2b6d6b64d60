package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Backups that prove themselves: what would give a backup of nothing is refused, the manifest's totals
// are checked by verify, and no command hangs on a stopped dshfs mount.

// demoStore writes the demo store and returns its root (DIR/sessions).
func demoStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cli(t, 0, "demo", dir)
	return filepath.Join(dir, "sessions")
}

// refused runs dshfs, requires exit 1 and each of wants in its stderr, and that dest was not created.
func refused(t *testing.T, dest string, wants []string, args ...string) {
	t.Helper()
	r := run(t, "", dshfsBin(t), args...)
	if r.code != 1 {
		t.Fatalf("dshfs %s: exit %d, want 1\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	for _, w := range wants {
		if !strings.Contains(string(r.stderr), w) {
			t.Errorf("dshfs %s: stderr does not say %q:\n%s", strings.Join(args, " "), w, r.stderr)
		}
	}
	if dest != "" {
		if _, err := os.Stat(dest); err == nil {
			t.Errorf("dshfs %s refused but created %s", strings.Join(args, " "), dest)
		}
	}
}

// TestBackupEmptyStory: the README's first try — a backup of a mount's sessions/ directory — is refused
// naming the real store; so are a copy of that directory (root errors), an empty directory (unless
// --allow-empty) and a --mount of another store. verify prints what a backup holds and fails one whose
// copy was trimmed along with its manifest entries; restore refuses an empty backup unless told.
func TestBackupEmptyStory(t *testing.T) {
	t.Parallel()
	store := demoStore(t)
	m := startMount(t, "--read-only", store)
	dest := filepath.Join(t.TempDir(), "b")

	refused(t, dest, []string{"inside the dshfs mount at " + m.dir, "dshfs backup " + store + " DEST", filepath.Join(m.dir, "store") + "/"},
		"backup", filepath.Join(m.dir, "sessions"), dest)
	views := copyTree(t, filepath.Join(m.dir, "sessions"), filepath.Join(t.TempDir(), "views"))
	refused(t, dest, []string{"root errors", "dshfs ls"}, "backup", views, dest)
	empty := t.TempDir()
	refused(t, dest, []string{"holds no sessions", "--allow-empty"}, "backup", empty, dest)
	refused(t, dest, []string{"--mount " + m.dir + " serves the store " + store}, "backup", "--mount", m.dir, demoStore(t), dest)

	// --allow-empty: taken with a warning, verified as empty, restored only when allowed
	r := run(t, "", dshfsBin(t), "backup", "--allow-empty", empty, dest)
	if r.code != 0 || !strings.Contains(string(r.stderr), "holds no sessions") {
		t.Fatalf("backup --allow-empty: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := run(t, "", dshfsBin(t), "verify", dest); r.code != 0 || string(r.stdout) != "verified: 0 sessions, 0 events, 0 files\n" ||
		!strings.Contains(string(r.stderr), "holds no sessions") {
		t.Errorf("verify of an empty backup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	restored := filepath.Join(t.TempDir(), "r")
	refused(t, restored, []string{"holds no sessions", "--allow-empty"}, "restore", dest, restored)
	cli(t, 0, "restore", "--allow-empty", dest, restored)

	// a real backup (through the mount): the summary matches ls and check's counts
	good := filepath.Join(t.TempDir(), "good")
	var took struct{ Sessions, Events int64 }
	if err := json.Unmarshal(cli(t, 0, "backup", store, good), &took); err != nil || took.Sessions != int64(len(textLines(cli(t, 0, "ls", store)))) || took.Events == 0 {
		t.Fatalf("backup: %v %+v", err, took)
	}
	want := []byte("verified: " + itoa(took.Sessions) + " sessions, " + itoa(took.Events) + " events, " + itoa(took.Sessions) + " files\n")
	if out := cli(t, 0, "verify", good); !bytes.Equal(out, want) {
		t.Errorf("verify: %q, want %q", out, want)
	}

	// one session removed from the copy and from the manifest's entries: only the totals show it
	trimmed := copyTree(t, good, filepath.Join(t.TempDir(), "trimmed"))
	var manifest map[string]any
	if err := json.Unmarshal(readFile(t, filepath.Join(trimmed, "MANIFEST.json")), &manifest); err != nil {
		t.Fatal(err)
	}
	sessions := manifest["sessions"].([]any)
	gone := sessions[0].(map[string]any)["path"].(string)
	manifest["sessions"] = sessions[1:]
	b, _ := json.Marshal(manifest)
	if err := os.WriteFile(filepath.Join(trimmed, "MANIFEST.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(trimmed, filepath.Dir(gone))); err != nil {
		t.Fatal(err)
	}
	if r := run(t, "", dshfsBin(t), "verify", trimmed); r.code != 1 || !strings.Contains(string(r.stdout), "\texpected\t") || strings.Contains(string(r.stdout), "verified:") {
		t.Errorf("verify of a trimmed backup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	refused(t, filepath.Join(t.TempDir(), "r"), []string{"does not verify", "--force"}, "restore", trimmed, filepath.Join(t.TempDir(), "r"))
	if r := run(t, "", dshfsBin(t), "restore", "--force", trimmed, filepath.Join(t.TempDir(), "r")); r.code != 0 || !strings.Contains(string(r.stderr), "restoring despite") {
		t.Errorf("restore --force: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// within runs dshfs and fails unless it ends within limit. On a timeout it calls unwedge first (the
// command may be blocked on the stopped mount), so the process can be reaped and the test ends.
func within(t *testing.T, limit time.Duration, unwedge func(), args ...string) result {
	t.Helper()
	cmd := exec.Command(dshfsBin(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(limit):
		unwedge()
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("dshfs %s did not finish within %v beside a stopped mount; stderr:\n%s", strings.Join(args, " "), limit, errb.String())
	}
	t.Logf("dshfs %s: %v", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	r := result{stdout: out.Bytes(), stderr: errb.Bytes()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestStoppedMount: with a dshfs mount stopped (SIGSTOP: every request to it blocks in the kernel,
// uninterruptibly), backup of another store, mount of another store and check still finish, warning
// about the stopped mount by name where they skip it; a backup of a path inside it is refused rather than
// hung. Not parallel: while the mount is stopped, another test's backup would wait on it and warn.
func TestStoppedMount(t *testing.T) {
	stopped := startMount(t, "--read-only", demoStore(t))
	mustRun(t, "ls", filepath.Join(stopped.dir, "sessions")) // serving before it is stopped
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = stopped.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(resume) // runs before the mount's own cleanup (SIGTERM), whatever failed
	stopped.signal(t, syscall.SIGSTOP)
	waitFor(t, "the mount process to stop", func() (bool, string) {
		b, _ := os.ReadFile(filepath.Join("/proc", itoa(int64(stopped.cmd.Process.Pid)), "stat"))
		f := strings.Fields(string(b))
		return len(f) > 2 && f[2] == "T", string(b)
	})
	// the stopped mount really does not answer: a read of it is left blocked (abandoned by this process,
	// freed by SIGCONT)
	read := make(chan error, 1)
	go func() { _, err := os.ReadFile(filepath.Join(stopped.dir, "status.json")); read <- err }()
	select {
	case err := <-read:
		t.Fatalf("a read of the stopped mount returned: %v", err)
	case <-time.After(500 * time.Millisecond): // the absence of an answer can only be awaited for a while
	}

	const limit = 30 * time.Second
	other := demoStore(t)
	dest := filepath.Join(t.TempDir(), "b")
	r := within(t, limit, resume, "backup", other, dest)
	if r.code != 0 || !strings.Contains(string(r.stderr), "skipping the dshfs mount at "+stopped.dir) {
		t.Errorf("backup beside a stopped mount: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := within(t, limit, resume, "verify", dest); r.code != 0 {
		t.Errorf("verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := within(t, limit, resume, "check", other); r.code != 0 {
		t.Errorf("check beside a stopped mount: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := within(t, limit, resume, "backup", filepath.Join(stopped.dir, "sessions"), filepath.Join(t.TempDir(), "b")); r.code != 1 ||
		!strings.Contains(string(r.stderr), "inside the dshfs mount at "+stopped.dir) || !strings.Contains(string(r.stderr), "did not answer") {
		t.Errorf("backup of the stopped mount's sessions/: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := within(t, limit, resume, "mount", "--read-only", other, stopped.dir); r.code != 2 || !strings.Contains(string(r.stderr), "stopped or wedged") {
		t.Errorf("mount onto the stopped mount: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// a mount of another store comes up and serves, and goes away on SIGTERM
	mnt := freshMountpoint(t)
	m := startMountAt(t, mnt, nil, []string{dshfsBin(t), "mount", "--read-only", other, mnt})
	waitFor(t, "the second mount to serve", func() (bool, string) {
		_, err := os.Stat(filepath.Join(mnt, "status.json"))
		return err == nil, m.log.String()
	})
	m.stop(t)

	resume()
	select {
	case <-read:
	case <-time.After(deadline):
		t.Errorf("the read of the resumed mount did not return within %v", deadline)
	}
}
