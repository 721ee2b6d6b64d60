package viewcache

import (
	"container/list"
	"context"
	"sync"
	"time"
	"unsafe"
	"weak"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/views"
)

// lru holds decoded session snapshots and rendered views in two independent LRU lists with byte budgets
// (config [cache]). A snapshot is valid for one revision of its artifact, and so is a rendered view: a
// view can outlive the snapshot it was rendered from, so re-reading events.jsonl of a session whose
// decoded form was evicted costs no decode.
type lru struct {
	mu           sync.Mutex
	sessions     map[string]*cached
	sessionLRU   *list.List // of *cached, most recently used at the front
	sessionBytes int64
	maxSessions  int64

	// verdicts remember, per session, whether its revision is refused: tiny, kept for every session
	// ever loaded, so the session directory can be served without the decoded snapshot.
	verdicts map[string]verdict

	views     map[viewKey]*rendered
	viewLRU   *list.List // of *rendered
	viewBytes int64
	maxViews  int64

	// held are the volatile renderings larger than the whole views budget, which are served and not kept:
	// known only as long as their bytes are alive (an open transcript.html of a long session, 20 MB). A
	// getattr or open meanwhile shares those bytes instead of rendering the view again, which cost the
	// mount a second page beside the first and the time of a rendering at each. (A view that is not
	// volatile has the persistent index for that: its bytes in a file, not on the heap.)
	held map[viewKey]heldView
}

// heldView is a rendering the LRU does not keep, and a weak reference to its bytes.
type heldView struct {
	rendered // its r without Data
	data     weak.Pointer[byte]
	n        int
}

// bytes are the rendering's bytes while some reader holds them.
func (h heldView) bytes() ([]byte, bool) {
	p := h.data.Value()
	if p == nil {
		return nil, false
	}
	return unsafe.Slice(p, h.n), true
}

type cached struct {
	id      string
	rev     eventstore.Revision
	sess    *views.Session
	mtime   time.Time
	size    int64 // estimated memory of the decoded snapshot
	elem    *list.Element
	loading chan struct{} // closed when a concurrent load finishes
}

type viewKey struct {
	id   string
	view views.View
}

type verdict struct {
	rev     eventstore.Revision
	refusal error
}

type rendered struct {
	key  viewKey
	rev  eventstore.Revision // what r was rendered at (r.Revision spells it)
	r    Rendered
	elem *list.Element
	grow *growing // the growing rendering r is a moment of (grow.go); nil for any other
	// volatile: a rendering of a volatile view, good only while the session's VolatileState is state;
	// never served without that check (view does not serve it)
	volatile bool
	state    string
}

func newLRU(maxSessions, maxViews int64) *lru {
	return &lru{sessions: map[string]*cached{}, sessionLRU: list.New(), maxSessions: maxSessions, verdicts: map[string]verdict{},
		views: map[viewKey]*rendered{}, viewLRU: list.New(), maxViews: maxViews, held: map[viewKey]heldView{}}
}

// known reports whether rev names a revision at all: the zero Revision is what a session whose artifact
// vanished or could not be stat'ed has, and nothing is kept for it (its load says why).
func known(rev eventstore.Revision) bool { return rev != eventstore.Revision{} }

// get returns the snapshot of id at revision rev, loading it with load when the cached one is older.
// Concurrent callers for the same session share one load.
func (c *lru) get(ctx context.Context, id string, rev eventstore.Revision, load func() (*views.Session, error)) (*cached, error) {
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
		if e != nil && e.rev == rev && known(rev) {
			c.sessionLRU.MoveToFront(e.elem)
			c.mu.Unlock()
			return e, nil
		}
		var prev *views.Session // the snapshot replaced, whose estimate a later one of its lineage extends
		var prevSize int64
		if e != nil {
			prev, prevSize = e.sess, e.size
			c.dropSessionLocked(e)
		}
		e = &cached{id: id, rev: rev, loading: make(chan struct{})}
		e.elem = c.sessionLRU.PushFront(e)
		c.sessions[id] = e
		c.mu.Unlock()

		sess, err := load()

		c.mu.Lock()
		ch := e.loading
		e.loading = nil
		close(ch)
		if err != nil {
			c.dropSessionLocked(e)
			c.mu.Unlock()
			return nil, err
		}
		e.sess = sess
		if known(rev) {
			c.verdicts[id] = verdict{rev: rev, refusal: sess.Refusal}
		}
		e.mtime = sess.ModTime()
		if prev != nil && sess.Lineage != nil && prev.Lineage == sess.Lineage && prev.EventCount() <= sess.EventCount() {
			// a later snapshot of the same live engine: only its new events are counted, and its status
			// scans only them (a batch appended to a large live session must not cost a walk over all of it)
			e.size = prevSize + eventsSize(sess.Events()[prev.EventCount():])
			sess.Continue(prev)
		} else {
			e.size = estimate(sess)
		}
		c.sessionBytes += e.size
		c.evictSessionsLocked(e)
		c.mu.Unlock()
		return e, nil
	}
}

