package pages

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestThpMode(t *testing.T) {
	defer func(old string) { thpSetting = old }(thpSetting)
	for _, c := range []struct{ text, want string }{
		{"always [madvise] never\n", "madvise"},
		{"[always] madvise never\n", "always"},
		{"always madvise [never]\n", "never"},
		{"always madvise never\n", ""},
		{"] [\n", ""},
		{"", ""},
	} {
		thpSetting = filepath.Join(t.TempDir(), "enabled")
		if err := os.WriteFile(thpSetting, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := thpMode(); got != c.want {
			t.Errorf("%q: %q, want %q", c.text, got, c.want)
		}
	}
	thpSetting = filepath.Join(t.TempDir(), "missing")
	if got := thpMode(); got != "" {
		t.Errorf("no setting: %q", got)
	}
}

// TestHugeHeap: after hugeHeap, a large allocation lands in a mapping the kernel was asked to back with
// huge pages (its VmFlags say "hg"), and hugeHeap declines where the setting, the environment or an
// address-space limit say so.
func TestHugeHeap(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		t.Skip("this kernel has no transparent huge pages:", err)
	}
	defer func(old string) { thpSetting = old }(thpSetting)
	setting := func(s string) {
		thpSetting = filepath.Join(t.TempDir(), "enabled")
		if err := os.WriteFile(thpSetting, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	setting("always madvise [never]\n")
	if hugeHeap(256 << 20) {
		t.Fatal("advised with the setting at never")
	}
	setting("always [madvise] never\n")
	t.Setenv("DSHFS_NO_HUGEPAGES", "1")
	if hugeHeap(256 << 20) {
		t.Fatal("advised with DSHFS_NO_HUGEPAGES set")
	}
	os.Unsetenv("DSHFS_NO_HUGEPAGES")
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &lim); err != nil {
		t.Fatal(err)
	}
	limited := lim
	limited.Cur = 1 << 44
	if err := unix.Setrlimit(unix.RLIMIT_AS, &limited); err != nil {
		t.Fatal(err)
	}
	declined := !hugeHeap(256 << 20)
	if err := unix.Setrlimit(unix.RLIMIT_AS, &lim); err != nil {
		t.Fatal(err)
	}
	if !declined {
		t.Fatal("advised under an address-space limit")
	}

	if !hugeHeap(256 << 20) {
		t.Fatal("not advised")
	}
	b := make([]byte, 32<<20)
	Touch(b)
	flags, err := vmFlags(uintptr(unsafe.Pointer(&b[len(b)/2])))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(" "+flags+" ", " hg ") {
		t.Fatalf("the next large allocation is in a mapping with flags %q, no hg", flags)
	}
}

// vmFlags is the VmFlags line of the mapping of /proc/self/smaps that holds addr.
func vmFlags(addr uintptr) (string, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return "", err
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmFlags:")), nil
		}
	}
	return "", fmt.Errorf("no mapping holds %#x (%v)", addr, sc.Err())
}

// TestExpect: Expect reserves only in a process that allows it, only for a load of at least hugeMin, and
// then the size allowed.
func TestExpect(t *testing.T) {
	defer func(old func(int) bool) { reserve = old }(reserve)
	defer AllowHuge(0)
	var got []int
	reserve = func(n int) bool { got = append(got, n); return true }
	AllowHuge(0)
	Expect(1 << 40)
	AllowHuge(192 << 20)
	Expect(hugeMin - 1)
	Expect(0)
	if len(got) != 0 {
		t.Fatalf("reserved %v: not allowed, or loads too small", got)
	}
	Expect(hugeMin)
	if len(got) != 1 || got[0] != 192<<20 {
		t.Fatalf("reserved %v, want [%d]", got, 192<<20)
	}
}

// TestHugeHeapUnderALimit: under a soft memory limit below the reservation and the default pacing, the
// reservation starts no collection of its own (one that would see it alive), only the one that frees it,
// and the limit and the pacing are restored after.
func TestHugeHeapUnderALimit(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		t.Skip("this kernel has no transparent huge pages:", err)
	}
	defer func(old string) { thpSetting = old }(thpSetting)
	thpSetting = filepath.Join(t.TempDir(), "enabled")
	if err := os.WriteFile(thpSetting, []byte("always [madvise] never\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100)) // the default pacing would collect at once too
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(64 << 20))
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if !hugeHeap(256 << 20) {
		t.Fatal("not advised")
	}
	runtime.ReadMemStats(&after)
	if n := after.NumGC - before.NumGC; n != 1 {
		t.Errorf("%d collections during the reservation, want 1 (the one that frees it)", n)
	}
	if limit := debug.SetMemoryLimit(-1); limit != 64<<20 {
		t.Errorf("memory limit %d after the reservation, want %d", limit, 64<<20)
	}
	if pct := debug.SetGCPercent(100); pct != 100 {
		t.Errorf("GOGC %d after the reservation, want 100", pct)
	}
}
