package pages

import (
	"bytes"
	"os"
	"runtime/debug"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugeSize is the size of a transparent huge page on amd64 and arm64 with 4 KiB pages; madvise rounds
// nothing itself, so the advice covers the whole huge pages inside an allocation.
const hugeSize = 2 << 20

// HugeHeap asks, once per process, for transparent huge pages on the next n bytes of address space the
// heap will use, and reports whether it did.
//
// Why: a one-shot command that loads a large session writes 160 MB of fresh memory, and every 4 KiB page
// of it is a fault. On this project's VMs a fault costs 11–14 µs (writing a page of each of 128 MiB
// fresh: 0.36–0.49 s; with huge pages: 16–26 ms): 32,600 faults were 0.25–0.34 s of system time in a
// 0.5 s cold `cat` of the 500k-event session. The kernel's default for anonymous memory is huge pages
// only where a program asks (`enabled` is "madvise"), and the Go runtime no longer asks for its heap.
//
// How: the runtime grows the heap by mapping address space, and a fault inside a mapping that carries
// MADV_HUGEPAGE maps a whole huge page. One allocation of n bytes makes the runtime map n bytes at once;
// the advice is given on that mapping, and the allocation is dropped and its memory returned
// (debug.FreeOSMemory: the pages were never touched, and released pages do not count against a soft
// memory limit), so the next allocations of the process reuse those addresses, advice and all.
//
// It does nothing where it cannot pay or could hurt: where the kernel's setting is not "madvise"
// ("always" gives huge pages anyway, "never" none), under a limit on the address space (RLIMIT_AS: the
// reservation could fail a process that would have fitted, and the runtime cannot recover from that),
// or when DSHFS_NO_HUGEPAGES is set. A huge page stays resident while any of it is in use, so this is
// for commands whose heap is mostly what they keep, not for a long-running mount.
func HugeHeap(n int) bool {
	hugeOnce.Do(func() { hugeDone = hugeHeap(n) })
	return hugeDone
}

var (
	hugeOnce sync.Once
	hugeDone bool
)

// thpSetting is the kernel's setting for anonymous memory, a variable so tests can point it elsewhere.
var thpSetting = "/sys/kernel/mm/transparent_hugepage/enabled"

func hugeHeap(n int) bool {
	if os.Getenv("DSHFS_NO_HUGEPAGES") != "" || n < 2*hugeSize || thpMode() != "madvise" {
		return false
	}
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_AS, &lim) != nil || lim.Cur != unix.RLIM_INFINITY {
		return false
	}
	ok := adviseHuge(make([]byte, n))
	debug.FreeOSMemory()
	return ok
}

// adviseHuge gives MADV_HUGEPAGE on the whole huge pages inside b.
func adviseHuge(b []byte) bool {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := (p + hugeSize - 1) &^ (hugeSize - 1)
	hi := (p + uintptr(len(b))) &^ (hugeSize - 1)
	return lo < hi && unix.Madvise(b[lo-p:hi-p], unix.MADV_HUGEPAGE) == nil
}

// thpMode is the bracketed word of the kernel's setting ("always [madvise] never"), or "" when it cannot
// be read.
func thpMode() string {
	b, err := os.ReadFile(thpSetting)
	if err != nil {
		return ""
	}
	i := bytes.IndexByte(b, '[')
	j := bytes.IndexByte(b, ']')
	if i < 0 || j < i {
		return ""
	}
	return string(b[i+1 : j])
}