// has reports whether a snapshot of id is cached (or loading).
func (c *lru) has(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.sessions[id]
	return ok
}

// verdict returns the remembered refusal of id at revision rev.
func (c *lru) verdict(id string, rev eventstore.Revision) (error, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.verdicts[id]
	if !ok || v.rev != rev || !known(rev) {
		return nil, false
	}
	return v.refusal, true
}

// view returns a rendering of view for revision rev, if one is cached.
func (c *lru) view(id string, rev eventstore.Revision, view views.View) (Rendered, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.views[viewKey{id, view}]
	if v == nil || v.rev != rev || !known(rev) || v.volatile {
		return Rendered{}, false
	}
	c.viewLRU.MoveToFront(v.elem)
	return v.r, true
}

// volatileView returns the rendering of a volatile view kept at revision rev and state, if one is.
func (c *lru) volatileView(id string, rev eventstore.Revision, view views.View, state string) (Rendered, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.views[viewKey{id, view}]
	if v == nil || v.rev != rev || !known(rev) || !v.volatile || v.state != state {
		return c.heldLocked(viewKey{id, view}, rev, state)
	}
	c.viewLRU.MoveToFront(v.elem)
	return v.r, true
}

// heldLocked returns the volatile rendering of key at rev and state that the LRU did not keep, if its
// bytes are still alive.
func (c *lru) heldLocked(key viewKey, rev eventstore.Revision, state string) (Rendered, bool) {
	h, ok := c.held[key]
	if !ok || h.rev != rev || !known(rev) || h.state != state {
		return Rendered{}, false
	}
	data, ok := h.bytes()
	if !ok {
		delete(c.held, key)
		return Rendered{}, false
	}
	r := h.r
	r.Data = data
	return r, true
}

// holdLocked remembers v, a volatile rendering the LRU does not keep, for as long as its bytes are alive;
// the renderings whose bytes are gone are forgotten.
func (c *lru) holdLocked(v *rendered) {
	for k, h := range c.held {
		if h.data.Value() == nil {
			delete(c.held, k)
		}
	}
	if !v.volatile || v.grow != nil || v.r.Blob != nil || len(v.r.Data) == 0 {
		return
	}
	h := heldView{rendered: *v, data: weak.Make(unsafe.SliceData(v.r.Data)), n: len(v.r.Data)}
	h.r.Data, h.elem = nil, nil
	c.held[v.key] = h
}

// renderVolatile renders a volatile view of a snapshot and keeps it for state (volatileView).
func (c *lru) renderVolatile(ctx context.Context, e *cached, view views.View, state string) (Rendered, error) {
	data, err := e.sess.Render(ctx, view)
	if err != nil {
		return Rendered{}, err
	}
	r := Rendered{Data: data, ModTime: e.mtime, Revision: e.rev.String()}
	if known(e.rev) {
		c.keepRendered(&rendered{key: viewKey{e.id, view}, rev: e.rev, r: r, volatile: true, state: state})
	}
	return r, nil
}

// render renders one view of a snapshot and keeps it unless uncached (a volatile view, whose truth lives
// outside the store). Callers look for a kept rendering first (view).
func (c *lru) render(ctx context.Context, e *cached, view views.View, uncached bool) (Rendered, error) {
	data, err := e.sess.Render(ctx, view)
	if err != nil {
		return Rendered{}, err
	}
	r := Rendered{Data: data, ModTime: e.mtime, Revision: e.rev.String()}
	if uncached || !known(e.rev) {
		return r, nil
	}
	c.keep(e.id, view, e.rev, r)
	return r, nil
}

// keep puts a rendering in the view LRU (rendered now, or read back from the index).
func (c *lru) keep(id string, view views.View, rev eventstore.Revision, r Rendered) {
	c.keepRendered(&rendered{key: viewKey{id, view}, rev: rev, r: r})
}

