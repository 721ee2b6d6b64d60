package mount

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/nodes"
	"github.com/dshfs/dshfs/spill"
)

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
