package pages

import (
	"bytes"
	"math"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugeSize is the size of a transparent huge page on amd64 and arm64 with 4 KiB pages; madvise rounds
// nothing itself, so the advice covers the whole huge pages inside an allocation.
const hugeSize = 2 << 20

// HugeHeap asks, once per process, for transparent huge pages on the next n bytes of address space the
// heap will use, and reports whether it did. Commands call it through Expect, when a large load comes.
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

// AllowHuge lets Expect reserve n bytes of heap with huge pages (HugeHeap) when a large load comes; a
// process that never calls it (a mount) never asks for them.
func AllowHuge(n int) { hugeAllowed.Store(int64(n)) }

var hugeAllowed atomic.Int64

// hugeMin is the fresh memory from which Expect reserves: the reservation costs a collection, about 8 ms
// of a command's start on these VMs (an empty `dshfs ls`: 17–19 ms without, 25–26 ms with), and a 4 KiB
// fault 11–14 µs, so it pays from a few MB; a small session's load stays well below that.
const hugeMin = 16 << 20

// reserve is HugeHeap, a variable so tests can watch Expect.
var reserve = HugeHeap

// Expect says the process is about to write about n bytes of fresh memory: the load of a large session,
// estimated from its stored size. In a process that allows it (AllowHuge), the first Expect of at least
// hugeMin gives the heap its huge pages before the load allocates.
func Expect(n int64) {
	if allowed := hugeAllowed.Load(); allowed > 0 && n >= hugeMin {
		reserve(int(allowed))
	}
}

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
	// No collection may see the allocation alive: one that did would count it as live heap, and a soft
	// limit that follows the live heap (fs.SoftMemoryLimit) would let the heap grow half as much again
	// above it before the next (a SQLite load peaked at 289 MiB instead of 170). So the limit and the
	// pacing are lifted until the allocation is dropped and collected, and restored after.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
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
