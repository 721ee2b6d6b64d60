package pages

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
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
