package mount

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/dshfs/dshfs/viewcache"
	"github.com/dshfs/dshfs/views"
)

// Readahead of sessions. A walk over the mount — a glob such as sessions/*/events.jsonl, grep -r, find,
// rsync — reaches the sessions one after the other in name order, and the first stat of each session's
// view needs its exact size, which on a cold index means decoding the session (about half a millisecond
// for a 93-event one) on the thread serving the request, while the machine's other core idles. So when a
// view of the sessions at two consecutive positions of the listing is asked for, the mount renders that
// view of the next few sessions in the background: into the caches and the persistent index, exactly as a
// request would (viewcache.Cache.Get), so what a walk then reads is the same bytes, only ready sooner. A prefetched
// session the walk never reaches costs one decode and is evicted like any other.
//
// There is a worker per core (Options.Readahead, which cmd/dshfs sets to one per P), not one: the walk is
// as fast as the renders ahead of it, and with one worker a third of the machine's CPU time sat idle
// during a glob over a cold 10k-session store (stat of every events.jsonl: 9.6–10.9 s with one worker,
// 7.5–8.7 s with two, alternating runs). The mount runs with a P more than cores (cmd/dshfs spareProc), and
// so a worker more.
//
// The workers are background work, and the walk itself is the request in front of them: the shell's next
// lookup, the kernel handing it to a reader of /dev/fuse, the goroutine that answers it. With the workers
// at the same priority on every core, each step of that chain waited for a core: a glob's lookups were
// 52 µs apart on a warm index and 150–215 µs apart while the workers rendered, and a fifth of the machine's
// time was idle, the workers waiting for the walk to schedule their next jobs. So each worker renders on an
// OS thread of its own at a lower priority (readaheadNice, background.go): a thread woken for a request
// takes a core from a worker at once, and the workers still have the cores to themselves in between. The
// window is 64 sessions, so that a walk that runs ahead for a while does not leave them without jobs. A
// first grep -l over 10k cold sessions took 0.9x the time it took with the workers at the process's
// priority and a window of 16 (medians of 8 alternating rounds, three times, each run against the same
// grep over the files on disk; a window of 64 alone: no change).
//
// What pays for it, measured (README, readahead): a first grep -l over 10k sessions on cold caches took
// 16.6-18.0 s with it and 19.0-22.0 s without it, and the second worker took a stat of every events.jsonl
// from 9.6-10.9 s to 7.5-8.7 s. Its cost is a decode of up to readaheadWindow sessions a walk may never
// reach, evicted like any other.
//
// Only small artifacts are read ahead (a large session's decode holds hundreds of megabytes and is better
// done once, by the request that needs it), never a live session (its revision changes with every write)
// and never a view that is not indexed (status.json reports live state).

const (
	readaheadWindow = 64      // sessions rendered ahead of a walk
	readaheadMax    = 1 << 20 // physical bytes of an artifact worth reading ahead
	// readaheadNice is the workers' threads' nice value: a thread woken for a request preempts them, and
	// they have a core to themselves when nothing else runs. Not the idle class (SCHED_IDLE): a request
	// may wait on a render a worker has started, and must not starve behind other programs while it does.
	readaheadNice = 10
)

// readaheadWorkers is how many goroutines render ahead.
func (f *FS) readaheadWorkers() int {
	if f.opts.Readahead > 0 {
		return f.opts.Readahead
	}
	return f.opts.Store.Tuning.N()
}

type readahead struct {
	mu    sync.Mutex
	walks map[views.View]*walk
	jobs  chan prefetch

	done atomic.Int64 // views rendered ahead (stats.json "readahead")
}

// walk is where one view was last asked for, in which direction the asks move (a shell's glob expansion
// stats the directory's entries last to first, then grep opens them first to last), and the next
// position to schedule in that direction.
type walk struct {
	last, dir, next int
}

type prefetch struct {
	id   string
	view views.View
}

func newReadahead() *readahead {
	return &readahead{walks: map[views.View]*walk{}, jobs: make(chan prefetch, 2*readaheadWindow)}
}

// sawView records that view of session id was asked for, and schedules the sessions after it (in the
// walk's direction) when the one before it was asked for last.
func (f *FS) sawView(id string, view views.View) {
	if !viewcache.Indexed(view) || f.opts.Store.Live(id) != nil {
		return
	}
	l := f.Listing()
	pos, ok := l.ByID[id]
	if !ok {
		return
	}
	ra := f.ahead
	ra.mu.Lock()
	defer ra.mu.Unlock()
	w := ra.walks[view]
	if w == nil {
		ra.walks[view] = &walk{last: pos}
		return
	}
	d := pos - w.last
	w.last = pos
	if d != 1 && d != -1 {
		return
	}
	if w.dir != d || (w.next-pos)*d <= 0 {
		w.dir, w.next = d, pos+d // a new walk, or one that overtook what was scheduled
	}
	for i := w.next; (i-pos)*d <= readaheadWindow && i >= 0 && i < len(l.Entries); i += d {
		if e := l.Entries[i]; e.Refusal == nil {
			select {
			case ra.jobs <- prefetch{id: e.ID, view: view}:
			default:
				return // the worker is behind: the walk is about to do these itself
			}
		}
		w.next = i + d
	}
}

// readaheadLoop renders what sawView scheduled until ctx ends, on a background thread.
func (f *FS) readaheadLoop(ctx context.Context) {
	background()
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-f.ahead.jobs:
			f.prefetchView(ctx, j)
		}
	}
}

func (f *FS) prefetchView(ctx context.Context, j prefetch) {
	if f.opts.Store.Live(j.id) != nil {
		return
	}
	l := f.Listing()
	i, ok := l.ByID[j.id]
	if !ok {
		return
	}
	art, err := f.statArtifact(ctx, j.id, l.Entries[i].Path)
	if err != nil || art.Size > readaheadMax {
		return
	}
	k := f.key(j.id, j.view, f.revisionAt(j.id, art))
	if f.cache.Known(k) {
		return
	}
	if _, err := f.cache.Get(ctx, k); err == nil {
		f.ahead.done.Add(1)
	}
}
