package jsonl

import (
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dshfs/dshfs/internal/storewatch"
)

// dirCache keeps the listings a session's lookup (discover) reads at every load — the store root's project
// directories and the session directory's names — for as long as a stat of the directory says it has not
// changed since. A first walk over a large store loads every session once; listing the root and the
// session directory again at each load cost about ten system calls a session where one stat does.
//
// A directory's mtime and ctime move with every name added, removed or renamed in it, but only to the
// filesystem's clock, which is coarse (a scheduler tick; a second or two on some filesystems): two changes
// within one tick can leave the same stamp. So a listing is kept only when its directory's stamp was already
// settled — older than settleAfter — when it was taken: any change after that carries a later time, and
// a stamp that differs. A directory that changed recently is listed afresh each time, as without the
// cache; the lookup rules, refusals included, read the same names either way.
//
// Listings are kept once KeepListings is called: a process that lists the store once (dshfs ls) would pay
// a stat per directory for nothing.
//
// Only directories on the store root's own filesystem, and that a local one, are kept: a network
// filesystem's client may answer a stat from attributes it cached for up to a minute, and a directory
// mounted below the root could be such a filesystem.
type dirCache struct {
	root string
	on   atomic.Bool // KeepListings was called

	once    sync.Once
	rootDev int64 // the root's device; 0: keep nothing (a network filesystem, or the root cannot be stat'ed)

	mu sync.Mutex
	m  map[dirKey]dirListing
	// now is the clock settledness is judged by (tests move it)
	now func() time.Time
}

// settleAfter is how old a directory's change must be before a listing of it is kept: beyond the coarse
// clock of any filesystem the store may sit on (two seconds for the coarsest timestamps).
const settleAfter = 3 * time.Second

// dirCacheMax bounds the listings kept: a walk over a store of more sessions recycles them, as the index does.
const dirCacheMax = 1 << 16

// dirKind tells the two listings of one directory apart.
type dirKind uint8

const (
	kindSubdirs dirKind = iota // subdirs: the directories in it, sorted
	kindNames                  // dirNames: every name in it
)

type dirKey struct {
	path string
	kind dirKind
}

// dirStamp is what a stat says of a directory: which one the path names, and when it last changed.
type dirStamp struct {
	dev, ino, size int64
	mtime, ctime   int64
	mode           uint32
}

type dirListing struct {
	stamp dirStamp
	names []string
}

func stampOf(info os.FileInfo) (dirStamp, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || !info.IsDir() {
		return dirStamp{}, false
	}
	return dirStamp{
		dev: int64(st.Dev), ino: int64(st.Ino), size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), mode: st.Mode,
	}, true
}

// list returns path's listing of kind, from the cache while the directory's stamp is the one it was kept
// with, else from list (whose result is kept when the directory had settled). The result is shared: callers
// must not change it.
func (c *dirCache) list(path string, kind dirKind, list func(string) []string) []string {
	if !c.on.Load() {
		return list(path)
	}
	clock := c.now
	if clock == nil {
		clock = time.Now
	}
	before := clock()
	info, err := os.Stat(path) // following links, as the listing's open does
	if err != nil {
		return list(path)
	}
	stamp, ok := stampOf(info)
	if dev := c.localDev(); !ok || dev == 0 || stamp.dev != dev {
		return list(path)
	}
	key := dirKey{path, kind}
	c.mu.Lock()
	if l, ok := c.m[key]; ok && l.stamp == stamp {
		c.mu.Unlock()
		return l.names
	}
	c.mu.Unlock()
	// Listed after the stat: a change in between leaves a stamp later than this one, which the next stat
	// sees, so the listing kept under this stamp is never served past that change.
	names := list(path)
	settled := before.Add(-settleAfter).UnixNano()
	if stamp.mtime >= settled || stamp.ctime >= settled {
		return names
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[dirKey]dirListing{}
	}
	if len(c.m) >= dirCacheMax {
		for k := range c.m { // a random eighth: no order to keep up on every use
			delete(c.m, k)
			if len(c.m) < dirCacheMax*7/8 {
				break
			}
		}
	}
	c.m[key] = dirListing{stamp: stamp, names: names}
	c.mu.Unlock()
	return names
}

// localDev is the device of the store root when listings on it may be kept, else 0.
func (c *dirCache) localDev() int64 {
	c.once.Do(func() {
		info, err := os.Stat(c.root)
		if err != nil || storewatch.RemoteFS(c.root) != "" {
			return
		}
		if s, ok := stampOf(info); ok && s.dev != 0 {
			c.rootDev = s.dev
		}
	})
	return c.rootDev
}

// KeepListings has the backend keep the store root's and the session directories' listings while a stat
// shows them unchanged (dirCache), for a process that looks sessions up again and again: a mount lists
// the store, then loads each session it is asked for, and lists it again at every refresh.
func (b *Backend) KeepListings() { b.dirs.on.Store(true) }

// KeepsListings reports whether KeepListings was called.
func (b *Backend) KeepsListings() bool { return b.dirs.on.Load() }
