package main

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// The limit follows the live heap above base and comes back to base when the live heap shrinks.
func TestSoftMemoryLimit(t *testing.T) {
	const base = 64 << 20
	stop := softMemoryLimit(base)
	defer stop()
	limitAfterGC := func(ok func(int64) bool) int64 {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			runtime.GC() // the finalizer runs after a collection, on the finalizer goroutine
			l := debug.SetMemoryLimit(-1)
			if ok(l) || time.Now().After(deadline) {
				return l
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if l := limitAfterGC(func(l int64) bool { return l == base }); l != base {
		t.Fatalf("limit %d with little alive, want %d", l, base)
	}
	held := make([][]byte, 0, 160)
	for range 160 { // 160 MiB alive
		b := make([]byte, 1<<20)
		b[0] = 1
		held = append(held, b)
	}
	if l := limitAfterGC(func(l int64) bool { return l >= 200<<20 }); l < 200<<20 {
		t.Fatalf("limit %d MiB with 160 MiB alive, want at least 1.25 times that", l>>20)
	}
	runtime.KeepAlive(held)
	held = nil
	if l := limitAfterGC(func(l int64) bool { return l == base }); l != base {
		t.Fatalf("limit %d MiB after the live heap shrank, want base", l>>20)
	}
	stop()
	if l := debug.SetMemoryLimit(-1); l < 1<<62 {
		t.Fatalf("limit %d after stop", l)
	}
}

// The load collector runs no collection below its base, and restores the default when stopped.
func TestWholeLoadCollector(t *testing.T) {
	stop := wholeLoadCollector()
	if p := debug.SetGCPercent(-1); p != -1 {
		t.Errorf("GC percent %d while loading, want -1 (paced by the limit)", p)
	}
	if l := debug.SetMemoryLimit(-1); l != wholeLoadBase {
		t.Errorf("limit %d while loading, want %d", l, wholeLoadBase)
	}
	stop()
	if p := debug.SetGCPercent(100); p != 100 {
		t.Errorf("GC percent %d after stop, want the default 100", p)
	}
	if l := debug.SetMemoryLimit(-1); l < 1<<62 {
		t.Errorf("limit %d after stop", l)
	}
}
