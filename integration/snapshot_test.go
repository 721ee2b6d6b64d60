package integration

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSnapshotSurvivesReplacement: a reader holding events.jsonl open while the artifact is renamed over by
// shorter content reads its snapshot to the end — never cut at the new length, never a mix — while a new
// open sees the new content. As on a disk filesystem, the replaced artifact's files are new inodes.
func TestSnapshotSurvivesReplacement(t *testing.T) {
	t.Parallel()
	store, cfg := emptyStore(t, "none")
	cli(t, 0, "create", "--cwd", "/p", store, "snap")
	var all []string
	for turn := 1; len(strings.Join(all, "\n")) < 3<<20; turn++ { // larger than the kernel's read-ahead
		all = append(all, turnLines(turn, int64(len(all)), false)...)
	}
	in := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(in, []byte(strings.Join(all, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, 0, "append", store, "snap", in)
	artifact := artifactOf(t, store, "snap")
	original := readFile(t, artifact)

	m := startMount(t, "--config", cfg, "--read-only", store)
	events := filepath.Join(m.dir, "sessions", "snap", "events.jsonl")
	want := mustRun(t, "cat", events)
	f, err := os.Open(events)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := make([]byte, 64<<10)
	if _, err := io.ReadFull(f, head); err != nil {
		t.Fatal(err)
	}

	// Replace the artifact with its first lines only: a much shorter session.
	cut := 0
	for i := 0; i < 40; i++ {
		cut += bytes.IndexByte(original[cut:], '\n') + 1
	}
	tmp := artifact + ".new"
	if err := os.WriteFile(tmp, original[:cut], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, artifact); err != nil {
		t.Fatal(err)
	}
	replaced := cli(t, 0, "cat", "--view", "events", store, "snap")
	if len(replaced) >= len(want) {
		t.Fatalf("the replacement is not shorter: %d bytes, was %d", len(replaced), len(want))
	}
	waitFor(t, "a new open to see the replaced artifact", func() (bool, string) {
		got := run(t, "", "cat", events)
		return bytes.Equal(got.stdout, replaced), strconv.Itoa(len(got.stdout)) + " bytes"
	})
	// stat by path reports the new file once the watcher has seen the replacement; the open descriptor
	// still reports its snapshot
	waitFor(t, "stat of the path to report the new file", func() (bool, string) {
		out := strings.TrimSpace(string(mustRun(t, "stat", "-c", "%s", events)))
		return out == strconv.Itoa(len(replaced)), out
	})
	if fi, err := f.Stat(); err != nil || fi.Size() != int64(len(want)) {
		t.Errorf("fstat of the open snapshot: %v, %v; want size %d", fi.Size(), err, len(want))
	}
	rest, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("reading the rest of the snapshot: %v", err)
	}
	if got := append(head, rest...); !bytes.Equal(got, want) {
		t.Fatalf("the open reader got %d bytes, want its %d-byte snapshot (the new content is %d bytes)", len(got), len(want), cut)
	}
	f.Close()
	m.stop(t)
}
