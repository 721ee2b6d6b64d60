package fs

import (
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/nodes"
	"github.com/dshfs/dshfs/views"
)

// cache holds decoded session snapshots and their rendered views in two LRU lists with byte budgets
// (config [cache]). A snapshot is valid for one revision of its artifact; a render for one snapshot.
type cache struct {
	mu           sync.Mutex
	sessions     map[string]*cached
	lru          *list.List // of *cached, most recently used at the front
	sessionBytes int64
	viewBytes    int64
	maxSessions  int64
	maxViews     int64
}

type cached struct {
	id      string
	rev     string
	sess    *views.Session
	mtime   time.Time
	size    int64 // estimated memory of the decoded snapshot
	renders map[string]nodes.Rendered
	rbytes  int64
	elem    *list.Element
	loading chan struct{} // closed when a concurrent load finishes
}

func newCache(maxSessions, maxViews int64) *cache {
	return &cache{sessions: map[string]*cached{}, lru: list.New(), maxSessions: maxSessions, maxViews: maxViews}
}

// get returns the snapshot of id at revision rev, loading it with load when the cached one is older.
// Concurrent callers for the same session share one load.
func (c *cache) get(ctx context.Context, id, rev string, load func() (*views.Session, error)) (*cached, error) {
	for {
		c.mu.Lock()
		e := c.sessions[id]
		if e != nil && e.loading != nil {
			ch := e.loading
			c.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if e != nil && e.rev == rev && rev != "" {
			c.lru.MoveToFront(e.elem)
			c.mu.Unlock()
			return e, nil
		}
		if e != nil {
			c.dropLocked(e)
		}
		e = &cached{id: id, rev: rev, renders: map[string]nodes.Rendered{}, loading: make(chan struct{})}
		e.elem = c.lru.PushFront(e)
		c.sessions[id] = e
		c.mu.Unlock()

		sess, err := load()

		c.mu.Lock()
		ch := e.loading
		e.loading = nil
		close(ch)
		if err != nil {
			c.dropLocked(e)
			c.mu.Unlock()
			return nil, err
		}
		e.sess = sess
		e.mtime = sessionModTime(sess)
		e.size = estimate(sess)
		c.sessionBytes += e.size
		c.evictLocked(e)
		c.mu.Unlock()
		return e, nil
	}
}

// render returns a cached rendering of one view, rendering it on a miss.
func (c *cache) render(ctx context.Context, e *cached, view string, uncached bool) (nodes.Rendered, error) {
	c.mu.Lock()
	if r, ok := e.renders[view]; ok {
		c.mu.Unlock()
		return r, nil
	}
	c.mu.Unlock()
	data, err := e.sess.Render(ctx, view)
	if err != nil {
		return nodes.Rendered{}, err
	}
	r := nodes.Rendered{Data: data, ModTime: e.mtime, Revision: e.rev}
	if uncached {
		return r, nil
	}
	c.mu.Lock()
	if _, live := c.sessions[e.id]; live && c.sessions[e.id] == e {
		if _, dup := e.renders[view]; !dup {
			e.renders[view] = r
			e.rbytes += int64(len(data))
			c.viewBytes += int64(len(data))
		}
		c.evictLocked(e)
	}
	c.mu.Unlock()
	return r, nil
}

// drop forgets a session (its artifact changed or vanished).
func (c *cache) drop(id string) {
	c.mu.Lock()
	if e := c.sessions[id]; e != nil && e.loading == nil {
		c.dropLocked(e)
	}
	c.mu.Unlock()
}

func (c *cache) dropLocked(e *cached) {
	if c.sessions[e.id] == e {
		delete(c.sessions, e.id)
	}
	if e.elem != nil {
		c.lru.Remove(e.elem)
		e.elem = nil
	}
	c.sessionBytes -= e.size
	c.viewBytes -= e.rbytes
	e.size, e.rbytes = 0, 0
}

// evictLocked removes least recently used entries (never keep) until both budgets hold; rendered views
// go before whole sessions.
func (c *cache) evictLocked(keep *cached) {
	for el := c.lru.Back(); el != nil && c.viewBytes > c.maxViews; {
		e := el.Value.(*cached)
		prev := el.Prev()
		if e != keep && e.rbytes > 0 {
			c.viewBytes -= e.rbytes
			e.rbytes = 0
			e.renders = map[string]nodes.Rendered{}
		}
		el = prev
	}
	if c.viewBytes > c.maxViews && keep.rbytes > 0 {
		// a single view larger than the budget is served but not kept
		c.viewBytes -= keep.rbytes
		keep.rbytes = 0
		keep.renders = map[string]nodes.Rendered{}
	}
	for el := c.lru.Back(); el != nil && c.sessionBytes > c.maxSessions; {
		e := el.Value.(*cached)
		prev := el.Prev()
		if e != keep && e.loading == nil {
			c.dropLocked(e)
		}
		el = prev
	}
}

// estimate is the memory a decoded snapshot holds: its event bytes twice (decoded frame buffers are sized
// ahead, expanded chunk rows own their bytes, projections keep slices) plus the per-event structures.
// Measured against the live heap of a mount holding 10k cached sessions, counting the bytes once
// undercounted by about a third.
func estimate(s *views.Session) int64 {
	var n int64 = 4096
	for _, e := range s.Events {
		n += 2*int64(len(e.Raw)) + 96
	}
	return n
}

// sessionModTime is the newest event time of a snapshot (a view's mtime comes from its data, so it is
// the same on every mount); a refused or empty session uses its artifact's mtime.
func sessionModTime(s *views.Session) time.Time {
	var newest int64 = -1
	for _, e := range s.Events {
		if raw, ok := e.Member("time"); ok {
			if ms, ok := parseInt(raw); ok && ms > newest {
				newest = ms
			}
		}
	}
	if newest >= 0 {
		return time.UnixMilli(newest)
	}
	return nodes.EntryModTime(eventstore.Entry{Revision: s.Revision})
}

func parseInt(tok []byte) (int64, bool) {
	if len(tok) == 0 || len(tok) > 17 {
		return 0, false
	}
	var n int64
	neg := tok[0] == '-'
	if neg {
		tok = tok[1:]
	}
	for _, c := range tok {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, n <= event.MaxSafeInteger
}
