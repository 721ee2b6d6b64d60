package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestMountStatsApartFromStatus: reading files moves the mount's cache counters, and they are in
// stats.json, not in status.json — so `rsync -a MNT/ COPY/ && diff -r MNT COPY` finds status.json as it
// was copied after a walk over every session, and only stats.json moved.
func TestMountStatsApartFromStatus(t *testing.T) {
	t.Parallel()
	store, _ := emptyStore(t, "none")
	for _, id := range []string{"a", "b", "c"} {
		mustRun(t, gensessionBin(t), "-mode", "none", "-id", id, store, "40")
	}
	// budgets of 0 keep no decoded session: every read below decodes again, so the counters must move
	cfg := writeConfig(t, "[cache]\nsessions_bytes = 0\nviews_bytes = 0\ndir = %q\n", t.TempDir())
	mnt := mountStore(t, store, "--read-only", "--config", cfg)

	dest := filepath.Join(t.TempDir(), "copy")
	mustRun(t, "rsync", "-a", mnt+"/", dest+"/")
	copied := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dest, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// from the mount, not the copy: rsync sends the size its scan saw, and the counters may have grown a
	// digit by the time it read the file
	before := readFile(t, filepath.Join(mnt, "stats.json"))
	for _, id := range []string{"a", "b", "c"} {
		for _, f := range []string{"events.jsonl", "messages.jsonl", "surface.jsonl"} {
			readFile(t, filepath.Join(mnt, "sessions", id, f))
		}
	}

	if r := run(t, "", "diff", "-r", "--no-dereference", "-x", "stats.json", mnt, dest); r.code != 0 {
		t.Fatalf("diff -r of the mount and its rsync copy after reads (exit %d):\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := run(t, "", "diff", "-r", "--no-dereference", mnt, dest); r.code == 0 {
		t.Error("diff -r reports no difference in stats.json after the reads: its counters did not move")
	} else if want := "diff -r --no-dereference " + mnt + "/stats.json " + dest + "/stats.json\n"; !bytes.HasPrefix(r.stdout, []byte(want)) {
		t.Errorf("diff -r after reads reports more than stats.json:\n%s", r.stdout)
	}
	if now, was := readFile(t, filepath.Join(mnt, "status.json")), copied("status.json"); !bytes.Equal(now, was) {
		t.Errorf("status.json changed with reads:\nnow %s\nwas %s", now, was)
	}

	var was, now counters
	if err := json.Unmarshal(before, &was); err != nil {
		t.Fatalf("stats.json %q: %v", before, err)
	}
	now = storeCounters(t, mnt)
	if now.Decodes <= was.Decodes {
		t.Errorf("stats.json decodes: %d after reading three sessions, %d before", now.Decodes, was.Decodes)
	}
	checkKeys(t, "stats.json", before, storeStatsKeys)
}
