package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// counters are the root stats.json's counters of the read path.
type counters struct{ Decodes, IndexHits, Readahead, Evicted, Primed int }

// storeCounters reads the root stats.json's counters.
func storeCounters(t *testing.T, mnt string) counters {
	t.Helper()
	var st counters
	if err := json.Unmarshal(readFile(t, filepath.Join(mnt, "stats.json")), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func statSize(t *testing.T, path string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(strings.TrimSpace(string(mustRun(t, "stat", "-c", "%s", path))), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPersistentIndex: a session read once is stat'ed after an eviction and after a remount without being
// decoded again (counted, not timed); a tampered or truncated index file is detected and rebuilt; an
// artifact replaced by one of the same size and mtime is not served from the old entry.
func TestPersistentIndex(t *testing.T) {
	t.Parallel()
	store, _ := emptyStore(t, "none")
	mustRun(t, gensessionBin(t), "-mode", "none", "-id", "s", store, "60")
	cacheDir := t.TempDir()
	// budgets of 0 cache nothing (every read decodes; a stat can only be served by the index), and the
	// kernel caches no attribute, so every stat reaches the mount
	cfg := writeConfig(t, "[fuse]\nentry_timeout = \"0s\"\nattr_timeout = \"0s\"\n[cache]\nindex = true\nsessions_bytes = 0\nviews_bytes = 0\ndir = %q\n", cacheDir)
	files := []string{"header.json", "raw.jsonl", "events.jsonl", "surface.jsonl", "messages.jsonl", "shadowed.jsonl"}

	m := startMount(t, "--read-only", "--config", cfg, store)
	sess := filepath.Join(m.dir, "sessions", "s")
	sizes := map[string]int64{}
	for _, f := range files {
		sizes[f] = int64(len(readFile(t, filepath.Join(sess, f))))
	}
	d0 := storeCounters(t, m.dir).Decodes
	for _, f := range files { // the decoded session is not kept (budget 0): only the index knows the sizes
		if got := statSize(t, filepath.Join(sess, f)); got != sizes[f] {
			t.Errorf("%s: stat says %d bytes, the file holds %d", f, got, sizes[f])
		}
	}
	c1 := storeCounters(t, m.dir)
	d1, h1 := c1.Decodes, c1.IndexHits
	if d1 != d0 || h1 < len(files) {
		t.Errorf("stats after an eviction: %d decodes (before %d), %d index hits", d1, d0, h1)
	}
	m.stop(t)

	remount := func(what string) (decodes int) {
		t.Helper()
		m := startMount(t, "--read-only", "--config", cfg, store)
		// (not ls -l: the session's status.json, which a listing stats too, is rendered from the
		// decoded session by design — it reports live state)
		for _, f := range files {
			if got := statSize(t, filepath.Join(m.dir, "sessions", "s", f)); got != sizes[f] {
				t.Errorf("%s: %s: stat says %d bytes, the file holds %d", what, f, got, sizes[f])
			}
		}
		decodes = storeCounters(t, m.dir).Decodes
		m.stop(t)
		return decodes
	}
	if d := remount("remount"); d != 0 {
		t.Errorf("stats after a remount decoded %d times", d)
	}

	idx, _ := filepath.Glob(filepath.Join(cacheDir, "index", "*.pack"))
	if len(idx) != 1 {
		t.Fatalf("pack files %v", idx)
	}
	good := readFile(t, idx[0])
	// tampered: a size changed, the checksum not
	bad := regexp.MustCompile(`view events (\d+)`).ReplaceAllFunc(good, func(b []byte) []byte {
		n, _ := strconv.Atoi(string(b[len("view events "):]))
		return []byte("view events " + strconv.Itoa(n+1))
	})
	if bytes.Equal(bad, good) {
		t.Fatal("could not tamper with the index")
	}
	for _, c := range []struct {
		what string
		data []byte
	}{{"tampered", bad}, {"truncated", good[:len(good)/2]}} {
		if err := os.WriteFile(idx[0], c.data, 0o600); err != nil {
			t.Fatal(err)
		}
		if d := remount(c.what + " index"); d == 0 {
			t.Errorf("a %s index entry was served", c.what)
		}
		if d := remount("rebuilt after the " + c.what + " one"); d != 0 {
			t.Errorf("the index was not rebuilt after a %s entry: %d decodes", c.what, d)
		}
	}

	// replaced by an artifact of the same size and mtime: one byte of text changed
	arts, _ := filepath.Glob(filepath.Join(store, "*", "s", "session.jsonl"))
	if len(arts) != 1 {
		t.Fatalf("artifact %v", arts)
	}
	old := readFile(t, arts[0])
	i := bytes.Index(old, []byte(`"text":"`))
	if i < 0 {
		t.Fatal("no text to change")
	}
	i += len(`"text":"`)
	repl := append([]byte(nil), old...)
	if repl[i] == 'x' {
		repl[i] = 'y'
	} else {
		repl[i] = 'x'
	}
	fi, _ := os.Stat(arts[0])
	tmp := arts[0] + ".new"
	if err := os.WriteFile(tmp, repl, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, time.Now(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, arts[0]); err != nil {
		t.Fatal(err)
	}
	m = startMount(t, "--read-only", "--config", cfg, store)
	statSize(t, filepath.Join(m.dir, "sessions", "s", "events.jsonl"))
	if d := storeCounters(t, m.dir).Decodes; d == 0 {
		t.Errorf("the entry of the replaced artifact (same size and mtime) was served")
	}
	if got := readFile(t, filepath.Join(m.dir, "sessions", "s", "raw.jsonl")); !bytes.Equal(got, repl) {
		t.Errorf("raw.jsonl does not show the replacement")
	}
}

// TestLargeViewServedFromIndexFile: a view of 1 MiB or more is rendered into its index file and served from
// there (not held in the mount's memory): cat, stat and reads at any offset give the CLI's bytes, the file
// in the cache directory holds exactly them, and `tail -f` on one descriptor follows an external append
// from the old file onto the new one.
func TestLargeViewServedFromIndexFile(t *testing.T) {
	t.Parallel()
	store, _ := emptyStore(t, "none")
	const id = "large"
	mustRun(t, gensessionBin(t), "-mode", "none", "-id", id, store, "9000")
	cacheDir := t.TempDir()
	cfg := writeConfig(t, "[cache]\nindex = true\ndir = %q\n", cacheDir)
	m := startMount(t, "--read-only", "--config", cfg, store)
	file := filepath.Join(m.dir, "sessions", id, "events.jsonl")
	want := cli(t, 0, "cat", "--view", "events", store, id)
	if len(want) < 1<<20 {
		t.Fatalf("the events view is %d bytes: the test needs one of 1 MiB or more", len(want))
	}
	if got := readFile(t, file); !bytes.Equal(got, want) {
		t.Fatalf("events.jsonl through the mount (%d bytes) differs from the CLI view (%d bytes)", len(got), len(want))
	}
	if n := statSize(t, file); n != int64(len(want)) {
		t.Errorf("stat says %d bytes, the view is %d", n, len(want))
	}
	// a read in the middle, across the kernel's read size
	off := len(want)/2 + 12345
	got := mustRun(t, "dd", "if="+file, "bs=65536", "skip="+strconv.Itoa(off), "count=300000", "status=none", "iflag=skip_bytes,count_bytes")
	if !bytes.Equal(got, want[off:off+300000]) {
		t.Errorf("a read at offset %d differs from the view", off)
	}
	var held []string
	views, _ := filepath.Glob(filepath.Join(cacheDir, "index", "*.events"))
	for _, v := range views {
		if bytes.Equal(readFile(t, v), want) {
			held = append(held, v)
		}
	}
	if len(held) != 1 {
		t.Fatalf("the cache directory holds the view in %d files (of %v), want 1", len(held), views)
	}

	var out syncBuffer
	tail := exec.Command("tail", "-n", "0", "-f", "-s", "0.1", file)
	tail.Stdout = &out
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = tail.Process.Signal(syscall.SIGTERM)
		_ = tail.Wait()
	})
	waitFor(t, "tail to open "+file, func() (bool, string) { return openedBy(tail.Process.Pid, file), "" })
	mustRun(t, gensessionBin(t), "-mode", "none", "-id", id, "-append", store, "1")
	after := cli(t, 0, "cat", "--view", "events", store, id)
	if !bytes.HasPrefix(after, want) || len(after) == len(want) {
		t.Fatal("gensession -append did not extend the log")
	}
	waitFor(t, "tail -f to show the appended events", func() (bool, string) {
		return out.String() == string(after[len(want):]), out.String()
	})
	waitFor(t, "cat to show the grown view", func() (bool, string) {
		got := readFile(t, file)
		return bytes.Equal(got, after), fmt.Sprintf("%d bytes, want %d", len(got), len(after))
	})
}

// packEntries frames the pack files in the index directory of cacheDir the way a reader does and returns
// how many keys have an entry: the last record of a key is its entry, and an empty one is a tombstone.
func packEntries(t *testing.T, cacheDir string) int {
	t.Helper()
	packs, _ := filepath.Glob(filepath.Join(cacheDir, "index", "*.pack"))
	if len(packs) != 1 {
		t.Fatalf("pack files %v", packs)
	}
	data := readFile(t, packs[0])
	last := map[string]int{}
	for len(data) > 0 {
		nl := bytes.IndexByte(data, '\n')
		f := strings.Fields(string(data[:max(nl, 0)]))
		if nl < 0 || len(f) != 4 || f[0]+" "+f[1] != "dshfs-pack 1" {
			t.Fatalf("the pack does not frame at %q", data[:min(len(data), 60)])
		}
		n, err := strconv.Atoi(f[3])
		if err != nil || nl+1+n > len(data) {
			t.Fatalf("a record of %s bytes at the end of %d", f[3], len(data))
		}
		last[f[2]] = n
		data = data[nl+1+n:]
	}
	entries := 0
	for _, n := range last {
		if n > 0 {
			entries++
		}
	}
	return entries
}

// TestIndexForgetsRemovedSessions: the index's pack keeps no entry of a session removed from the store —
// removed while the mount watches (the watcher's pass) or while no mount runs (the next mount's start).
func TestIndexForgetsRemovedSessions(t *testing.T) {
	t.Parallel()
	store, _ := emptyStore(t, "none")
	for _, id := range []string{"a", "b", "c"} {
		mustRun(t, gensessionBin(t), "-mode", "none", "-id", id, store, "30")
	}
	cacheDir := t.TempDir()
	cfg := writeConfig(t, "[cache]\nindex = true\ndir = %q\n", cacheDir)
	dirOf := func(id string) string {
		t.Helper()
		d, _ := filepath.Glob(filepath.Join(store, "*", id))
		if len(d) != 1 {
			t.Fatalf("session %s: %v", id, d)
		}
		return d[0]
	}

	m := startMount(t, "--read-only", "--config", cfg, store)
	for _, id := range []string{"a", "b", "c"} {
		readFile(t, filepath.Join(m.dir, "sessions", id, "events.jsonl"))
	}
	// the mount appends its records in batches, within 50 ms of a batch's first
	waitFor(t, "the three sessions' entries in the pack", func() (bool, string) {
		n := packEntries(t, cacheDir)
		return n == 3, fmt.Sprintf("%d entries after reading three sessions", n)
	})
	if err := os.RemoveAll(dirOf("a")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the watcher to forget session a", func() (bool, string) {
		n := packEntries(t, cacheDir)
		return n == 2, fmt.Sprintf("%d entries", n)
	})
	m.stop(t)

	if err := os.RemoveAll(dirOf("b")); err != nil {
		t.Fatal(err)
	}
	m = startMount(t, "--read-only", "--config", cfg, store)
	waitFor(t, "the next mount to forget session b", func() (bool, string) {
		n := packEntries(t, cacheDir)
		return n == 1, fmt.Sprintf("%d entries", n)
	})
	if got := readFile(t, filepath.Join(m.dir, "sessions", "c", "events.jsonl")); len(got) == 0 {
		t.Fatal("session c is empty")
	}
	m.stop(t)
}
