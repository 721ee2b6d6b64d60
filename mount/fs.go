// Package mount runs the dshfs mount: it serves the node tree of package nodes over go-fuse from the view
// cache (package viewcache: decoded sessions, rendered views, the persistent index), watches the store for
// changes made by other processes (the harness, or another writer) and invalidates the kernel's caches for
// what changed, and handles the mount's life cycle (signals, unmount while busy, lazy detach). Its write
// side (write.go) turns append, ctl and mkdir into calls on the Store's session engines and records every
// outcome for status.json; the engines, not this package, decide what a session is and what reaches the
// disk.
package mount

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/dshfs/dshfs/config"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/nodes"
	"github.com/dshfs/dshfs/spill"
	"github.com/dshfs/dshfs/viewcache"
	"github.com/dshfs/dshfs/views"
)

// Options configure a mount.
type Options struct {
	Store  *eventstore.Store
	Root   string // the store root, for status.json
	Config config.Config
	Spill  *spill.Roots
	Log    *slog.Logger
	// Readahead is how many goroutines render ahead of a walk (readahead.go); 0: as many as the store's
	// Tuning gives its own work.
	Readahead int
}

// FS is the mounted store: the nodes.Source behind the tree.
type FS struct {
	opts    Options
	log     *slog.Logger
	cache   *viewcache.Cache // decoded sessions, rendered views and the persistent index
	listing atomic.Pointer[nodes.Listing]
	listMu  sync.Mutex // serializes listing refreshes
	// indexRows keeps each stored session's index.html row by id as of its revision (StoreIndex)
	indexRows sync.Map
	// frozen remembers each artifact's last frozen prefix (store/), by path.
	frozen sync.Map
	// storeErr is the last failed store command (root ctl), for the store status.json.
	storeErr atomic.Pointer[eventstore.Result]
	// notes carries changes made through this mount to the notifier (kernel invalidation).
	notes chan changes
	// trees bounds the node tree by session (trees.go).
	trees *trees
	// ahead renders the next sessions of a walk in the background (readahead.go).
	ahead *readahead
	root  *gofs.Inode // set by Mount
	// evicted counts the sessions whose nodes the kernel was asked to drop (trees.go)
	evicted atomic.Int64
	// primed counts the views handed to the kernel's page cache after a lookup (nodes/primer.go)
	primed atomic.Int64
	// mountpoint is where Mount mounted the tree (for the working directories below it, trees.go)
	mountpoint string
	cwds       cwdScan
	// stats are the artifact stats the store's change feed vouches for (stats.go).
	stats *statCache
	// feedLive is true while the store's change feed runs (feed.go): it vouches for artifact stats and
	// stable names, as far as cover says (nil: a feed that announces every commit). watchMode is how
	// changes are heard of, for stats.json; gapSaid whether the feed's gap was logged.
	feedLive  atomic.Bool
	cover     eventstore.WatchCoverage
	watchMode atomic.Value // string: watchRefresh, or the feed's mode
	gapSaid   atomic.Bool
	// perms caches the modes of the store's directories for the checks of a shared mount (access.go)
	perms permCache
}

var _ nodes.Source = (*FS)(nil)

// listingKeeper is a backend that can keep the directory listings its lookups read (jsonl.Backend).
type listingKeeper interface{ KeepListings() }

// New prepares a mount over the store and reads the first listing.
func New(opts Options) (*FS, error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if opts.Spill == nil {
		opts.Spill = spill.NewRoots(opts.Config.Spill.Roots)
	}
	f := &FS{opts: opts, log: log, notes: make(chan changes, 1024), trees: newTrees(maxTrees),
		ahead: newReadahead(), stats: newStatCache()}
	f.cover, _ = opts.Store.Backend().(eventstore.WatchCoverage)
	if k, ok := opts.Store.Backend().(listingKeeper); ok {
		k.KeepListings() // the mount looks every session up again at each load and each refresh
	}
	f.cache = viewcache.New(viewcache.Config{
		SessionsBytes: opts.Config.Cache.SessionsBytes,
		ViewsBytes:    opts.Config.Cache.ViewsBytes,
		Index:         opts.Config.Cache.Index,
		IndexDir:      indexDir(opts),
		Store: viewcache.Store{Backend: opts.Store.Backend().Name(), Root: opts.Root,
			MaxLineBytes: opts.Config.Writer.MaxLineBytes, MaxFrameBytes: opts.Config.Writer.MaxFrameBytes,
			MaxSessionBytes: opts.Config.Writer.MaxSessionBytes},
		Load: f.load,
	})
	if _, err := f.refresh(context.Background()); err != nil {
		return nil, err
	}
	return f, nil
}

