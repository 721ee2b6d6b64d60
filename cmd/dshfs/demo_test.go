package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoSpillResolves: the store `dshfs demo DIR` writes is a dsh home (DIR/sessions, DIR/spill), so the
// spill file its session cites is served by `dshfs cat` without any configuration, as a mount serves it.
func TestDemoSpillResolves(t *testing.T) {
	t.Setenv("DSH_HOME", t.TempDir()) // not the demo's home: the store's own home must do
	dir := t.TempDir()
	if code, out, errOut := runCLI("demo", dir); code != 0 {
		t.Fatalf("demo: %d %s %s", code, out, errOut)
	}
	code, out, errOut := runCLI("cat", "--view", "spill", filepath.Join(dir, "sessions"), "demo-spilled")
	if code != 0 || !strings.Contains(out, `"status":"present"`) || !strings.Contains(out, filepath.Join(dir, "spill")) {
		t.Fatalf("spill index: %d\n%s\n%s", code, out, errOut)
	}
}
