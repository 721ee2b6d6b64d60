// Package fs runs the dshfs mount: it serves the node tree of package nodes over go-fuse from the view
// cache (package viewcache: decoded sessions, rendered views, the persistent index), watches the store for
// changes made by other processes (the harness, or another writer) and invalidates the kernel's caches for
// what changed, and handles the mount's life cycle (signals, unmount while busy, lazy detach). Its write
// side (write.go) turns append, ctl and mkdir into calls on the Store's session engines and records every
// outcome for status.json; the engines, not this package, decide what a session is and what reaches the
// disk.
package fs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/dshfs/dshfs/config"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
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

// StoreStatus renders the store's status.json from the latest listing and the write side's state now, as
// the caller of ctx may see them: of the sessions it may read (visible), nothing of the others.
func (f *FS) StoreStatus(ctx context.Context) []byte {
	l := f.Listing()
	entries, _, hidden := f.visible(ctx, l)
	st := eventstore.StoreState{LastError: f.storeErr.Load(), LastQuiesce: f.opts.Store.LastQuiesce()}
	if st.LastError != nil && mentions(st.LastError, hidden) {
		st.LastError = nil // another user's command on a session this caller may not know of
	}
	if sv, ok := f.opts.Store.Backend().(interface{ SchemaVersion() int }); ok {
		st.SchemaVersion = sv.SchemaVersion()
	}
	if until, ok := f.opts.Store.Quiesced(); ok {
		st.QuiescedUntil = &until
	}
	for _, id := range f.opts.Store.LiveIDs() {
		if w := f.opts.Store.Live(id); w != nil && (hidden == nil || f.PermitSession(ctx, id) == 0) {
			st.Live++
			st.Pending += w.Pending()
		}
	}
	listing := eventstore.Listing{Entries: entries, RootErrors: l.RootErrors}
	if hidden != nil {
		listing.RootErrors = nil
		for _, r := range l.RootErrors {
			if f.Permit(ctx, r.Path, nil, 4) == 0 {
				listing.RootErrors = append(listing.RootErrors, r)
			}
		}
	}
	root := f.opts.Root
	if loc, ok := f.opts.Store.Backend().(interface{ Location() string }); ok {
		root = loc.Location() // a store that is no path (a fleet store's DSN, without its password)
	}
	return append(event.Stringify(eventstore.StoreStatus(f.opts.Store.Backend().Name(), root, listing, st)), '\n')
}

// visible is what of listing l the caller of ctx may know: the sessions whose artifacts it could read in
// the store (PermitSession), with their names, and the ids of those it may not (nil when none is left
// out). Under allow_other the store-level files (status.json, stats.json, the index) are built from it,
// so that they tell a user no more than the listings of sessions/ do.
func (f *FS) visible(ctx context.Context, l *nodes.Listing) (entries []eventstore.Entry, names []string, hidden []string) {
	if _, checked := f.caller(ctx); !checked {
		return l.Entries, l.Names, nil
	}
	for i, e := range l.Entries {
		if f.PermitSession(ctx, e.ID) != 0 {
			hidden = append(hidden, e.ID)
			continue
		}
		entries = append(entries, e)
		names = append(names, l.Names[i])
	}
	if hidden == nil {
		return l.Entries, l.Names, nil
	}
	return entries, names, hidden
}

// mentions reports whether a command result's text names one of ids.
func mentions(r *eventstore.Result, ids []string) bool {
	text := r.Message
	if r.Err != nil {
		text += "\n" + r.Err.Message
	}
	text += "\n" + r.Command
	for _, id := range ids {
		if strings.Contains(text, id) {
			return true
		}
	}
	return false
}

// VisibleSessions is how many sessions the caller of ctx may know of (visible): the index's pages are
// counted by it.
func (f *FS) VisibleSessions(ctx context.Context) int {
	entries, _, _ := f.visible(ctx, f.Listing())
	return len(entries)
}

// StoreIndex renders page p of the store's index from the latest listing, each session's row from its
// current snapshot (the view cache's, so a page costs the sessions on it); of the sessions the caller of
// ctx may read only (visible).
func (f *FS) StoreIndex(ctx context.Context, p int) ([]byte, bool) {
	entries, names, _ := f.visible(ctx, f.Listing())
	return views.StoreIndex(ctx, entries, p, func(i int) string { return names[i] }, func(e eventstore.Entry) *views.Session {
		s, err := f.Session(ctx, e.ID)
		if err != nil {
			return views.FromEntry(f.opts.Store, eventstore.Entry{ID: e.ID, ModTime: e.ModTime, Header: e.Header, Refusal: err}, f.viewOptions())
		}
		return s
	})
}

