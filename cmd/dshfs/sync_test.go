package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/internal/fixtures"
)

// TestSyncUsage: sync's mistakes are usage errors (exit 2) naming what to give instead, and a fleet store
// that cannot be reached is an error (exit 2) that never shows the DSN's password. (Syncing itself is
// tested against a real server in package fleetsync and, as the binary, in integration.)
func TestSyncUsage(t *testing.T) {
	raw := fixtures.Path(t, "generated", "raw")
	dead := "postgres://u:hunter2-secret@/db?host=" + filepath.Join(t.TempDir(), "nowhere") + "&connect_timeout=2"
	for _, c := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"no arguments", []string{"sync"}, "sync needs SRC and DST"},
		{"one argument", []string{"sync", raw}, "sync needs SRC and DST"},
		{"DST not a fleet store", []string{"sync", raw, t.TempDir()}, "sync's DST is a fleet store: postgres://"},
		{"SRC a fleet store", []string{"sync", "postgres://x@/db", "postgres://y@/db"}, "sync's SRC is a host's store"},
		{"release without an id", []string{"sync", raw, "postgres://x@/db", "--release"}, "flag --release needs a value"},
		{"host without a name", []string{"sync", raw, "postgres://x@/db", "--host"}, "flag --host needs a value"},
		{"unknown flag", []string{"sync", "--verify", raw, "postgres://x@/db"}, "usage: dshfs sync [--config FILE] [--watch]"},
		{"missing SRC", []string{"sync", filepath.Join(t.TempDir(), "none"), "postgres://x@/db"}, "no such file"},
		{"unreachable DST", []string{"sync", raw, dead}, "fleet store"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, stderr := runCLI(c.args...)
			if code != 2 || !strings.Contains(stderr, c.stderr) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q: want exit 2 and %q", code, out, stderr, c.stderr)
			}
			if strings.Contains(stderr, "hunter2") {
				t.Errorf("the password shows: %q", stderr)
			}
		})
	}
	code, out, _ := runCLI("help", "sync")
	if code != 0 || !strings.HasPrefix(out, "dshfs sync [--config FILE] [--watch] [--release ID] [--host NAME] SRC DST\n") {
		t.Errorf("help sync: exit %d, %q", code, out)
	}
}
