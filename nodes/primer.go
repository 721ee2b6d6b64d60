package nodes

import (
	"sync"
	"syscall"
	"time"
)

// Priming the kernel's page cache. A walk such as grep PAT sessions/*/events.jsonl first stats every file
// (the shell's glob), then opens and reads each one: on a cold mount the stat renders the view (its exact
// size needs it), and the read that follows, a moment later, fetches the same bytes again — from the
// persistent index, through a READ request per file, on the one thread the reading process waits for. So
// when a lookup of a session's whole-view file had the view's bytes in hand, the mount hands them to the
// kernel right after the lookup (FUSE_NOTIFY_STORE, from a background goroutine, on the machine's other
// core), and records that the kernel holds that revision: the open that follows keeps the page cache
// (FOPEN_KEEP_CACHE) and the read is served by the kernel alone, as in a repeated walk. A lookup answered
// from the persistent index (after a remount or an eviction: the size without the bytes) is primed too,
// with the bytes the index keeps, read by the background goroutine (Source.Kept).
//
// It is safe because an open and a priming of one file are serialized (kernelView's lock): the priming stores
// the bytes only while no open has recorded what the kernel holds, and records the revision it stored,
// so a later open of another revision drops the kernel's pages (no FOPEN_KEEP_CACHE). A page the kernel
// evicts is read as for any kept page cache: through a lazy handle, checked against the revision's size
// and checksum.
//
// Only small views are primed (primeMax): the page cache they fill is reclaimable, but a stat of a
// large session should not push megabytes the stat did not ask for. Nothing is rendered for a priming
// (only bytes the lookup had or the index keeps), and a queue full of primings drops the next: the reads
// then go through the mount, as without priming.

const (
	primeMax   = 128 << 10 // bytes of a view worth priming
	primeQueue = 64        // primings waiting at most (at most primeQueue × primeMax bytes held)
	primeTries = 5         // stores tried while the kernel does not know the inode yet (1.5 ms in all)
)

// primer stores looked-up views' bytes in the kernel's page cache, from one goroutine that runs while
// there is work and exits when there is none (no goroutine outlives the mount's last lookup for long).
type primer struct {
	mu      sync.Mutex
	queue   []priming
	running bool
	idle    func() // called when the goroutine exits (tests)
}

// priming is one view to store: data, the bytes of revision rev of inode ino (or, when data is nil, what
// fetch returns: nil when the bytes are no longer kept), through store (the inode's FUSE_NOTIFY_STORE).
type priming struct {
	kernel *kernelView
	ino    uint64
	data   []byte
	fetch  func() []byte
	rev    string
	store  func([]byte) syscall.Errno
}

// add queues a priming; dropped when the queue is full.
func (p *primer) add(j priming) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) >= primeQueue {
		return
	}
	p.queue = append(p.queue, j)
	if !p.running {
		p.running = true
		go p.run()
	}
}

func (p *primer) run() {
	for {
		p.mu.Lock()
		if len(p.queue) == 0 {
			p.running = false
			p.queue = nil
			idle := p.idle
			p.mu.Unlock()
			if idle != nil {
				idle()
			}
			return
		}
		j := p.queue[0]
		p.queue[0] = priming{}
		p.queue = p.queue[1:]
		p.mu.Unlock()
		j.prime()
	}
}

// prime stores the bytes in the kernel's page cache, unless an open got there first or the kernel was told
// another size. The lookup that queued it returns before go-fuse writes its reply, so the kernel may not
// know the inode yet (ENOENT): then it tries again a moment later, waiting twice as long each time.
func (j priming) prime() {
	if j.data == nil && j.fetch != nil {
		if j.data = j.fetch(); j.data == nil {
			return
		}
	}
	for try := 1; ; try++ {
		errno, done := j.kernel.prime(j.ino, j.rev, j.data, j.store)
		if done || errno != syscall.ENOENT || try == primeTries {
			return
		}
		time.Sleep(100 * time.Microsecond << (try - 1))
	}
}