// StoreStats renders the root stats.json: the mount's cache counters. They move with every read, so they
// live apart from status.json, which changes only with the store (a copy of the mount diffs clean there).
// decodes counts the sessions decoded (loaded and validated); indexHits the stats and verdicts answered
// from the persistent index instead; readahead the views rendered ahead of a walk; evicted the sessions
// whose nodes the kernel was asked to drop (out of the working set); primed the views handed to the
// kernel's page cache after a lookup; renderedBytes the bytes of views rendered whole, extendedBytes those
// appended to live sessions' growing views. A caller who may not read every session (visible) is shown
// only pid and watch: the counters move with every session's reads and writes, its own or not.
func (f *FS) StoreStats(ctx context.Context) []byte {
	n := func(v int64) event.Value { return event.Number(float64(v)) }
	if _, _, hidden := f.visible(ctx, f.Listing()); hidden != nil {
		return append(event.Stringify(event.Object(
			event.Member{Key: "pid", Value: n(int64(os.Getpid()))},
			event.Member{Key: "watch", Value: event.String(f.WatchMode())},
		)), '\n')
	}
	work := f.cache.Work()
	live := f.opts.Store.LiveMemory()
	return append(event.Stringify(event.Object(
		event.Member{Key: "decodes", Value: n(f.cache.Decodes())},
		event.Member{Key: "indexHits", Value: n(f.cache.IndexHits())},
		event.Member{Key: "readahead", Value: n(f.ahead.done.Load())},
		event.Member{Key: "evicted", Value: n(f.evicted.Load())},
		event.Member{Key: "primed", Value: n(f.primed.Load())},
		// the bytes of views rendered whole, and those added to a live session's growing views by its
		// batches (viewcache/grow.go): following a live session should move the second, not the first
		event.Member{Key: "renderedBytes", Value: n(work.RenderedBytes)},
		event.Member{Key: "extendedBytes", Value: n(work.ExtendedBytes)},
		// the live engines' logs in memory ([writer] live_bytes): how many hold theirs, their estimated
		// bytes, and how many times an idle one released its log and one read it back
		event.Member{Key: "liveResident", Value: n(int64(live.Resident))},
		event.Member{Key: "liveBytes", Value: n(live.Bytes)},
		event.Member{Key: "liveReleased", Value: n(live.Shed)},
		event.Member{Key: "liveReloaded", Value: n(live.Reloaded)},
		// which process serves the mount: a second `dshfs mount` onto it names it (a mount's property, so
		// here and not in status.json, which a copy of the mount must find unchanged)
		event.Member{Key: "pid", Value: n(int64(os.Getpid()))},
		// how the mount hears of changes: inotify, refresh (listing every refresh_interval), or a store's
		// change feed — listen (told at each commit) or poll (the store's revisions compared every second)
		event.Member{Key: "watch", Value: event.String(f.WatchMode())},
	)), '\n')
}

// WatchMode is how the mount hears of changes made by others (stats.json's watch): "inotify", "refresh",
// or the store's change feed, "listen" or "poll"; "" before watching starts.
func (f *FS) WatchMode() string {
	m, _ := f.watchMode.Load().(string)
	return m
}

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

// Render returns a view of the current snapshot; the spill index is never cached (its targets live
// outside the store).
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

// indexDir is where the index persists: [cache] dir, else $XDG_CACHE_HOME/dshfs; "" (memory only) when
// it cannot be created, or when the index is off ([cache] index = false).
func indexDir(opts Options) string {
	if !opts.Config.Cache.Index {
		return "" // off: nothing is written under the cache directory
	}
	dir := opts.Config.Cache.Dir
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(base, "dshfs")
	}
	dir = filepath.Join(dir, "index")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		if opts.Log != nil {
			opts.Log.Info("the persistent index is off (its directory cannot be created): sizes after an eviction decode again", "dir", dir, "err", err)
		}
		return ""
	}
	return dir
}

// refresh re-reads the listing and reports what changed since the previous one.
func (f *FS) refresh(ctx context.Context) (changes, error) {
	f.listMu.Lock()
	defer f.listMu.Unlock()
	l, err := f.opts.Store.List(ctx)
	if err != nil {
		return changes{}, err
	}
	next := buildListing(l, f.opts.Store.Backend().Name(), f.opts.Root)
	if name, e, ok := f.opts.Store.Database(); ok {
		// a store that is one database: store/ holds one consistent copy of it
		next.Mirror = &nodes.Mirror{Dirs: map[string][]string{"": {name}}, Files: map[string]eventstore.Entry{name: e}}
	} else if f.opts.Store.Mirrored() {
		next.Files = true
		next.Mirror = buildMirror(l, f.opts.Root)
	}
	prev := f.listing.Swap(next)
	c := diff(prev, next)
	f.endSuperseded(ctx, next, &c)
	return c, nil
}

