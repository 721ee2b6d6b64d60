package mount

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHolders names a process whose working directory lies below a path, and no one for a path nobody uses.
func TestHolders(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "30")
	cmd.Dir = sub
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	want := fmt.Sprintf("pid %d (sleep: cwd)", cmd.Process.Pid)
	if got := holders(dir, 8, 5*time.Second); len(got) != 1 || got[0] != want {
		t.Errorf("holders of %s: %q, want [%q]", dir, got, want)
	}
	if got := holders(dir+"-not", 8, 5*time.Second); len(got) != 0 {
		t.Errorf("holders of an unused path: %q", got)
	}
}

// TestBackoff: the first report at once, the next after 5 s, then doubling up to 5 minutes.
func TestBackoff(t *testing.T) {
	var b backoff
	now := time.Unix(1000, 0)
	var at []time.Duration
	for s := 0; s <= 1300; s++ {
		if b.due(now.Add(time.Duration(s) * time.Second)) {
			at = append(at, time.Duration(s)*time.Second)
		}
	}
	want := []time.Duration{0, 5 * time.Second, 15 * time.Second, 35 * time.Second, 75 * time.Second, 155 * time.Second,
		315 * time.Second, 615 * time.Second, 915 * time.Second, 1215 * time.Second}
	if fmt.Sprint(at) != fmt.Sprint(want) {
		t.Errorf("reports at %v, want %v", at, want)
	}
}

// TestUnmountError keeps the kernel's reason of fusermount3's failure, not its wrapping.
func TestUnmountError(t *testing.T) {
	err := errors.New("fusermount3: failed to unmount /tmp/x/mnt: Device or resource busy\n (code exit status 1)\n")
	if got := unmountError(err); got != "Device or resource busy" {
		t.Errorf("unmountError = %q", got)
	}
	if got := unmountError(errors.New("device or resource busy")); !strings.Contains(got, "busy") {
		t.Errorf("unmountError of a plain error = %q", got)
	}
}
