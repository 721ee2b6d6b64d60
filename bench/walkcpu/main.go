// Command walkcpu renders the events.jsonl view of every session of a zstd JSONL store through the mount's
// own read path (mount.FS.Render: the view cache, the persistent index in INDEXDIR, the load and its
// checks), without FUSE, and prints the wall and CPU time, the bytes allocated and the collections. A first
// grep over a fresh mount does this work plus the kernel's requests; on a shared machine its CPU time and
// allocation compare two builds more steadily than the mount's wall time does (bench/firstgrep.sh).
//
//	go run ./bench/walkcpu STORE INDEXDIR
//
// With WALKCPU_PROFILE set, a CPU profile of the walk is written there; with WALKCPU_MEMPROFILE, a profile
// of what it allocated.
package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/dshfs/dshfs/config"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/mount"
	"github.com/dshfs/dshfs/views"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: walkcpu STORE INDEXDIR")
		os.Exit(2)
	}
	root := os.Args[1]
	b, err := jsonl.Open(root, jsonl.Zstd)
	if err != nil {
		fail(err)
	}
	cfg := config.Default()
	cfg.Cache.Dir = os.Args[2]
	f, err := mount.New(mount.Options{Store: eventstore.New(b), Root: root, Config: cfg})
	if err != nil {
		fail(err)
	}
	var ru0, ru1 syscall.Rusage
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	if path := os.Getenv("WALKCPU_PROFILE"); path != "" {
		out, err := os.Create(path)
		if err != nil {
			fail(err)
		}
		if err := pprof.StartCPUProfile(out); err != nil {
			fail(err)
		}
		defer out.Close()
	}
	start := time.Now()
	n := 0
	for _, e := range f.Listing().Entries {
		if _, err := f.Render(context.Background(), e.ID, views.Events); err != nil {
			fail(err)
		}
		n++
	}
	wall := time.Since(start)
	pprof.StopCPUProfile()
	if path := os.Getenv("WALKCPU_MEMPROFILE"); path != "" {
		out, err := os.Create(path)
		if err != nil {
			fail(err)
		}
		if err := pprof.Lookup("allocs").WriteTo(out, 0); err != nil {
			fail(err)
		}
		out.Close()
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	runtime.ReadMemStats(&m1)
	user := time.Duration(ru1.Utime.Nano() - ru0.Utime.Nano())
	sys := time.Duration(ru1.Stime.Nano() - ru0.Stime.Nano())
	fmt.Printf("%d sessions: wall %.3f s, CPU %.3f s (system %.3f s), allocated %d MB, %d collections\n",
		n, wall.Seconds(), (user + sys).Seconds(), sys.Seconds(), (m1.TotalAlloc-m0.TotalAlloc)>>20, m1.NumGC-m0.NumGC)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "walkcpu:", err)
	os.Exit(1)
}