// endSuperseded ends the live state of every session this mount writes whose listing now names another
// artifact (a newer generation an upgraded harness published beside its v0 log): its log is no longer
// the session, so it is served from its current artifact at once, not at its next write or a rescan. The
// pending events are kept in a sidecar, and the session's status.json says where.
func (f *FS) endSuperseded(ctx context.Context, l *nodes.Listing, c *changes) {
	for _, id := range f.opts.Store.LiveIDs() {
		i, ok := l.ByID[id]
		if !ok {
			continue
		}
		ended, err := f.opts.Store.Supersede(ctx, id, l.Entries[i].Path)
		if !ended {
			continue
		}
		f.log.Info("a newer generation of a live session was published: its live state ended", "session", id, "artifact", l.Entries[i].Path)
		if err != nil {
			f.record(id, eventstore.Result{Command: "superseded", Err: eventstore.AsCommandError(err)})
		}
		if !slices.Contains(c.changed, id) {
			c.changed = append(c.changed, id)
		}
		if !slices.Contains(c.replaced, id) {
			c.replaced = append(c.replaced, id)
		}
	}
}

// buildListing indexes a store listing for the tree: encoded names (docs/tree.md naming rules, sorted),
// project groups and fork children.
func buildListing(l eventstore.Listing, backend, root string) *nodes.Listing {
	out := &nodes.Listing{ByName: map[string]int{}, ByID: map[string]int{}, Projects: map[string][]int{},
		Hosts: map[string][]int{}, Children: map[string][]int{}, RootErrors: l.RootErrors, ModTime: time.Unix(0, 0)}
	entries := append([]eventstore.Entry(nil), l.Entries...)
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = spill.NameSegment(e.ID)
	}
	idx := make([]int, len(entries))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return names[idx[a]] < names[idx[b]] })
	for _, i := range idx {
		e := entries[i]
		if j, dup := out.ByName[names[i]]; dup {
			// Two entries share a name when their ids collide after the 200-byte cap, or when a stray
			// directory's raw name decodes to a valid sibling's id: the session the harness opens keeps
			// the name — one it lists, else the one in the directory its inspect(id) opens — else the
			// first.
			old := out.Entries[j]
			listed, canonical := e.Refusal == nil, filepath.Base(filepath.Dir(e.Path)) == names[i]
			oldListed, oldCanonical := old.Refusal == nil, filepath.Base(filepath.Dir(old.Path)) == names[i]
			if (listed && !oldListed) || (listed == oldListed && canonical && !oldCanonical) {
				out.Entries[j] = e
				out.ByID[e.ID] = j
			}
			continue
		}
		n := len(out.Entries)
		out.Entries = append(out.Entries, e)
		out.Names = append(out.Names, names[i])
		out.ByName[names[i]] = n
		out.ByID[e.ID] = n
		out.Projects[e.ProjectDir] = append(out.Projects[e.ProjectDir], n)
		if e.Host != "" {
			out.Hosts[e.Host] = append(out.Hosts[e.Host], n)
		}
		if e.Header != nil && e.Header.ParentSession != nil && e.Header.ParentSession.Kind == event.KindString {
			p := e.Header.ParentSession.Str
			out.Children[p] = append(out.Children[p], n)
		}
		if e.ModTime.After(out.ModTime) {
			out.ModTime = e.ModTime
		}
	}
	return out
}

// buildMirror indexes every artifact of the listing (strays and refused sessions included) by its path
// relative to the root, for store/. An artifact that is not a regular file three levels down
// (project/session/file) is a root error, never an entry, so every entry fits.
func buildMirror(l eventstore.Listing, root string) *nodes.Mirror {
	m := &nodes.Mirror{Dirs: map[string][]string{}, Files: map[string]eventstore.Entry{}}
	seen := map[string]bool{}
	var files []eventstore.Entry
	for _, e := range l.Entries {
		files = append(files, e)
		for _, p := range e.Beside {
			files = append(files, besideEntry(e, p))
		}
	}
	for _, e := range files {
		rel, err := filepath.Rel(root, e.Path)
		if err != nil || !filepath.IsLocal(rel) {
			continue
		}
		rel = filepath.ToSlash(rel)
		m.Files[rel] = e
		for p := rel; p != "." && p != ""; {
			parent := path.Dir(p)
			if parent == "." {
				parent = ""
			}
			if !seen[p] {
				seen[p] = true
				m.Dirs[parent] = append(m.Dirs[parent], path.Base(p))
			}
			p = parent
		}
	}
	for _, names := range m.Dirs {
		sort.Strings(names)
	}
	return m
}

