// Package fs runs the dshfs mount: it serves the node tree of package nodes over go-fuse, keeps decoded
// sessions and rendered views in byte-bounded LRU caches, watches the store for changes made by other
// processes (the harness, or another writer) and invalidates the kernel's caches for what changed, and
// handles the mount's life cycle (signals, unmount while busy, lazy detach). Its write side (write.go) turns
// append, ctl and mkdir into calls on the Store's session engines and records every outcome for status.json;
// the engines, not this package, decide what a session is and what reaches the disk.
package fs

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/dshfs/dshfs/config"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/nodes"
	"github.com/dshfs/dshfs/spill"
	"github.com/dshfs/dshfs/views"
)

// Options configure a mount.
type Options struct {
	Store  *eventstore.Store
	Root   string // the store root, for status.json
	Config config.Config
	Spill  *spill.Roots
	Log    *slog.Logger
}

// FS is the mounted store: the nodes.Source behind the tree.
type FS struct {
	opts    Options
	log     *slog.Logger
	cache   *cache
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
	// index is the persistent per-revision index (index.go); decodes counts session loads, which the
	// index exists to avoid (status.json "index").
	index   *index
	decodes atomic.Int64
	// ahead renders the next sessions of a walk in the background (readahead.go).
	ahead *readahead
	// renders are the indexed renderings under way, so that a request and a readahead worker asking for
	// the same view at once render it once (renderAt)
	renders flights
	root    *gofs.Inode // set by Mount
	// evicted counts the sessions whose nodes the kernel was asked to drop (trees.go)
	evicted atomic.Int64
	// primed counts the views handed to the kernel's page cache after a lookup (nodes/primer.go)
	primed atomic.Int64
	// mountpoint is where Mount mounted the tree (for the working directories below it, trees.go)
	mountpoint string
	cwds       cwdScan
	// watcher is the inotify watcher of a store of session directories (nil without one), and stats the
	// artifact stats it vouches for (stats.go).
	watcher atomic.Pointer[inotifyWatcher]
	stats   *statCache
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
	f := &FS{opts: opts, log: log, cache: newCache(opts.Config.Cache.SessionsBytes, opts.Config.Cache.ViewsBytes),
		notes: make(chan changes, 1024), trees: newTrees(maxTrees), index: newIndex(indexDir(opts), indexSalt(opts)),
		ahead: newReadahead(), stats: newStatCache()}
	if _, err := f.refresh(context.Background()); err != nil {
		return nil, err
	}
	return f, nil
}

