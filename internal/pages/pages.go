// Package pages writes fresh allocations before the garbage collector reads them.
//
// The collector scans the whole of a pointerful allocation, and its write barrier reads a destination
// before a bulk copy overwrites it. On memory the process never wrote, either read maps the kernel's zero
// page, and the first real write then takes a copy-on-write fault that flushes the TLBs of every other
// core running the process. On this project's 2-core VMs those faults were a tenth of the CPU time of a
// large session's load (perf: exceptions:page_fault_user, read faults by runtime.scanObject and
// runtime.bulkBarrierPreWrite followed by write-protect faults on the same pages). A page written first
// takes one ordinary fault instead.
package pages

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// size is the page size the touch steps by: a smaller one than the machine's only costs a few writes
// more, a larger one would skip pages.
const size = 4096

// populateMin is the size from which Touch asks the kernel to fault the pages in (MADV_POPULATE_WRITE,
// Linux 5.14) instead of writing each: one call instead of a fault per page, which matters because a
// large allocation can start a collection whose workers scan it while it is being touched, and a page
// they read first is a copy-on-write fault again.
const populateMin = 1 << 20

// Touch makes every page of s present and writable. s must be zero (a fresh make, or cleared): the values
// stay what they were. The fallback writes a zero byte per page through a byte view, without write
// barriers, which the collector does not need for a nil pointer overwritten with nil.
func Touch[T any](s []T) {
	if len(s) == 0 {
		return
	}
	var zero T
	n := uintptr(len(s)) * unsafe.Sizeof(zero)
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), n)
	if n >= populateMin {
		// madvise wants page-aligned bounds: populate the whole pages inside, write the two ends
		start := (uintptr(unsafe.Pointer(&b[0])) + size - 1) &^ (size - 1)
		end := (uintptr(unsafe.Pointer(&b[0])) + n) &^ (size - 1)
		lo, hi := start-uintptr(unsafe.Pointer(&b[0])), end-uintptr(unsafe.Pointer(&b[0]))
		if unix.Madvise(b[lo:hi], unix.MADV_POPULATE_WRITE) == nil {
			b[0], b[len(b)-1] = 0, 0
			return
		}
	}
	for i := 0; i < len(b); i += size {
		b[i] = 0
	}
	b[len(b)-1] = 0
}

// Grow returns s with room for at least n more values: s itself when it has the room, else a copy in a
// new allocation of at least twice the capacity, touched before the copy (whose write barrier would read
// the new pages first). For lists of pointerful values built by append.
func Grow[T any](s []T, n int) []T {
	if cap(s)-len(s) >= n {
		return s
	}
	return moved(s, max(2*cap(s), len(s)+n, 64))
}

// moved is a copy of s in a new allocation of capacity c, touched before the copy.
func moved[T any](s []T, c int) []T {
	grown := make([]T, len(s), c)
	Touch(grown[:cap(grown)])
	copy(grown, s)
	return grown
}

// Trim returns s, or a copy of it in a new touched allocation of its exact length when more than a
// quarter of s's capacity is unused: for lists that live as long as what they hold, grown ahead by Grow.
func Trim[T any](s []T) []T {
	if cap(s)-len(s) <= len(s)/4 {
		return s
	}
	return moved(s, len(s))
}

// GrowTo returns s with room for need values in all, for a list filled from an input of known size:
// share is the fraction of the input consumed once those values are in (0: unknown). Copying a list of
// pointers is dear (each pointer copied takes a write barrier while the collector runs, as it does during
// most of a large load), so the list doubles while little of the input is known, and once share is at
// least 1/32 it is sized for all of the input at the rate seen so far, with a tenth more.
func GrowTo[T any](s []T, need int, share float64) []T {
	if need <= cap(s) {
		return s
	}
	c := max(need, 2*cap(s))
	if share >= 1.0/32 {
		c = max(need, cap(s)+cap(s)/4, int(float64(need)/share*1.1))
	}
	return moved(s, c)
}