// errBeside marks the mirror entry of a generation file beside a session's artifact: like a refused
// session's artifact, it is mirrored whole, as it is (an older generation is never written again once a
// newer one is beside it; one in the other encoding is no artifact of this store's).
var errBeside = errors.New("a generation file beside the session's artifact, kept as it is")

// besideEntry is store/'s entry of a generation file beside a session's artifact: the session's id and
// owner (the harness writes every generation of a session alike), its own path.
func besideEntry(e eventstore.Entry, path string) eventstore.Entry {
	return eventstore.Entry{ID: e.ID, ProjectDir: e.ProjectDir, Path: path, Owner: e.Owner, Refusal: errBeside}
}

// Frozen is the frozen prefix of a listed artifact, remembered per path so that a grown artifact is read
// from where the last answer ended. A refused session's artifact is mirrored whole, as it is.
func (f *FS) Frozen(ctx context.Context, e eventstore.Entry) (eventstore.Frozen, error) {
	if e.Refusal != nil {
		file, art, _, err := f.opts.Store.OpenArtifact(ctx, e.Path)
		if err != nil {
			return eventstore.Frozen{}, err
		}
		file.Close()
		return eventstore.Frozen{Token: art.Token, Identity: art.Identity, Size: art.Size, ModTime: art.ModTime}, nil
	}
	var prev eventstore.Frozen
	if v, ok := f.frozen.Load(e.Path); ok {
		prev = v.(eventstore.Frozen)
		// one stat tells whether anything changed (the answer is kept per revision): a rerun of rsync
		// stats every file, and most have not changed
		if f.opts.Store.Live(e.ID) == nil {
			if art, err := f.statArtifact(ctx, e.ID, e.Path); err == nil && art.Token == prev.Token {
				return prev, nil
			}
		}
	}
	fr, _, err := f.opts.Store.Frozen(ctx, e.ID, e.Path, prev)
	if err != nil {
		return eventstore.Frozen{}, err
	}
	f.frozen.Store(e.Path, fr)
	return fr, nil
}

// OpenArtifact opens a listed artifact for store/.
func (f *FS) OpenArtifact(ctx context.Context, path string) (*os.File, eventstore.Artifact, error) {
	file, art, ok, err := f.opts.Store.OpenArtifact(ctx, path)
	if !ok {
		return nil, eventstore.Artifact{}, fmt.Errorf("the %s backend keeps no artifact files", f.opts.Store.Backend().Name())
	}
	return file, art, err
}

// changes is what a refresh found: sessions whose artifact changed, and names that appeared or vanished.
type changes struct {
	changed  []string // ids
	replaced []string // ids among changed whose artifact was replaced (a new storage identity)
	added    []string // names
	removed  []string // names
	gone     []string // ids of the removed sessions (the index forgets them on disk too)
	evicted  []string // ids whose file nodes the kernel is asked to drop (trees.go)
}

func diff(prev, next *nodes.Listing) changes {
	var c changes
	if prev == nil {
		return c
	}
	for i, e := range next.Entries {
		j, ok := prev.ByID[e.ID]
		if !ok {
			c.added = append(c.added, next.Names[i])
			continue
		}
		if prev.Entries[j].Revision != e.Revision || (prev.Entries[j].Refusal == nil) != (e.Refusal == nil) {
			c.changed = append(c.changed, e.ID)
		}
		if prev.Entries[j].Identity != e.Identity {
			c.replaced = append(c.replaced, e.ID)
		}
	}
	for i, e := range prev.Entries {
		if _, ok := next.ByID[e.ID]; !ok {
			c.removed = append(c.removed, prev.Names[i])
			c.changed = append(c.changed, e.ID)
			if len(next.RootErrors) == 0 { // a listing that failed in part may just have missed it
				c.gone = append(c.gone, e.ID)
			}
		}
	}
	return c
}

// touch queues the kernel invalidation of a session whose views changed through this mount ("" = the
// store's own files).
func (f *FS) touch(id string) {
	if id != "" {
		f.queue(changes{changed: []string{id}})
	}
}

// queue hands changes to the notifier: go-fuse's notifications must not be sent from inside a FUSE
// callback, which is where writes arrive. It reports false when the notifier is too far behind to take
// them.
func (f *FS) queue(c changes) bool {
	if len(c.changed)+len(c.added)+len(c.removed)+len(c.evicted) == 0 {
		return true
	}
	for _, id := range c.changed {
		f.stats.drop(id) // now, not when the notifier gets to it
	}
	select {
	case f.notes <- c:
		return true
	default:
		// the notifier is behind: the watcher's next pass and the attribute timeout catch up
		return false
	}
}

// notifier applies queued changes until ctx ends.
func (f *FS) notifier(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-f.notes:
			f.apply(c, f.root)
		}
	}
}
