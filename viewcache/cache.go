package viewcache

import (
	"context"
	"io"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/views"
)

// Key names one view of one session at one revision. The cache compares keys as values: nothing of a key
// is ever spelled into a string to be compared.
type Key struct {
	Session  string
	View     views.View
	Revision eventstore.Revision
	// Live marks a session this process holds live (a writer's engine): its revision moves with every
	// accepted event while the artifact's stays, so the persistent index neither serves nor keeps it.
	Live bool
}

// indexRev is the key's revision as the persistent index knows it; the zero artifactRev when the index
// must not be used for it.
func (k Key) indexRev() artifactRev {
	if k.Revision.Artifact == "" || k.Live {
		return artifactRev{}
	}
	return artifactRev{artifact: k.Revision.Artifact, identity: k.Revision.Identity}
}

// Loader decodes session id as it is now (a live engine's snapshot, a refused listing entry, or the stored
// log). The cache calls it when it holds no snapshot at the revision asked for, once for concurrent askers.
type Loader func(ctx context.Context, id string) (*views.Session, error)

// Store names what an index entry's verdict and sizes depend on beside the artifact: the store, and the
// configuration that decides whether a session reads (the line and frame limits). A mount with other
// limits uses other entries, in the same directory.
type Store struct {
	Backend         string
	Root            string
	MaxLineBytes    int64
	MaxFrameBytes   int64
	MaxSessionBytes int64
}

// salt is s as the index hashes it into its file names.
func (s Store) salt() string {
	return s.Backend + "\x00" + s.Root + "\x00" + strconv.FormatInt(s.MaxLineBytes, 10) + "\x00" +
		strconv.FormatInt(s.MaxFrameBytes, 10) + sessionSalt(s.MaxSessionBytes)
}

// sessionSalt keeps the entries of mounts with the default load budget where they were before the budget
// was configurable.
func sessionSalt(n int64) string {
	if n == 1<<30 {
		return ""
	}
	return "\x00" + strconv.FormatInt(n, 10)
}

// Config configures a Cache.
type Config struct {
	SessionsBytes int64 // the decoded-session LRU's budget
	ViewsBytes    int64 // the rendered-view LRU's budget
	// Index turns the per-revision index on. Without it the cache is the two LRUs alone: a size is known
	// only from a rendering, so a stat after an eviction or a remount decodes again.
	Index bool
	// IndexDir is where the index persists (the index's pack and view files); "" keeps it in memory only.
	IndexDir string
	Store    Store
	Load     Loader
}

// Cache is the read path's one cache: a FUSE read asks it for a view by Key, and it answers from the
// rendered-view LRU, else from the persistent index, else by rendering the decoded session (from the
// session LRU, else loaded), keeping what it rendered in both.
type Cache struct {
	load  Loader
	lru   *lru
	index *index // nil when the index is off
	// renders are the indexed renderings under way, so that a request and a readahead worker asking for
	// the same view at once render it once
	renders flights
	decodes atomic.Int64 // loads, which the index exists to avoid (stats.json "decodes")
	work    work         // what was rendered (grow.go)
	// grow orders the extensions of growing renderings (grow.go): each is extended by one batch at a time,
	// under the stripe of its session and view, so that one session's whole rendering holds up no other's
	grow     [64]sync.Mutex
	spoolDir string // where a growing rendering past blobMin keeps its bytes ("" for the system's)
}

// New makes a cache.
func New(cfg Config) *Cache {
	c := &Cache{load: cfg.Load, lru: newLRU(cfg.SessionsBytes, cfg.ViewsBytes), spoolDir: cfg.IndexDir}
	if cfg.Index {
		c.index = newIndex(cfg.IndexDir, cfg.Store.salt())
	}
	return c
}

// Close appends the index entries still in their batch to the index (at a mount's end: a later mount
// reads them instead of decoding). The cache stays usable.
func (c *Cache) Close() {
	if c.index != nil {
		c.index.flush()
	}
}

// Decodes counts the sessions loaded.
func (c *Cache) Decodes() int64 { return c.decodes.Load() }

// IndexHits counts the verdicts, sizes and views served from the index.
func (c *Cache) IndexHits() int64 {
	if c.index == nil {
		return 0
	}
	return c.index.hits.Load()
}

