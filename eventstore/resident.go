package eventstore

import (
	"container/list"
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// A live engine holds its session's whole log (events, surface fold, live-invariant trace) so that an
// append costs O(k). A writer of many sessions — a mount an agent fleet appends through — would then hold
// every log it ever wrote until unmount. So an engine that is idle (nothing pending, no batch due, no
// transaction in flight) may shed its log: it keeps its writer lock and lease, its artifact state and
// its counts, and reads the log again from its artifact, which holds exactly its durable events, when
// something next needs it (an append, a snapshot for a view). What the Store's engines hold is counted
// against LiveBytes, the least recently used idle engines shedding first, and an engine untouched for
// LiveIdle sheds whatever the budget.

// shedLog is what a shed engine keeps of its log: enough to answer counts, revisions and the frozen
// prefix without reading it.
type shedLog struct {
	n        int   // events in the log, all durable
	lastTime int64 // "time" of the last event (epoch ms), -1 when none or not a number
}

// residency is the Store's account of its engines' resident logs, in least-recently-used order. Its mutex
// is taken after an engine's mu, never before: trimming collects victims under it and sheds them after.
type residency struct {
	mu    sync.Mutex
	lru   list.List // of *Session, the most recently used at the front
	bytes int64     // the sum of the engines' rsize

	shed, reloaded atomic.Int64
}

// LiveMemory is the state of the Store's engines' logs, for the mount's stats.json.
type LiveMemory struct {
	Resident int   // engines holding their log
	Bytes    int64 // the estimated memory of those logs
	Shed     int64 // logs released by idle engines so far
	Reloaded int64 // logs read again by engines that had released them
}

// LiveMemory reports the engines' resident logs and the counts of sheds and reloads.
func (s *Store) LiveMemory() LiveMemory {
	s.res.mu.Lock()
	defer s.res.mu.Unlock()
	return LiveMemory{Resident: s.res.lru.Len(), Bytes: s.res.bytes, Shed: s.res.shed.Load(), Reloaded: s.res.reloaded.Load()}
}

// eventCost is the estimated memory of one event of a resident log beyond its text: the Event, its slot
// in the list (grown by doubling), its share of the surface fold and of the invariant trace. With the
// text counted twice (the read buffer, the expanded chunk rows) the estimate errs high: 0.9 MB for a
// synthetic log of 2,025 events (121 KiB of raw JSONL) whose engine holds about 0.7 MB.
const eventCost = 128

// logCost is the estimated memory of a resident log of events whose texts total raw bytes.
func logCost(n int, raw int64) int64 { return 4096 + 2*raw + int64(n)*eventCost }

// Resident reports whether the engine holds its log in memory (false: it released it while idle and reads
// it again when needed).
func (w *Session) Resident() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.shed == nil
}

// lenLocked is the number of events in the log, resident or not.
func (w *Session) lenLocked() int {
	if w.shed != nil {
		return w.shed.n
	}
	return len(w.events)
}

// idleLocked reports whether the engine may shed its log: every accepted event durable, no batch due, no
// transaction running outside the locks, writes not refused (a conflicted engine's log is what a rescan
// replaces), no reload under way.
func (w *Session) idleLocked() bool {
	return w.shed == nil && !w.closed && w.conflict == nil && w.inflight == nil && w.timer == nil &&
		w.reloading == nil && w.durable == len(w.events)
}

// shedLocked releases the log of an idle engine (mu held) and reports whether it did.
func (w *Session) shedLocked() bool {
	if !w.idleLocked() {
		return false
	}
	sl := &shedLog{n: len(w.events), lastTime: -1}
	if sl.n > 0 {
		if raw, ok := w.events[sl.n-1].Member("time"); ok {
			if ms, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
				sl.lastTime = ms
			}
		}
	}
	w.shed = sl
	w.events, w.packing, w.folder, w.trace, w.traced, w.rawBytes = nil, nil, nil, nil, 0, 0
	w.checker, w.restored = nil, nil
	if w.idleTimer != nil {
		w.idleTimer.Stop()
		w.idleTimer = nil
	}
	w.st.res.shed.Add(1)
	w.st.forgetResident(w)
	return true
}

// lockWritable takes mu for a write: lockResident, then writableLocked. Like lockResident it always
// returns with mu held; its error is the read's (as a command error) or the refusal of writes.
func (w *Session) lockWritable() error {
	if err := w.lockResident(context.Background(), true); err != nil {
		return AsCommandError(err)
	}
	return w.writableLocked()
}

// lockResident takes mu with the log in memory: a shed log is read again from the artifact first (mu is
// not held meanwhile; concurrent callers share one read). For a write, an engine that refuses writes is
// not read back: the caller's writableLocked refuses. It always returns with mu held; on error the log is
// still shed and the error says why it could not be read.
func (w *Session) lockResident(ctx context.Context, write bool) error {
	w.mu.Lock()
	for w.shed != nil {
		if write && w.writableLocked() != nil {
			return nil
		}
		if ch := w.reloading; ch != nil {
			w.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				w.mu.Lock()
				return ctx.Err()
			}
			w.mu.Lock()
			continue
		}
		ch := make(chan struct{})
		w.reloading = ch
		expect, n := w.art, w.shed.n
		w.mu.Unlock()
		ins, err := w.st.Inspect(ctx, w.id)
		w.mu.Lock()
		w.reloading = nil
		close(ch)
		if err != nil {
			return fmt.Errorf("session %s: reading its log back into the live writer: %w", jsQuote(w.id), err)
		}
		w.reloadLocked(ins, expect, n)
	}
	w.usedLocked()
	return nil
}