// Owner is a listed session's artifact owner and permission bits; for a session whose backend names no
// owner (a fleet store's: no file of the session is on this host), the mounting user's, mode 0600.
func (f *FS) Owner(id string) *eventstore.Owner {
	l := f.Listing()
	if i, ok := l.ByID[id]; ok {
		if l.Entries[i].Owner == nil {
			return mountOwner()
		}
		return f.narrowed(l.Entries[i].Owner, l.Entries[i].Path)
	}
	return nil
}

// mountOwner is the owner of a session that names none. Who may read it in the store is whoever holds the
// credentials the mount reads it with — the database's own access control decides, and the DSN, the
// password file and the client key are the mounting user's — so the mounting user alone reads it through
// the mount: under --allow-other another user sees its files as 0400 of the mounting user, and is refused
// (root excepted, as on any file). Another user mounts the store with credentials of their own.
func mountOwner() *eventstore.Owner {
	return &eventstore.Owner{UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), Perm: 0o600}
}

// Listing is the latest listing.
func (f *FS) Listing() *nodes.Listing { return f.listing.Load() }

// Spill is the spill-root policy.
func (f *FS) Spill() *spill.Roots { return f.opts.Spill }

// Timeouts are the configured kernel cache timeouts.
func (f *FS) Timeouts() (time.Duration, time.Duration) {
	return f.opts.Config.FUSE.EntryTimeout, f.opts.Config.FUSE.AttrTimeout
}

// stableTimeout is how long the kernel may keep a stable name while inotify covers the store.
const stableTimeout = time.Minute

// StableTimeouts let the kernel keep a session's directory and its whole-view files, names and attributes,
// for a minute while the store's change feed (feed.go) vouches for every artifact — inotify watching every
// directory of a store on a local filesystem, or a database that announces every commit: every change
// reaches the mount at once, and it tells the kernel then (apply: a removed, renamed or replaced session's
// names go, a changed one's attributes and pages; trees.go: an evicted one's names). A repeated walk (grep
// -l of every events.jsonl) then costs no lookup and no attribute request per file. Without a feed, or on
// a network filesystem, changes are found by polling, and the configured timeouts apply; a configured
// timeout of 0 (no caching) is kept as it is.
func (f *FS) StableTimeouts() (time.Duration, time.Duration) {
	entry, attr := f.Timeouts()
	if !f.feedLive.Load() || (f.cover != nil && !f.cover.Vouches("")) {
		return entry, attr
	}
	stretch := func(d time.Duration) time.Duration {
		if d <= 0 {
			return d
		}
		return max(d, stableTimeout)
	}
	return stretch(entry), stretch(attr)
}

// Logf logs a failure a user saw as an errno.
func (f *FS) Logf(format string, args ...any) { f.log.Warn(fmt.Sprintf(format, args...)) }

// revisionOf is the session's revision now: the live engine's (artifact, durable, pending, results), else
// the artifact's state from one stat plus the results generation; the zero Revision when the artifact
// vanished or cannot be stat'ed (nothing is cached then; the load reports why).
func (f *FS) revisionOf(ctx context.Context, id string) eventstore.Revision {
	if w := f.opts.Store.Live(id); w != nil {
		return w.Revision()
	}
	art, ok := eventstore.Artifact{}, false
	memo := nodes.RequestArtifacts(ctx) // one stat per FUSE request (nodes/request.go)
	if memo != nil {
		art, ok = memo.Get(id)
	}
	if !ok {
		path := ""
		l := f.Listing()
		if i, ok := l.ByID[id]; ok {
			path = l.Entries[i].Path
		}
		var err error
		if art, err = f.statArtifact(ctx, id, path); err != nil {
			return eventstore.Revision{}
		}
		if memo != nil {
			memo.Put(id, art)
		}
	}
	return f.revisionAt(id, art)
}

