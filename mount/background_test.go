package mount

import (
	"os"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// threadNice is the nice value of thread tid (getpriority returns 20 - nice).
func threadNice(tid int) (int, error) {
	p, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	return 20 - p, err
}

// nice is the calling thread's nice value.
func nice(t *testing.T) int {
	t.Helper()
	n, err := threadNice(unix.Gettid())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A readahead worker renders at readaheadNice on a thread of its own, and the priority leaves with it: the
// thread it ran on ends with the goroutine, so no other goroutine is ever scheduled at that priority. (The
// runtime keeps the process's main thread instead of ending it, and runs nothing on it again: of several
// workers held at once, at most one can be on it.)
func TestBackgroundThread(t *testing.T) {
	base := nice(t)
	type seen struct {
		tid, nice int
		err       error
	}
	const workers = 4
	ch, release := make(chan seen), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // a failing check must not leave the workers blocked
	for range workers {
		go func() {
			background()
			// goroutines started from a worker, blocking in system calls, make the runtime start threads
			// while the worker's thread runs: none may inherit its priority
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					unix.Nanosleep(&unix.Timespec{Nsec: 5e6}, nil)
				}()
			}
			wg.Wait()
			n, err := threadNice(unix.Gettid())
			ch <- seen{unix.Gettid(), n, err}
			<-release
		}()
	}
	var tids []int
	for range workers {
		w := <-ch
		if w.err != nil {
			t.Fatal(w.err)
		}
		if w.nice != readaheadNice {
			t.Fatalf("a worker's thread runs at nice %d, want %d", w.nice, readaheadNice)
		}
		if w.tid != unix.Getpid() {
			tids = append(tids, w.tid)
		}
	}
	if got := nice(t); got != base {
		t.Fatalf("the test's own thread moved to nice %d", got)
	}
	if len(tids) < workers-1 {
		t.Fatalf("%d workers shared threads: %v", workers, tids)
	}
	if got := niceThreads(t); len(got) > len(tids) {
		t.Fatalf("threads at nice %d: %v, but the workers are %v", readaheadNice, got, tids)
	}
	free()
	for _, tid := range tids {
		for i := 0; unix.Tgkill(unix.Getpid(), tid, 0) != unix.ESRCH; i++ {
			if i == 2000 {
				t.Fatalf("thread %d outlived its goroutine", tid)
			}
			unix.Nanosleep(&unix.Timespec{Nsec: 1e6}, nil)
		}
	}
}

// niceThreads lists the process's threads that run at readaheadNice, but for its main thread: a worker
// that ran there leaves it wedged, running nothing again.
func niceThreads(t *testing.T) []int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil || tid == unix.Getpid() {
			continue
		}
		if n, err := threadNice(tid); err == nil && n == readaheadNice {
			out = append(out, tid)
		}
	}
	return out
}
