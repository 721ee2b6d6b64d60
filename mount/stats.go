package mount

import (
	"context"
	"sync"

	"github.com/dshfs/dshfs/eventstore"
)

// Every lookup, open and attribute request below a session checks its artifact's revision, which is a
// stat of the artifact: about four per file a repeated `grep -l` opens, a fifth of the mount's CPU in that
// walk. While the store's change feed vouches for an artifact (inotify watching its session's directory),
// it hears of every change to it (written, replaced, renamed, chmod'ed) as it happens, so the last stat
// stays the truth until an announcement drops it. statCache keeps those stats. It only keeps a stat taken
// while the feed already vouched for the artifact, and a generation per session makes a stat that raced
// with a change (started before the announcement dropped the session) be thrown away instead of kept.
// Without a feed, for a directory inotify could not watch, or on a network filesystem (whose other writers
// raise no event here), every access stats as before.

// statCache holds artifact stats the change feed vouches for.
type statCache struct {
	mu   sync.Mutex
	next uint64                    // the last generation handed out
	gen  map[string]uint64         // per session: the generation of its last drop
	all  uint64                    // the generation of the last dropAll
	m    map[string]cachedArtifact // by session id
}

type cachedArtifact struct {
	path string
	art  eventstore.Artifact
}

func newStatCache() *statCache {
	return &statCache{gen: map[string]uint64{}, m: map[string]cachedArtifact{}}
}

// get returns the kept stat of session id's artifact at path.
func (c *statCache) get(id, path string) (eventstore.Artifact, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.m[id]
	if !ok || a.path != path {
		return eventstore.Artifact{}, false
	}
	return a.art, true
}

// begin is called before a stat: put keeps the result only if nothing dropped the session after begin.
func (c *statCache) begin() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.next
}

func (c *statCache) put(id, path string, art eventstore.Artifact, since uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen[id] > since || c.all > since {
		return // a change was reported while the stat ran: it may predate it
	}
	c.m[id] = cachedArtifact{path: path, art: art}
}

// drop forgets session id's stat (its artifact changed).
func (c *statCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	c.gen[id] = c.next
	delete(c.m, id)
}

// dropAll forgets every stat (something changed that is not one artifact's content, or events were lost).
func (c *statCache) dropAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	c.all = c.next
	clear(c.m)
	clear(c.gen) // every generation in it is below all now
}

// statArtifact is Store.Stat of session id's artifact at path ("" = find it), from the cache while the
// store's change feed vouches for the artifact (feed.go).
func (f *FS) statArtifact(ctx context.Context, id, path string) (eventstore.Artifact, error) {
	if !f.vouched(path) {
		return f.opts.Store.Stat(ctx, id, path)
	}
	if art, ok := f.stats.get(id, path); ok {
		return art, nil
	}
	since := f.stats.begin()
	art, err := f.opts.Store.Stat(ctx, id, path)
	if err == nil {
		f.stats.put(id, path, art, since)
	}
	return art, err
}

// vouched reports whether every change to the artifact at path is heard of as it happens, so that a stat
// of it stays true until a change drops it.
func (f *FS) vouched(path string) bool {
	if !f.feedLive.Load() {
		return false
	}
	return f.cover == nil || (path != "" && f.cover.Vouches(path))
}
