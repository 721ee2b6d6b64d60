package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// softMemoryLimit keeps the heap of a mount near base while what it holds alive is below base, and lets it
// grow with what it holds alive beyond that.
//
// A walk over a large store (grep -r) keeps little alive at any moment — the caches' budgets, the node
// tree, the requests in flight — but allocates fast, and with the collector's default pacing the idle heap
// doubles that: a soft limit of the budgets plus some room keeps the process within 256 MiB. But one
// request may need more alive than any fixed limit: decoding a 500k-event session holds some 350 MB. At
// a fixed limit below that, the collector runs back to back (95 collections in one 7 s `cat`, more than
// twice as slow as without the limit). So after every collection the limit is set to the larger of base
// and one and a half times the live heap: a walk still gets base, and a large decode gets a collector
// that runs once per half of its working set again instead of all the time.
//
// It returns a function that stops the adjustment and lifts the limit.
func softMemoryLimit(base int64) (stop func()) {
	debug.SetMemoryLimit(base)
	var stopped atomic.Bool
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var arm func()
	arm = func() {
		// a finalizer on an object nothing references runs after the next collection: a hook that costs
		// nothing while the process is idle. (The pointer keeps it out of the tiny allocator, whose
		// objects may never be finalized.)
		runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
			if stopped.Load() {
				return
			}
			metrics.Read(sample)
			limit := base
			if sample[0].Value.Kind() == metrics.KindUint64 {
				if live := int64(sample[0].Value.Uint64()); live+live/2 > limit {
					limit = live + live/2
				}
			}
			debug.SetMemoryLimit(limit)
			arm()
		})
	}
	arm()
	return func() {
		stopped.Store(true)
		debug.SetMemoryLimit(math.MaxInt64)
	}
}

type sentinel struct {
	_ *int
	_ [16]byte
}

// wholeLoadBase is the heap a command that reads one session whole may grow to before its first collection.
const wholeLoadBase = 192 << 20

// wholeLoadCollector paces the collector of `dshfs cat` by memory alone: no collection until the heap
// reaches wholeLoadBase, then one each time it grows by half of what is alive (softMemoryLimit). A cold
// load fills some 160 MB of fresh memory that holds pointers, and a collection in the middle of it scans
// what was loaded so far; on a virtual machine that scan's first touch of fresh pages costs more faults
// than the whole load's own writes (bench/load.sh: 0.48 s, 0.29 s of it system time, against 0.37 s and
// 0.10 s paced so, at 174 MiB peak RSS against 161 MiB). A session too large for the base still gets a
// collector that runs once per half of its working set. It returns a function that restores the default.
func wholeLoadCollector() (stop func()) {
	old := debug.SetGCPercent(-1)
	stopLimit := softMemoryLimit(wholeLoadBase)
	return func() {
		stopLimit()
		debug.SetGCPercent(old)
	}
}
