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