// keepRendered puts v in the view LRU in place of what it kept of the same view.
func (c *lru) keepRendered(v *rendered) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := v.key
	if old := c.views[key]; old != nil {
		c.dropViewLocked(old)
	}
	delete(c.held, key)
	if v.weight() > c.maxViews {
		c.holdLocked(v) // a single view larger than the budget is served, not kept
		return
	}
	v.elem = c.viewLRU.PushFront(v)
	c.views[key] = v
	c.viewBytes += v.weight()
	for el := c.viewLRU.Back(); el != nil && c.viewBytes > c.maxViews; {
		prev := el.Prev()
		c.dropViewLocked(el.Value.(*rendered))
		el = prev
	}
}

// growing is the growing rendering kept for a view of id (at whatever revision), nil when none is kept.
func (c *lru) growing(id string, view views.View) *growing {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v := c.views[viewKey{id, view}]; v != nil {
		return v.grow
	}
	return nil
}

// keepGrowing keeps r, a moment of the growing rendering g, as the view's rendering at rev.
func (c *lru) keepGrowing(id string, view views.View, rev eventstore.Revision, r Rendered, g *growing) {
	c.keep(id, view, rev, r)
	c.mu.Lock()
	defer c.mu.Unlock()
	if v := c.views[viewKey{id, view}]; v != nil && v.rev == rev {
		v.grow = g
	}
}

// dropGrowing forgets the view's growing rendering (its bytes no longer match its reach).
func (c *lru) dropGrowing(id string, view views.View) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v := c.views[viewKey{id, view}]; v != nil {
		c.dropViewLocked(v)
	}
}

// blobWeight is what a view served from its index file (a Blob) counts against the views budget: not its
// size, which is in the kernel's page cache rather than the heap, but enough that the budget bounds the
// files the LRU keeps open.
const blobWeight = 256 << 10

// weight is what v counts against the views budget: its rendering, and the state a volatile one keeps
// beside it (a spill index, as long as the session cites locators).
func (v *rendered) weight() int64 { return viewWeight(v.r) + int64(len(v.state)) }

func viewWeight(r Rendered) int64 {
	if r.Blob != nil {
		return blobWeight
	}
	return int64(len(r.Data))
}

// drop forgets a session and its views (its artifact changed or vanished).
func (c *lru) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.sessions[id]; e != nil && e.loading == nil {
		c.dropSessionLocked(e)
	}
	for key, v := range c.views {
		if key.id == id {
			c.dropViewLocked(v)
		}
	}
	delete(c.verdicts, id)
}

func (c *lru) dropSessionLocked(e *cached) {
	if c.sessions[e.id] == e {
		delete(c.sessions, e.id)
	}
	if e.elem != nil {
		c.sessionLRU.Remove(e.elem)
		e.elem = nil
	}
	c.sessionBytes -= e.size
	e.size = 0
}

func (c *lru) dropViewLocked(v *rendered) {
	if c.views[v.key] == v {
		delete(c.views, v.key)
	}
	if v.elem != nil {
		c.viewLRU.Remove(v.elem)
		v.elem = nil
		c.viewBytes -= v.weight()
	}
}

// evictSessionsLocked removes least recently used snapshots (never keep) until the budget holds.
func (c *lru) evictSessionsLocked(keep *cached) {
	for el := c.sessionLRU.Back(); el != nil && c.sessionBytes > c.maxSessions; {
		e := el.Value.(*cached)
		prev := el.Prev()
		if e != keep && e.loading == nil {
			c.dropSessionLocked(e)
		}
		el = prev
	}
}

// estimate is the memory a decoded snapshot holds: its event bytes twice (decoded frame buffers are sized
// ahead, expanded chunk rows own their bytes, projections keep slices) plus the per-event structures.
// Measured against the live heap of a mount holding 10k cached sessions, counting the bytes once
// undercounted by about a third. A snapshot whose chunk rows are packed is counted as expanded, which any
// view but the events view makes it.
func estimate(s *views.Session) int64 {
	n, bytes := s.RecordBytes()
	return 4096 + 2*bytes + eventOverhead*int64(n)
}

// eventOverhead is estimate's cost of an event beside its bytes.
const eventOverhead = 96

// eventsSize is estimate's share of events.
func eventsSize(events []event.Event) int64 {
	var n int64
	for _, e := range events {
		n += 2*int64(len(e.Raw)) + eventOverhead
	}
	return n
}