// reloadLocked installs a log read again (mu held). The artifact must be as this engine left it, holding
// the events it had: anything else is another process's write, which stops the engine until a rescan (as
// a foreign write found before an append does) while its snapshots show the artifact as it is now.
func (w *Session) reloadLocked(ins *Inspection, expect Artifact, n int) {
	stored := ins.Events[:len(ins.Events)-len(ins.Closers)]
	w.shed = nil
	w.st.res.reloaded.Add(1)
	w.events, w.durable, w.packing = stored[:len(stored):len(stored)], len(stored), nil
	w.folder = ins.Folder
	w.checker = nil
	if w.adoptLater(ins); w.later != nil {
		w.folder = nil
	} else if w.folder == nil || len(ins.Closers) > 0 {
		w.folder = foldAll(stored)
	}
	w.trace, w.traced = nil, 0
	w.bracket = -1
	if i, ok := openCompaction(stored); ok {
		w.bracket = int64(i)
	}
	w.newest, w.rawBytes = -1, 0
	for _, e := range stored {
		w.noteTime(e)
		w.rawBytes += int64(len(e.Raw))
	}
	// (closers are no change: a log whose turn this writer left open plans them, as any load does)
	changed := ins.Prefix.Artifact.Token != expect.Token || len(stored) != n || ins.Prefix.Torn != nil
	if !changed {
		return
	}
	w.art = ins.Prefix.Artifact // the events shown are the artifact's now
	if w.conflict == nil {
		w.conflict = cmdErr(Busy, CodeConflict, fmt.Sprintf("session %s changed under this writer while it was idle (%d events when it was last written, %d now): another process wrote it; nothing was written, and writes are refused until the store's rescan (mount: echo rescan > ctl)", jsQuote(w.id), n, len(stored)))
	}
}

// usedLocked marks the engine's log as just used (mu held): first to stay in memory, and its idle period
// starts again.
func (w *Session) usedLocked() {
	if w.shed != nil || w.released {
		return
	}
	w.lastUse = time.Now()
	w.st.noteResident(w, logCost(len(w.events), w.rawBytes))
	if d := w.st.LiveIdle; d > 0 && w.idleTimer == nil {
		w.idleTimer = time.AfterFunc(d, w.idleDue)
	}
}

// idleDue is the end of an idle period: an engine untouched for LiveIdle sheds its log; one used meanwhile
// waits for the rest of its period, one still busy for another.
func (w *Session) idleDue() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.idleTimer = nil
	if w.shed != nil || w.released {
		return
	}
	d := w.st.LiveIdle
	if rest := d - time.Since(w.lastUse); rest > 0 {
		w.idleTimer = time.AfterFunc(rest, w.idleDue)
		return
	}
	if !w.shedLocked() {
		w.idleTimer = time.AfterFunc(d, w.idleDue)
	}
}

// noteResident records the engine's resident cost and puts it first in the LRU order.
func (s *Store) noteResident(w *Session, cost int64) {
	s.res.mu.Lock()
	defer s.res.mu.Unlock()
	if w.relem == nil {
		w.relem = s.res.lru.PushFront(w)
	} else {
		s.res.lru.MoveToFront(w.relem)
	}
	s.res.bytes += cost - w.rsize
	w.rsize = cost
}

// forgetResident takes the engine out of the account (its log was shed, or it was released).
func (s *Store) forgetResident(w *Session) {
	s.res.mu.Lock()
	defer s.res.mu.Unlock()
	if w.relem != nil {
		s.res.lru.Remove(w.relem)
		w.relem = nil
	}
	s.res.bytes -= w.rsize
	w.rsize = 0
}

// trimLive sheds the logs of the least recently used idle engines (never keep's) until the resident logs
// fit LiveBytes. It must be called with no engine's mu held.
func (s *Store) trimLive(keep *Session) {
	if s.LiveBytes <= 0 {
		return
	}
	var busy map[*Session]bool // engines that could not shed: a pending batch, a transaction
	for {
		s.res.mu.Lock()
		var victim *Session
		if s.res.bytes > s.LiveBytes {
			for e := s.res.lru.Back(); e != nil; e = e.Prev() {
				if w := e.Value.(*Session); w != keep && !busy[w] {
					victim = w
					break
				}
			}
		}
		s.res.mu.Unlock()
		if victim == nil {
			return
		}
		victim.mu.Lock()
		ok := victim.shedLocked()
		victim.mu.Unlock()
		if !ok {
			// it keeps its log for now; the flush that ends its batch trims again
			if busy == nil {
				busy = map[*Session]bool{}
			}
			busy[victim] = true
		}
	}
}
