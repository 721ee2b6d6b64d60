package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStoreMistakes: a missing STORE is an error for commands that read (exit 2), a directory holding no
// session layout is a warning, a session file given as STORE says what to give instead, a missing id is
// its own kind, and control characters in ids never break one-line-per-session output.
func TestStoreMistakes(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope")
	for _, args := range [][]string{{"ls", missing}, {"check", missing}, {"cat", missing, "x"}} {
		code, _, stderr := runCLI(args...)
		if code != 2 || !strings.Contains(stderr, "no such file or directory") {
			t.Errorf("%v: exit %d %q", args, code, stderr)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "demo", "sessions"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI("ls", filepath.Join(dir, "demo"))
	if code != 0 || !strings.Contains(stderr, "holds no sessions (did you mean "+filepath.Join(dir, "demo", "sessions")+"?)") {
		t.Errorf("ls of DIR instead of DIR/sessions: exit %d %q", code, stderr)
	}
	file := filepath.Join(dir, "session.jsonl")
	if err := os.WriteFile(file, []byte(`{"type":"session"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI("ls", file); code != 2 || !strings.Contains(stderr, "is a file, not a store") {
		t.Errorf("ls of a session file: exit %d %q", code, stderr)
	}
	store := filepath.Join(dir, "store")
	if code, _, stderr := runCLI("create", store, "a\nb\tc"); code != 0 {
		t.Fatalf("create: %d %s", code, stderr)
	}
	code, stdout, _ := runCLI("ls", store)
	if code != 0 || strings.Count(stdout, "\n") != 1 || !strings.HasPrefix(stdout, `a\nb\tc`+"\t") {
		t.Errorf("ls of an id with control characters: %q", stdout)
	}
	code, stdout, _ = runCLI("check", store, "missing-id")
	if code != 2 || !strings.HasPrefix(stdout, "missing-id\tmissing\t") {
		t.Errorf("check of a missing id: exit %d %q", code, stdout)
	}
	for _, args := range [][]string{{"version"}, {"help", "fork"}, {"fork", "--help"}, {"mount", "-h"}} {
		if code, stdout, _ := runCLI(args...); code != 0 || stdout == "" {
			t.Errorf("%v: exit %d %q", args, code, stdout)
		}
	}
}

// TestAbortHint: a hung mount's hint names its fusectl connection (the mount's device number) and mounts
// fusectl first only where it is not mounted.
func TestAbortHint(t *testing.T) {
	const mnt = "/tmp/x y/mnt"
	table := "22 1 0:20 / /sys rw - sysfs sysfs rw\n" +
		"90 22 0:57 / /tmp/x\\040y/mnt rw,nosuid - fuse.dshfs dshfs rw,user_id=0\n"
	got := abortHintFrom([]byte(table), mnt)
	if want := "mount -t fusectl none /sys/fs/fuse/connections; echo 1 > /sys/fs/fuse/connections/57/abort"; !strings.Contains(got, want) {
		t.Errorf("hint %q lacks %q", got, want)
	}
	got = abortHintFrom([]byte(table+"30 22 0:35 / /sys/fs/fuse/connections rw - fusectl fusectl rw\n"), mnt)
	if strings.Contains(got, "mount -t fusectl") || !strings.Contains(got, "echo 1 > /sys/fs/fuse/connections/57/abort") {
		t.Errorf("hint with fusectl mounted: %q", got)
	}
	if got := abortHintFrom([]byte(table), "/elsewhere"); got != "" {
		t.Errorf("hint for a path that is no mount: %q", got)
	}
}