// Get returns the view k names: from the view LRU, else from the index, else rendered from the decoded
// session (loaded when the session LRU holds none at k.Revision). A volatile view (the spill index, the
// transcripts, whose truth lives partly outside the store) is kept only with what else it depends on, and
// served again only while that holds (volatile).
func (c *Cache) Get(ctx context.Context, k Key) (Rendered, error) {
	irev := k.indexRev()
	if !k.View.Volatile() {
		if r, ok := c.kept(k, irev); ok {
			return r, nil
		}
	}
	if irev.artifact != "" && indexed[k.View] {
		// one rendering of a view at a time: a second asker waits for it and takes it from the LRU or the
		// index (or renders it after all, if neither kept it)
		fk := flightKey{session: k.Session, view: k.View, rev: irev}
		done, first := c.renders.join(fk)
		if !first {
			select {
			case <-done:
			case <-ctx.Done():
				return Rendered{}, ctx.Err()
			}
			if r, ok := c.kept(k, irev); ok {
				return r, nil
			}
		} else {
			defer c.renders.leave(fk)
			// the rendering of an asker whose flight ended between our miss and our join: this process's,
			// so in memory (the pack was read by the miss, and a walk's every first read passes here)
			if r, ok := c.keptHere(k, irev); ok {
				return r, nil
			}
		}
	}
	if k.Live && views.Growable(k.View) {
		if r, ok, err := c.live(ctx, k); ok {
			return r, err
		}
	}
	e, err := c.entry(ctx, k)
	if err != nil {
		return Rendered{}, err
	}
	if k.View.Volatile() && known(k.Revision) && e.rev == k.Revision {
		return c.volatile(ctx, k, e)
	}
	indexable := c.index != nil && irev.artifact != "" && e.sess.Refusal == nil && e.rev == k.Revision
	if indexable {
		// rendered into the index's file as it is written: a large view is then served from there and
		// never held whole in memory
		r, ok, err := c.index.write(k.Session, irev, k.View, e.mtime, func(w io.Writer) error { return e.sess.WriteView(ctx, w, k.View) })
		if ok {
			if err != nil {
				return Rendered{}, err
			}
			c.work.rendered(r.Size())
			r.Revision, r.Identity = k.Revision.String(), k.Revision.Identity
			c.lru.keep(k.Session, k.View, k.Revision, r)
			return r, nil
		}
	}
	r, err := c.lru.render(ctx, e, k.View, k.View.Volatile())
	if err == nil {
		c.work.rendered(r.Size())
	}
	r.Identity = k.Revision.Identity
	if err == nil && indexable {
		c.index.remember(k.Session, irev, k.View, r.Data, r.ModTime)
	}
	return r, err
}

// Stat is the size and time of the view k names: from a rendering kept at k.Revision (returned whole),
// else from the index (without Data, with Sum), else by rendering it.
func (c *Cache) Stat(ctx context.Context, k Key) (Rendered, int64, error) {
	if r, ok := c.lru.view(k.Session, k.Revision, k.View); ok {
		r.Identity = k.Revision.Identity
		return r, r.Size(), nil
	}
	if irev := k.indexRev(); c.index != nil && irev.artifact != "" {
		if n, mtime, sum, ok := c.index.size(k.Session, irev, k.View); ok {
			return Rendered{ModTime: mtime, Revision: k.Revision.String(), Identity: k.Revision.Identity, Sum: sum}, n, nil
		}
	}
	r, err := c.Get(ctx, k)
	return r, r.Size(), err
}

// Kept returns the view k names as the LRU or the index keeps it, rendering nothing; false for a view
// the index does not keep, and for one that would have to be rendered.
func (c *Cache) Kept(k Key) (Rendered, bool) {
	if !indexed[k.View] {
		return Rendered{}, false
	}
	return c.kept(k, k.indexRev())
}

// Known reports whether the view k names is kept, rendered or indexed at k.Revision, without reading it
// and without counting an index hit (readahead asks it before rendering ahead).
func (c *Cache) Known(k Key) bool {
	if _, ok := c.lru.view(k.Session, k.Revision, k.View); ok {
		return true
	}
	if irev := k.indexRev(); c.index != nil && irev.artifact != "" {
		_, _, _, ok := c.index.lookup(k.Session, irev, k.View)
		return ok
	}
	return false
}

// kept is a view's rendering at k.Revision as the LRU or the index keeps it.
func (c *Cache) kept(k Key, irev artifactRev) (Rendered, bool) { return c.keptFrom(k, irev, true) }

// keptHere is kept without reading the pack for an entry the index does not hold in memory: for what
// this process has just rendered.
func (c *Cache) keptHere(k Key, irev artifactRev) (Rendered, bool) { return c.keptFrom(k, irev, false) }

func (c *Cache) keptFrom(k Key, irev artifactRev, pack bool) (Rendered, bool) {
	if r, ok := c.lru.view(k.Session, k.Revision, k.View); ok {
		r.Identity = k.Revision.Identity
		return r, true // rendered at this revision before: no need for the decoded session
	}
	if c.index == nil || irev.artifact == "" {
		return Rendered{}, false
	}
	content := c.index.content
	if !pack {
		content = c.index.contentHeld
	}
	if r, ok := content(k.Session, irev, k.View); ok {
		r.Revision, r.Identity = k.Revision.String(), k.Revision.Identity
		c.lru.keep(k.Session, k.View, k.Revision, r)
		return r, true // its bytes kept on disk at this revision
	}
	return Rendered{}, false
}