// Owner is a listed session's artifact owner and permission bits.
func (f *FS) Owner(id string) *eventstore.Owner {
	l := f.Listing()
	if i, ok := l.ByID[id]; ok {
		return l.Entries[i].Owner
	}
	return nil
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
// for a minute while inotify watches every directory of a store on a local filesystem: every change
// reaches the watcher at once, and the mount tells the kernel then (apply: a removed, renamed or replaced
// session's names go, a changed one's attributes and pages; trees.go: an evicted one's names). A repeated
// walk (grep -l of every events.jsonl) then costs no lookup and no attribute request per file. Without
// inotify, or on a network filesystem, changes are found by polling, and the configured timeouts apply; a
// configured timeout of 0 (no caching) is kept as it is.
func (f *FS) StableTimeouts() (time.Duration, time.Duration) {
	entry, attr := f.Timeouts()
	if w := f.watcher.Load(); w == nil || !w.complete() {
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

// StoreStatus renders the store's status.json from the latest listing and the write side's state now.
func (f *FS) StoreStatus() []byte {
	l := f.Listing()
	st := eventstore.StoreState{LastError: f.storeErr.Load(), LastQuiesce: f.opts.Store.LastQuiesce()}
	if sv, ok := f.opts.Store.Backend().(interface{ SchemaVersion() int }); ok {
		st.SchemaVersion = sv.SchemaVersion()
	}
	if until, ok := f.opts.Store.Quiesced(); ok {
		st.QuiescedUntil = &until
	}
	for _, id := range f.opts.Store.LiveIDs() {
		if w := f.opts.Store.Live(id); w != nil {
			st.Live++
			st.Pending += w.Pending()
		}
	}
	listing := eventstore.Listing{Entries: l.Entries, RootErrors: l.RootErrors}
	return append(event.Stringify(eventstore.StoreStatus(f.opts.Store.Backend().Name(), f.opts.Root, listing, st)), '\n')
}

// StoreStats renders the root stats.json: the mount's cache counters. They move with every read, so they
// live apart from status.json, which changes only with the store (a copy of the mount diffs clean there).
// decodes counts the sessions decoded (loaded and validated); indexHits the stats and verdicts answered
// from the persistent index instead; readahead the views rendered ahead of a walk; evicted the sessions
// whose nodes the kernel was asked to drop (out of the working set); primed the views handed to the
// kernel's page cache after a lookup.
func (f *FS) StoreStats() []byte {
	n := func(v int64) event.Value { return event.Number(float64(v)) }
	return append(event.Stringify(event.Object(
		event.Member{Key: "decodes", Value: n(f.decodes.Load())},
		event.Member{Key: "indexHits", Value: n(f.index.hits.Load())},
		event.Member{Key: "readahead", Value: n(f.ahead.done.Load())},
		event.Member{Key: "evicted", Value: n(f.evicted.Load())},
		event.Member{Key: "primed", Value: n(f.primed.Load())},
	)), '\n')
}

// revision is the cache key of a session's current logical revision: a live engine's (artifact, durable,
// pending, results), else the artifact's state from one stat plus the results generation. "" when the
// artifact vanished or cannot be stat'ed (nothing is cached then; the load reports why).
func (f *FS) revision(ctx context.Context, id string) string {
	return f.revisionOf(ctx, id).String()
}

// revisionOf is the session's revision now: the live engine's, else the artifact's as stat'ed now.
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

// entry is the snapshot of id at revision rev, loaded when the cached one is older.
func (f *FS) entry(ctx context.Context, id, rev string) (*cached, error) {
	return f.cache.get(ctx, id, rev, func() (*views.Session, error) {
		f.decodes.Add(1)
		if w := f.opts.Store.Live(id); w != nil {
			return views.FromSnapshot(f.opts.Store, w.Snapshot(), f.viewOptions()), nil
		}
		l := f.Listing()
		if i, ok := l.ByID[id]; ok && l.Entries[i].Refusal != nil {
			// refused at the header already: nothing more to read
			e := l.Entries[i]
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
	})
}

func (f *FS) viewOptions() views.Options { return views.Options{Spill: f.opts.Spill} }

// shown records that the kernel is being shown a session's files (trees.go).
func (f *FS) shown(id string) {
	if evicted := f.trees.touch(id); len(evicted) > 0 {
		f.queue(changes{evicted: evicted})
	}
}

// Session returns the current snapshot of a session.
func (f *FS) Session(ctx context.Context, id string) (*views.Session, error) {
	f.shown(id)
	e, err := f.entry(ctx, id, f.revision(ctx, id))
	if err != nil {
		return nil, err
	}
	return e.sess, nil
}

// Refusal is why the current revision of a session is refused, nil when it is readable.
func (f *FS) Refusal(ctx context.Context, id string) (error, error) {
	f.shown(id)
	revision := f.revisionOf(ctx, id)
	rev := revision.String()
	if refusal, ok := f.cache.verdict(id, rev); ok {
		return refusal, nil
	}
	if key := indexKey(f.opts.Store, id, revision); key != "" && f.index.reads(id, key) {
		return nil, nil
	}
	e, err := f.entry(ctx, id, rev)
	if err != nil {
		return nil, err
	}
	return e.sess.Refusal, nil
}

// Render returns a view of the current snapshot; the spill index is never cached (its targets live
// outside the store).
func (f *FS) Render(ctx context.Context, id string, view views.View) (nodes.Rendered, error) {
	f.shown(id)
	f.sawView(id, view)
	return f.renderAt(ctx, id, view, f.revisionOf(ctx, id))
}

// renderAt is Render at a revision already read.
func (f *FS) renderAt(ctx context.Context, id string, view views.View, revision eventstore.Revision) (nodes.Rendered, error) {
	rev := revision.String()
	key := indexKey(f.opts.Store, id, revision)
	if view != views.Spill {
		if r, ok := f.kept(id, view, revision, key); ok {
			return r, nil
		}
	}
	if key != "" && indexed[view] {
		// one rendering of a view at a time: a second asker waits for it and takes it from the cache or
		// the index (or renders it after all, if neither kept it)
		flight := id + "\x00" + view.String() + "\x00" + key
		done, first := f.renders.join(flight)
		if !first {
			select {
			case <-done:
			case <-ctx.Done():
				return nodes.Rendered{}, ctx.Err()
			}
			if r, ok := f.kept(id, view, revision, key); ok {
				return r, nil
			}
		} else {
			defer f.renders.leave(flight)
		}
	}
	e, err := f.entry(ctx, id, rev)
	if err != nil {
		return nodes.Rendered{}, err
	}
	indexable := key != "" && e.sess.Refusal == nil && e.rev == rev
	if indexable {
		// rendered into the index's file as it is written: a large view is then served from there and
		// never held whole in memory
		r, ok, err := f.index.write(id, key, view, e.mtime, func(w io.Writer) error { return e.sess.WriteView(ctx, w, view) })
		if ok {
			if err != nil {
				return nodes.Rendered{}, err
			}
			r.Revision, r.Identity = rev, revision.Identity
			f.cache.keep(id, view, r)
			return r, nil
		}
	}
	r, err := f.cache.render(ctx, e, view, view == views.Spill)
	r.Identity = revision.Identity
	if err == nil && indexable {
		f.index.remember(id, key, view, r.Data, r.ModTime)
	}
	return r, err
}

// kept is a view's rendering at a revision as the cache or the index keeps it (key: indexKey).
func (f *FS) kept(id string, view views.View, revision eventstore.Revision, key string) (nodes.Rendered, bool) {
	rev := revision.String()
	if r, ok := f.cache.view(id, rev, view); ok {
		r.Identity = revision.Identity
		return r, true // rendered at this revision before: no need for the decoded session
	}
	if r, ok := f.index.content(id, key, view); ok {
		r.Revision, r.Identity = rev, revision.Identity
		f.cache.keep(id, view, r)
		return r, true // its bytes kept on disk at this revision
	}
	return nodes.Rendered{}, false
}

// Attr is a view's size and time: from a rendering cached at the current revision, else from the persistent
// index, else by rendering it (one revision read for all three).
func (f *FS) Attr(ctx context.Context, id string, view views.View) (nodes.Rendered, int64, error) {
	f.shown(id)
	f.sawView(id, view)
	revision := f.revisionOf(ctx, id)
	rev := revision.String()
	if c, ok := f.cache.view(id, rev, view); ok {
		c.Identity = revision.Identity
		return c, c.Size(), nil
	}
	if key := indexKey(f.opts.Store, id, revision); key != "" {
		if n, mtime, sum, ok := f.index.size(id, key, view); ok {
			return nodes.Rendered{ModTime: mtime, Revision: rev, Identity: revision.Identity, Sum: sum}, n, nil
		}
	}
	r, err := f.renderAt(ctx, id, view, revision)
	return r, r.Size(), err
}

// Kept returns a view's bytes at the current revision as the cache or the index keeps them, rendering
// nothing (nodes/primer.go primes the kernel's page cache with them after a lookup answered from the index).
func (f *FS) Kept(ctx context.Context, id string, view views.View) (nodes.Rendered, bool) {
	if !indexed[view] {
		return nodes.Rendered{}, false
	}
	revision := f.revisionOf(ctx, id)
	return f.kept(id, view, revision, indexKey(f.opts.Store, id, revision))
}

// indexKey is the index's revision of a session: its artifact's token and identity, or "" when the index
// must not be used (a session this process holds live changes without a new artifact revision).
func indexKey(st *eventstore.Store, id string, r eventstore.Revision) string {
	if r.Artifact == "" || st.Live(id) != nil {
		return ""
	}
	return r.Artifact + "|" + r.Identity
}

// indexSalt names what an index entry's verdict and sizes depend on beside the artifact: the store, and
// the configuration that decides whether a session reads (the line and frame limits). A mount with other
// limits uses other entries.
func indexSalt(opts Options) string {
	return opts.Store.Backend().Name() + "\x00" + opts.Root + "\x00" + strconv.FormatInt(opts.Config.Writer.MaxLineBytes, 10) +
		"\x00" + strconv.FormatInt(opts.Config.Writer.MaxFrameBytes, 10)
}

// indexDir is where the index persists: [cache] dir, else $XDG_CACHE_HOME/dshfs; "" (memory only) when
// it cannot be created.
func indexDir(opts Options) string {
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
	return diff(prev, next), nil
}

// buildListing indexes a store listing for the tree: encoded names (DESIGN.md §4 naming rules, sorted),
// project groups and fork children.
func buildListing(l eventstore.Listing, backend, root string) *nodes.Listing {
	out := &nodes.Listing{ByName: map[string]int{}, ByID: map[string]int{}, Projects: map[string][]int{},
		Children: map[string][]int{}, RootErrors: l.RootErrors, ModTime: time.Unix(0, 0)}
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
	for _, e := range l.Entries {
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
// callback, which is where writes arrive.
func (f *FS) queue(c changes) {
	if len(c.changed)+len(c.added)+len(c.removed)+len(c.evicted) == 0 {
		return
	}
	for _, id := range c.changed {
		f.stats.drop(id) // now, not when the notifier gets to it
	}
	select {
	case f.notes <- c:
	default:
		// the notifier is behind: the watcher's next pass and the attribute timeout catch up
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

// flights are operations under way, by key: join makes the caller the first (who must leave when done) or
// gives it the channel that closes when the first leaves.
type flights struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

func (fl *flights) join(key string) (done <-chan struct{}, first bool) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if ch, ok := fl.m[key]; ok {
		return ch, false
	}
	if fl.m == nil {
		fl.m = map[string]chan struct{}{}
	}
	fl.m[key] = make(chan struct{})
	return nil, true
}

func (fl *flights) leave(key string) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	close(fl.m[key])
	delete(fl.m, key)
}