// revisionAt is the revision of a session that is not live whose artifact was stat'ed as art.
func (f *FS) revisionAt(id string, art eventstore.Artifact) eventstore.Revision {
	_, _, gen := f.opts.Store.Results(id)
	return eventstore.Revision{Artifact: art.Token, Results: gen, Identity: art.Identity}
}

// Identity is the session artifact's storage identity now ("" when unknown).
func (f *FS) Identity(ctx context.Context, id string) string { return f.revisionOf(ctx, id).Identity }

// load decodes session id as it is now, for the cache (viewcache.Loader).
func (f *FS) load(ctx context.Context, id string) (*views.Session, error) {
	if w := f.opts.Store.Live(id); w != nil {
		snap, err := w.SnapshotContext(ctx) // an idle engine that released its log reads it back
		if err != nil {
			return nil, err
		}
		s := views.FromSnapshot(f.opts.Store, snap, f.viewOptions())
		// the engine's list only grows (a log it released and read back holds the same events): its views
		// are extended batch by batch (viewcache)
		s.Lineage = w
		return s, nil
	}
	l := f.Listing()
	if i, ok := l.ByID[id]; ok && l.Entries[i].Refusal != nil {
		// refused at the header already: nothing more to read
		e := l.Entries[i]
		// the listing may be older than the artifact (a newer harness appends to a generation this
		// build refuses): the snapshot is of the artifact as it is now
		if art, err := f.statArtifact(ctx, id, e.Path); err == nil && art.Token != "" {
			e.Revision, e.ModTime = art.Token, art.ModTime
		}
		f.log.Warn("session refused", "id", id, "kind", eventstore.Classify(e.Refusal), "reason", e.Refusal.Error())
		return views.FromEntry(f.opts.Store, e, f.viewOptions()), nil
	}
	opts := f.viewOptions()
	if i, ok := l.ByID[id]; ok {
		opts.Entry = &l.Entries[i]
	}
	s, err := views.Load(ctx, f.opts.Store, id, opts)
	if err == nil && s.Refusal != nil {
		f.log.Warn("session refused", "id", id, "kind", eventstore.Classify(s.Refusal), "reason", s.Refusal.Error())
	}
	return s, err
}

func (f *FS) viewOptions() views.Options { return views.Options{Spill: f.opts.Spill} }

// key is the cache's key of a view of session id at revision r.
func (f *FS) key(id string, view views.View, r eventstore.Revision) viewcache.Key {
	return viewcache.Key{Session: id, View: view, Revision: r, Live: f.opts.Store.Live(id) != nil}
}

// Session returns the current snapshot of a session.
func (f *FS) Session(ctx context.Context, id string) (*views.Session, error) {
	f.shown(id)
	return f.cache.Session(ctx, f.key(id, views.View{}, f.revisionOf(ctx, id)))
}

// Refusal is why the current revision of a session is refused, nil when it is readable.
func (f *FS) Refusal(ctx context.Context, id string) (error, error) {
	f.shown(id)
	return f.cache.Refusal(ctx, f.key(id, views.View{}, f.revisionOf(ctx, id)))
}

// Render returns a view of the current snapshot; a volatile one (the spill index, the transcripts) is served
// from a kept rendering only while the spill targets outside the store resolve as they did.
func (f *FS) Render(ctx context.Context, id string, view views.View) (nodes.Rendered, error) {
	f.shown(id)
	f.sawView(id, view)
	return f.cache.Get(ctx, f.key(id, view, f.revisionOf(ctx, id)))
}

// Attr is a view's size and time: from a rendering cached at the current revision, else from the persistent
// index, else by rendering it (one revision read for all three).
func (f *FS) Attr(ctx context.Context, id string, view views.View) (nodes.Rendered, int64, error) {
	f.shown(id)
	f.sawView(id, view)
	return f.cache.Stat(ctx, f.key(id, view, f.revisionOf(ctx, id)))
}