// Session is the decoded session at k.Revision (k.View is not used), loaded when the LRU holds an older one.
func (c *Cache) Session(ctx context.Context, k Key) (*views.Session, error) {
	e, err := c.entry(ctx, k)
	if err != nil {
		return nil, err
	}
	return e.sess, nil
}

// Refusal is why the session is refused at k.Revision (k.View is not used), nil when it reads: remembered
// per revision, and known from the index, so that it costs no decode after an eviction.
func (c *Cache) Refusal(ctx context.Context, k Key) (error, error) {
	if refusal, ok := c.lru.verdict(k.Session, k.Revision); ok {
		return refusal, nil
	}
	if irev := k.indexRev(); c.index != nil && irev.artifact != "" && c.index.reads(k.Session, irev) {
		return nil, nil
	}
	e, err := c.entry(ctx, k)
	if err != nil {
		return nil, err
	}
	return e.sess.Refusal, nil
}

// entry is the LRU's snapshot of k.Session at k.Revision, loaded when the cached one is older.
func (c *Cache) entry(ctx context.Context, k Key) (*cached, error) {
	return c.lru.get(ctx, k.Session, k.Revision, func() (*views.Session, error) {
		c.decodes.Add(1)
		return c.load(ctx, k.Session)
	})
}

// Drop forgets what the LRUs hold of a session (its artifact changed or vanished). The index needs no
// telling: its entries are trusted only at the revision they were written for.
func (c *Cache) Drop(id string) { c.lru.drop(id) }

// Purge forgets sessions gone from the store, on disk too (the index's tombstones and view files).
func (c *Cache) Purge(ids []string) {
	if c.index != nil && len(ids) > 0 {
		c.index.purge(ids)
	}
}

// PurgeAbsent purges every indexed session not among ids (the store's whole listing): what was removed
// while no mount watched the store.
func (c *Cache) PurgeAbsent(ids []string) {
	if c.index != nil {
		c.index.purgeAbsent(ids)
	}
}

// volatile is a view that depends on more than the revision (views.View.Volatile) of snapshot e: the
// rendering kept at k.Revision while what else it depends on (views.Session.VolatileState) is what it was
// rendered at, else a new rendering, made once for concurrent askers. A transcript is then rendered once
// per change, not at every getattr, open and read, and four readers of it hold one rendering, not four.
func (c *Cache) volatile(ctx context.Context, k Key, e *cached) (Rendered, error) {
	state, err := e.sess.VolatileState()
	if err != nil {
		return c.lru.render(ctx, e, k.View, true) // which fails as the state did
	}
	fk := flightKey{session: k.Session, view: k.View, at: k.Revision}
	for {
		if r, ok := c.lru.volatileView(k.Session, k.Revision, k.View, state); ok {
			r.Identity = k.Revision.Identity
			return r, nil
		}
		done, first := c.renders.join(fk)
		if first {
			break
		}
		select {
		case <-done:
		case <-ctx.Done():
			return Rendered{}, ctx.Err()
		}
	}
	defer c.renders.leave(fk)
	// an asker that missed the cache just before another's rendering was kept, and joined just after it
	// left, finds that rendering here rather than making its own
	if r, ok := c.lru.volatileView(k.Session, k.Revision, k.View, state); ok {
		r.Identity = k.Revision.Identity
		return r, nil
	}
	r, err := c.lru.renderVolatile(ctx, e, k.View, state)
	if err != nil {
		return Rendered{}, err
	}
	c.work.rendered(r.Size())
	r.Identity = k.Revision.Identity
	return r, nil
}

// flightKey names one rendering under way: an indexed one by its artifact revision, a volatile one by its
// whole revision.
type flightKey struct {
	session string
	view    views.View
	rev     artifactRev
	at      eventstore.Revision
}

// flights are renderings under way, by key: join makes the caller the first (who must leave when done) or
// gives it the channel that closes when the first leaves.
type flights struct {
	mu sync.Mutex
	m  map[flightKey]chan struct{}
}

func (fl *flights) join(key flightKey) (done <-chan struct{}, first bool) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if ch, ok := fl.m[key]; ok {
		return ch, false
	}
	if fl.m == nil {
		fl.m = map[flightKey]chan struct{}{}
	}
	fl.m[key] = make(chan struct{})
	return nil, true
}

func (fl *flights) leave(key flightKey) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	close(fl.m[key])
	delete(fl.m, key)
}
