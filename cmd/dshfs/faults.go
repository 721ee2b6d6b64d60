//go:build dshfsfaults

package main

import (
	"os"
	"os/signal"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"sync"
	"syscall"

	"github.com/dshfs/dshfs/eventstore/jsonl"
)

// This file exists only in test builds (go build -tags dshfsfaults): the crash soak and the fault tests run
// the real dshfs binary with a backend hook that reads $DSHFS_FAULTS_FILE before every durable write step.
// Each line of that file is `kill OP` (SIGKILL this process before the next OP: write, write-half, fsync,
// link, dirsync, truncate, ack) or `fail OP` (that step fails with EIO, for as long as the line is there).
// Kills fire once: the file is emptied first, so the restarted process runs clean.

func installFaults(b *jsonl.Backend) {
	path := os.Getenv("DSHFS_FAULTS_FILE")
	if path == "" {
		return
	}
	b.SetHook(func(op jsonl.Op, target string) error {
		spec, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		for _, line := range strings.Split(string(spec), "\n") {
			f := strings.Fields(line)
			if len(f) != 2 || f[1] != string(op) {
				continue
			}
			switch f[0] {
			case "kill":
				_ = os.WriteFile(path, nil, 0o644)
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			case "fail":
				return syscall.EIO
			}
		}
		return nil
	})
}

// startProfile writes a CPU profile of the whole run to $DSHFS_CPUPROFILE (with $DSHFS_CPUPROFILE_ON_SIGNAL
// set, of the part of the run after a SIGUSR1), and a heap profile at the end of the run to $DSHFS_MEMPROFILE
// (bench scripts profile the mount with them). With $DSHFS_TRACE set, an execution trace of the same part of
// the run is written there: it shows what a profile cannot, the time no goroutine ran and what each waited on.
func startProfile() (stop func()) {
	var mu sync.Mutex
	stopCPU := func() {}
	start := func() {
		mu.Lock()
		defer mu.Unlock()
		if path := os.Getenv("DSHFS_TRACE"); path != "" {
			if f, err := os.Create(path); err == nil {
				if trace.Start(f) != nil {
					f.Close()
				} else {
					stopCPU = func() { trace.Stop(); f.Close() }
				}
			}
		}
		if os.Getenv("DSHFS_CPUPROFILE") == "" {
			return
		}
		if f, err := os.Create(os.Getenv("DSHFS_CPUPROFILE")); err == nil {
			if err := pprof.StartCPUProfile(f); err != nil {
				f.Close()
			} else {
				stopTrace := stopCPU
				stopCPU = func() { pprof.StopCPUProfile(); f.Close(); stopTrace() }
			}
		}
	}
	switch {
	case os.Getenv("DSHFS_CPUPROFILE") == "" && os.Getenv("DSHFS_TRACE") == "":
	case os.Getenv("DSHFS_CPUPROFILE_ON_SIGNAL") != "":
		// profile only what follows a SIGUSR1 (a repeated run after a warm-up, say)
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGUSR1)
		go func() { <-sig; start() }()
	default:
		start()
	}
	return func() {
		mu.Lock()
		stopCPU()
		mu.Unlock()
		if path := os.Getenv("DSHFS_MEMPROFILE"); path != "" {
			if f, err := os.Create(path); err == nil {
				pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
		}
	}
}
