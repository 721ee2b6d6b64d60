package nodes

import (
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// The primer stores each queued view once, tries again while the kernel does not know the inode yet (up
// to primeTries stores), drops what comes while its queue is full, and its goroutine exits when the queue
// is empty.
func TestPrimer(t *testing.T) {
	var primes atomic.Int64
	k := &kernelView{primes: &primes}
	idle := make(chan struct{}, 1)
	k.primer.idle = func() { idle <- struct{}{} }
	// waitIdle returns once no primer goroutine runs. The queue can empty between two adds, so that one
	// goroutine exits and another starts: a signal alone may be the first one's.
	waitIdle := func() {
		for {
			<-idle
			k.primer.mu.Lock()
			running := k.primer.running
			k.primer.mu.Unlock()
			if !running {
				return
			}
		}
	}
	data := []byte("0123456789")

	var mu sync.Mutex
	stores := map[uint64]int{}
	store := func(ino uint64, enoents int) func([]byte) syscall.Errno {
		return func([]byte) syscall.Errno {
			mu.Lock()
			defer mu.Unlock()
			stores[ino]++
			if stores[ino] <= enoents {
				return syscall.ENOENT
			}
			return 0
		}
	}
	for ino, enoents := range map[uint64]int{1: 0, 2: 2, 3: primeTries} {
		k.reported(ino, int64(len(data)))
		k.primer.add(priming{kernel: k, ino: ino, data: data, rev: "r1", store: store(ino, enoents)})
	}
	waitIdle()
	mu.Lock()
	if stores[1] != 1 || stores[2] != 3 || stores[3] != primeTries {
		t.Fatalf("stores per inode: %v; want 1, 3 (after two ENOENT) and %d (given up)", stores, primeTries)
	}
	mu.Unlock()
	if primes.Load() != 2 || !k.keeps(1, "r1", 10) || !k.keeps(2, "r1", 10) || k.keeps(3, "r1", 10) {
		t.Fatalf("primed %d; keeps 1, 2, 3: %v %v %v", primes.Load(), k.keeps(1, "r1", 10), k.keeps(2, "r1", 10), k.keeps(3, "r1", 10))
	}

	// a store that blocks holds the goroutine: primeQueue more are queued, the rest dropped (the others'
	// inodes are in another stripe of kernelView's locks than the blocked one's, which it holds)
	release := make(chan struct{})
	var stored atomic.Int64
	blocking := func([]byte) syscall.Errno { <-release; stored.Add(1); return 0 }
	counting := func([]byte) syscall.Errno { stored.Add(1); return 0 }
	k.reported(64, int64(len(data)))
	k.primer.add(priming{kernel: k, ino: 64, data: data, rev: "r1", store: blocking})
	for {
		k.primer.mu.Lock()
		taken := len(k.primer.queue) == 0
		k.primer.mu.Unlock()
		if taken {
			break
		}
		runtime.Gosched()
	}
	for i := range uint64(primeQueue + 5) {
		ino := 64*(i+2) + 1
		k.reported(ino, int64(len(data)))
		k.primer.add(priming{kernel: k, ino: ino, data: data, rev: "r1", store: counting})
	}
	close(release)
	waitIdle()
	if n := stored.Load(); n != 1+primeQueue {
		t.Fatalf("%d stored; want %d (the blocked one and a full queue)", n, 1+primeQueue)
	}
}
