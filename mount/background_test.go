package mount

import (
	"testing"

	"golang.org/x/sys/unix"
)

// nice is the calling thread's nice value (getpriority returns 20 - nice for a thread).
func nice(t *testing.T) int {
	t.Helper()
	p, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
	if err != nil {
		t.Fatal(err)
	}
	return 20 - p
}

// A readahead worker renders at readaheadNice on a thread of its own, and the priority leaves with it: the
// thread it ran on ends with the goroutine, so no other goroutine is ever scheduled at that priority. (The
// runtime keeps the process's main thread instead of ending it, and runs nothing on it again: of several
// workers held at once, at most one can be on it.)
func TestBackgroundThread(t *testing.T) {
	base := nice(t)
	type seen struct{ tid, nice int }
	const workers = 4
	ch, release := make(chan seen), make(chan struct{})
	for range workers {
		go func() {
			background()
			ch <- seen{unix.Gettid(), nice(t)}
			<-release
		}()
	}
	var tids []int
	for range workers {
		w := <-ch
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
	close(release)
	for _, tid := range tids {
		for i := 0; unix.Tgkill(unix.Getpid(), tid, 0) != unix.ESRCH; i++ {
			if i == 2000 {
				t.Fatalf("thread %d outlived its goroutine", tid)
			}
			unix.Nanosleep(&unix.Timespec{Nsec: 1e6}, nil)
		}
	}
}
