package mount

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// background moves the calling goroutine onto an OS thread of its own for the rest of its life and lowers
// that thread's scheduling priority to readaheadNice (Linux's nice is per thread). The goroutine never
// unlocks the thread, so when it returns the runtime ends the thread and no other goroutine ever runs at
// that priority. Where the priority cannot be lowered, the work runs as before, at the process's own.
func background() {
	runtime.LockOSThread()
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), readaheadNice)
}
