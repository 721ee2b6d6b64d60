package integration

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// readChars is what process pid has read through read(2) and its kind so far (/proc/PID/io rchar).
func readChars(t *testing.T, pid int) int64 {
	t.Helper()
	for _, line := range strings.Split(string(readFile(t, fmt.Sprintf("/proc/%d/io", pid))), "\n") {
		if v, ok := strings.CutPrefix(line, "rchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no rchar in /proc/PID/io")
	return 0
}

// uncachedSession mounts, read-only, a store of one plain session "s" of n events (gensession) with
// memory budgets of 0 and a cache directory of its own: no rendering stays in memory, so whatever the
// kernel does not hold is read from the index files or decoded (and counted in the mount's rchar). It
// returns the store, the configuration, the cache directory, the mount and its events.jsonl.
func uncachedSession(t *testing.T, n string) (store, cfg, cache string, m *mountProc, events string) {
	t.Helper()
	store, _ = emptyStore(t, "none")
	mustRun(t, gensessionBin(t), "-mode", "none", "-id", "s", store, n)
	cache = t.TempDir()
	cfg = writeConfig(t, "[cache]\nindex = true\nsessions_bytes = 0\nviews_bytes = 0\ndir = %q\n", cache)
	m = startMount(t, "--read-only", "--config", cfg, store)
	return store, cfg, cache, m, filepath.Join(m.dir, "sessions", "s", "events.jsonl")
}

// TestKeptPageCache: a repeated open of an unchanged view keeps the kernel's page cache and reads none of
// the view's bytes (a repeated grep over a large store reads no view from disk); pages the kernel dropped
// are served again byte-identical from the index, without a decode; and a descriptor opened on the kept
// cache, whose session then grows, reads the bytes it opened followed by the growth, never an error. The
// kernel sends no FLUSH for a view (FOPEN_NOFLUSH), and stops sending FLUSH to a read-only mount after the
// first (fs.noFlush, for kernels before 5.16).
func TestKeptPageCache(t *testing.T) {
	t.Parallel()
	store, _, cache, m, f := uncachedSession(t, "300")
	pid := m.cmd.Process.Pid
	want := cli(t, 0, "cat", "--view", "events", store, "s")

	if got := mustRun(t, "cat", f); !bytes.Equal(got, want) { // the first open renders
		t.Fatalf("events.jsonl differs from dshfs cat (%d bytes, want %d)", len(got), len(want))
	}
	d0 := storeCounters(t, m.dir).Decodes
	before := readChars(t, pid)
	if got := mustRun(t, "cat", f); !bytes.Equal(got, want) {
		t.Fatalf("a repeated cat differs from dshfs cat")
	}
	if n := readChars(t, pid) - before; n >= int64(len(want))/2 {
		t.Errorf("a repeated open of the unchanged view read %d bytes (the view has %d)", n, len(want))
	}

	// the kernel drops the file's pages: the next reads reach the mount, which serves them from the index
	// once its batch of records is in the pack (within 50 ms of the batch's first record)
	waitFor(t, "the view's entry in the pack", func() (bool, string) {
		n := packEntries(t, cache)
		return n == 1, fmt.Sprintf("%d entries", n)
	})
	mustRun(t, "dd", "if="+f, "iflag=nocache", "count=0", "status=none")
	before = readChars(t, pid)
	if got := mustRun(t, "cat", f); !bytes.Equal(got, want) {
		t.Fatalf("cat after the page cache was dropped differs from dshfs cat")
	}
	if n := readChars(t, pid) - before; n < int64(len(want)) {
		t.Errorf("after the page cache was dropped the mount read %d bytes, less than the view's %d: were the pages dropped?", n, len(want))
	}
	if d := storeCounters(t, m.dir).Decodes; d != d0 {
		t.Errorf("serving dropped pages decoded the session (%d decodes, %d before)", d, d0)
	}

	// a descriptor opened on the kept cache; the pages dropped; the session grows; then the descriptor reads
	fd, err := os.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	mustRun(t, "dd", "if="+f, "iflag=nocache", "count=0", "status=none")
	mustRun(t, gensessionBin(t), "-mode", "none", "-id", "s", "-append", store, "1")
	grown := cli(t, 0, "cat", "--view", "events", store, "s")
	if len(grown) <= len(want) || !bytes.HasPrefix(grown, want) {
		t.Fatal("gensession -append did not extend the log")
	}
	got, err := io.ReadAll(fd)
	if err != nil {
		t.Fatalf("reading a descriptor opened before the session grew: %v; log:\n%s", err, m.log)
	}
	// the opened bytes, and — once the kernel learned the new size — the growth after them
	if !bytes.Equal(got, want) && !bytes.Equal(got, grown) {
		t.Errorf("the descriptor read %d bytes: neither the %d opened nor the %d grown", len(got), len(want), len(grown))
	}
	if strings.Contains(m.log.String(), "changed since it was opened") {
		t.Errorf("log:\n%s", m.log)
	}
	// no FLUSH for a view: its opens carry FOPEN_NOFLUSH, which kernels from 5.16 on honor; an older kernel
	// sends one, which the read-only mount answers with ENOSYS, and then no other after the closes above
	// (each would be logged)
	flushes := 1
	if kernelAtLeast(t, 5, 16) {
		flushes = 0
	}
	if n := strings.Count(m.log.String(), "FLUSH answered ENOSYS"); n != flushes {
		t.Errorf("the read-only mount was sent %d FLUSH requests, want %d; log:\n%s", n, flushes, m.log)
	}
}

// A lookup of a small view hands the view's bytes to the kernel (nodes/primer.go): the read that follows is
// served by the kernel alone, byte-identical — after a rendering, and after a remount, from the persistent
// index, without a decode; and once the session grows, a read gets the grown bytes, never the primed ones.
func TestPrimedPageCache(t *testing.T) {
	t.Parallel()
	store, cfg, _, m, f := uncachedSession(t, "100")
	want := cli(t, 0, "cat", "--view", "events", store, "s")

	statThenCat := func(m *mountProc, what string) {
		t.Helper()
		if n := statSize(t, f); n != int64(len(want)) {
			t.Fatalf("%s: stat: %d bytes, want %d", what, n, len(want))
		}
		waitFor(t, what+": the view to be primed", func() (bool, string) {
			n := storeCounters(t, m.dir).Primed
			return n == 1, fmt.Sprintf("primed %d; log:\n%s", n, m.log)
		})
		before := readChars(t, m.cmd.Process.Pid)
		if got := mustRun(t, "cat", f); !bytes.Equal(got, want) {
			t.Fatalf("%s: cat of the primed view differs from dshfs cat (%d bytes, want %d)", what, len(got), len(want))
		}
		if n := readChars(t, m.cmd.Process.Pid) - before; n >= int64(len(want))/2 {
			t.Errorf("%s: the read after the priming reached the mount: it read %d bytes (the view has %d)", what, n, len(want))
		}
	}
	statThenCat(m, "rendered by the lookup")
	m.stop(t)
	m = startMount(t, "--read-only", "--config", cfg, store)
	f = filepath.Join(m.dir, "sessions", "s", "events.jsonl")
	statThenCat(m, "after a remount, from the index")
	if d := storeCounters(t, m.dir).Decodes; d != 0 {
		t.Errorf("after a remount the stat and the priming decoded the session %d times", d)
	}

	mustRun(t, gensessionBin(t), "-mode", "none", "-id", "s", "-append", store, "1")
	grown := cli(t, 0, "cat", "--view", "events", store, "s")
	if len(grown) <= len(want) {
		t.Fatal("gensession -append did not extend the log")
	}
	waitFor(t, "the mount to see the growth", func() (bool, string) {
		n := statSize(t, f)
		return n == int64(len(grown)), fmt.Sprintf("size %d, want %d", n, len(grown))
	})
	if got := mustRun(t, "cat", f); !bytes.Equal(got, grown) {
		t.Fatalf("cat after the session grew: %d bytes, want the grown %d (stale primed pages?)", len(got), len(grown))
	}
}

// kernelAtLeast reports whether the running kernel's version is major.minor or later.
func kernelAtLeast(t *testing.T, major, minor int) bool {
	t.Helper()
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var b []byte
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	var maj, min int
	if _, err := fmt.Sscanf(string(b), "%d.%d", &maj, &min); err != nil {
		t.Fatalf("kernel release %q: %v", b, err)
	}
	return maj > major || (maj == major && min >= minor)
}
