package nodes

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"weak"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/spill"
	"github.com/dshfs/dshfs/views"
)

// NewRoot returns the root of the mounted tree; primed counts the views it hands to the kernel's page
// cache after a lookup (primer.go; stats.json "primed").
func NewRoot(src Source, readme []byte, primed *atomic.Int64) fs.InodeEmbedder {
	t := &tree{src: src, readme: readme}
	t.kernel.primes = primed
	return t.rootDir()
}

type tree struct {
	src    Source
	readme []byte
	kernel kernelView
}

func (t *tree) storeTime(context.Context) time.Time { return t.src.Listing().ModTime }

func (t *tree) rootDir() *dir {
	d := &dir{src: t.src, ino: 1, what: "/", mtime: t.storeTime}
	d.list = func(ctx context.Context) ([]child, error) {
		kids := []child{
			t.fileChild("", "", "README", ino("/README"), "README", func(context.Context) (Rendered, error) {
				return Rendered{Data: t.readme, ModTime: t.src.Listing().ModTime}, nil
			}),
			volatile(t.fileChild("", "", "status.json", ino("/status.json"), "status.json", func(context.Context) (Rendered, error) {
				return Rendered{Data: t.src.StoreStatus(), ModTime: t.src.Listing().ModTime}, nil
			})),
			volatile(t.fileChild("", "", "stats.json", ino("/stats.json"), "stats.json", func(context.Context) (Rendered, error) {
				return Rendered{Data: t.src.StoreStats(), ModTime: t.src.Listing().ModTime}, nil
			})),
			t.dirChild("sessions", ino("/sessions"), func() fs.InodeEmbedder {
				if w := t.src.Writer(); w != nil {
					return &sessionsDir{dir: t.sessionsDir(), t: t, w: w}
				}
				return t.sessionsDir()
			}),
		}
		if t.src.Listing().Files {
			kids = append(kids, t.dirChild("by-project", ino("/by-project"), func() fs.InodeEmbedder { return t.projectsDir() }))
		}
		if t.src.Listing().Mirror != nil {
			kids = append(kids, t.dirChild("store", ino("/store", ""), func() fs.InodeEmbedder { return t.storeDir("") }))
		}
		return kids, nil
	}
	if w := t.src.Writer(); w != nil {
		d.list = appendCtl(d.list, func() child { return t.ctlChild("", ino("/ctl"), t.storeTime) })
	}
	return d
}

// appendCtl adds a control file to a directory's listing.
func appendCtl(list func(ctx context.Context) ([]child, error), ctl func() child) func(ctx context.Context) ([]child, error) {
	return func(ctx context.Context) ([]child, error) {
		kids, err := list(ctx)
		if err != nil {
			return nil, err
		}
		return append(kids, ctl()), nil
	}
}

// ctlChild is a control file: a session's (id) or the store's (id "").
func (t *tree) ctlChild(id string, inode uint64, mtime func(context.Context) time.Time) child {
	return child{name: "ctl", mode: syscall.S_IFREG, ino: inode, make: func() fs.InodeEmbedder {
		return &ctlFile{control{src: t.src, w: t.src.Writer(), id: id, ino: inode, mode: modeCtl, mtime: mtime}}
	}}
}

func (t *tree) appendChild(id string, mtime func(context.Context) time.Time) child {
	inode := ino(id, "append")
	return child{name: "append", mode: syscall.S_IFREG, ino: inode, make: func() fs.InodeEmbedder {
		return &appendFile{control{src: t.src, w: t.src.Writer(), id: id, ino: inode, mode: modeAppend, mtime: mtime}}
	}}
}

// fileChild is a regular file; sess names the session whose owner it takes ("" for the store's files) and
// gen the identity of its artifact now: the file's inode number includes it, so a replaced artifact's files
// are new inodes (see file).
func (t *tree) fileChild(sess, gen, name string, inode uint64, what string, get func(context.Context) (Rendered, error)) child {
	if gen != "" {
		inode = ino(strconv.FormatUint(inode, 16), gen)
	}
	return child{name: name, mode: syscall.S_IFREG, ino: inode, make: func() fs.InodeEmbedder {
		return &file{src: t.src, ino: inode, sess: sess, gen: gen, what: what, get: get, kernel: &t.kernel}
	}}
}

// stable marks a child whose name and attributes change only with a notification from the mount (a
// session's directory, its whole-view files): the kernel may keep them for Source.StableTimeouts. A volatile
// file's attributes still get the attribute timeout.
func stable(c child) child {
	mk := c.make
	c.stable = true
	c.make = func() fs.InodeEmbedder {
		n := mk()
		switch n := n.(type) {
		case *file:
			n.stable = true
		case *dir:
			n.stable = true
		}
		return n
	}
	return c
}

// volatile marks a file whose bytes change in place and in both directions (status.json: counts, states,
// the last command) at any moment: it is always served with direct I/O. A page-cache read trusts the size
// of the last GETATTR, and a rendering one byte shorter than that size — taken a moment later — would
// come back padded with a NUL.
func volatile(c child) child {
	mk := c.make
	c.make = func() fs.InodeEmbedder {
		n := mk().(*file)
		n.volatile = true
		return n
	}
	return c
}

// withAttr lets a session view's file answer a stat without rendering when its size is known
// (Source.Attr).
func withAttr(c child, src Source, id string, view views.View) child {
	mk := c.make
	c.make = func() fs.InodeEmbedder {
		n := mk().(*file)
		n.attr = func(ctx context.Context) (Rendered, int64, error) { return src.Attr(ctx, id, view) }
		n.kept = func(ctx context.Context) (Rendered, bool) { return src.Kept(ctx, id, view) }
		return n
	}
	return c
}

func (t *tree) dirChild(name string, inode uint64, make func() fs.InodeEmbedder) child {
	return child{name: name, mode: syscall.S_IFDIR, ino: inode, make: make}
}

func (t *tree) linkChild(name string, inode uint64, target string, mtime func() Rendered) child {
	return child{name: name, mode: syscall.S_IFLNK, ino: inode, make: func() fs.InodeEmbedder {
		return &link{src: t.src, ino: inode, target: target, mtime: mtime}
	}}
}

// listingKey keys a directory listed from the store listing alone: each refresh publishes a new one. (A
// weak pointer, so that no directory keeps an old listing alive.)
func (t *tree) listingKey(context.Context) (any, error) { return weak.Make(t.src.Listing()), nil }

// sessionsDir lists every session by its encoded name.
func (t *tree) sessionsDir() *dir {
	return &dir{src: t.src, ino: ino("/sessions"), what: "sessions", mtime: t.storeTime,
		list: func(ctx context.Context) ([]child, error) {
			l := t.src.Listing()
			kids := make([]child, 0, len(l.Entries))
			for i := range l.Entries {
				kids = append(kids, t.sessionChild(l, i))
			}
			return kids, nil
		},
		find: func(ctx context.Context, name string) (child, bool, error) {
			l := t.src.Listing()
			i, ok := l.ByName[name]
			if !ok {
				return child{}, false, nil
			}
			return t.sessionChild(l, i), true, nil
		}}
}

func (t *tree) sessionChild(l *Listing, i int) child {
	e := l.Entries[i]
	name := l.Names[i]
	return stable(t.dirChild(name, ino(e.ID), func() fs.InodeEmbedder { return t.sessionDir(e, name) }))
}

// projectsDir groups sessions by their project directory (JSONL stores), as symlinks into sessions/.
func (t *tree) projectsDir() *dir {
	return &dir{src: t.src, ino: ino("/by-project"), what: "by-project", mtime: t.storeTime, key: t.listingKey,
		list: func(ctx context.Context) ([]child, error) {
			l := t.src.Listing()
			var kids []child
			for p := range l.Projects {
				if p == "" {
					continue
				}
				project := p
				kids = append(kids, t.dirChild(spill.NameSegment(project), ino("/by-project", project), func() fs.InodeEmbedder {
					return t.projectDir(project)
				}))
			}
			return kids, nil
		}}
}

func (t *tree) projectDir(project string) *dir {
	return &dir{src: t.src, ino: ino("/by-project", project), what: "by-project/" + project, mtime: t.storeTime, key: t.listingKey,
		list: func(ctx context.Context) ([]child, error) {
			l := t.src.Listing()
			var kids []child
			for _, i := range l.Projects[project] {
				name := l.Names[i]
				e := l.Entries[i]
				kids = append(kids, t.linkChild(name, ino("/by-project", project, e.ID), "../../sessions/"+name,
					func() Rendered { return Rendered{ModTime: e.ModTime} }))
			}
			return kids, nil
		}}
}

// viewFiles are the files of a readable session that render one whole view, and their views.
var viewFiles = []struct {
	name string
	view views.View
}{
	{"header.json", views.Header},
	{"status.json", views.Status},
	{"raw.jsonl", views.Raw},
	{"events.jsonl", views.Events},
	{"surface.jsonl", views.Surface},
	{"messages.jsonl", views.Messages},
	{"shadowed.jsonl", views.Shadowed},
}

// refusedFiles are all a refused session shows, so grep -r and rsync -a still work over it.
var refusedFiles = map[string]bool{"header.json": true, "status.json": true, "raw.jsonl": true}

func (t *tree) view(id string, view views.View) func(context.Context) (Rendered, error) {
	return func(ctx context.Context) (Rendered, error) { return t.src.Render(ctx, id, view) }
}

// sessionDir is one session: its view files and per-item directories; a refused session shows only
// header.json, status.json and raw.jsonl.
func (t *tree) sessionDir(e eventstore.Entry, name string) *dir {
	id := e.ID
	base := "/sessions/" + id
	// The directory's attributes come from the listing alone (the artifact's mtime), so `ls -l sessions/`
	// over a large store never decodes a session.
	mtime := func(ctx context.Context) time.Time {
		if l := t.src.Listing(); l != nil {
			if i, ok := l.ByID[id]; ok {
				return l.Entries[i].ModTime
			}
		}
		return e.ModTime
	}
	return &dir{src: t.src, ino: ino(id), sess: id, what: "sessions/" + name, mtime: mtime,
		list: func(ctx context.Context) ([]child, error) {
			refusal, err := t.src.Refusal(ctx, id)
			if err != nil {
				return nil, err
			}
			gen := t.src.Identity(ctx, id)
			var kids []child
			files := t.src.Listing().Files
			for _, f := range viewFiles {
				if (refusal != nil && !refusedFiles[f.name]) || (f.view == views.Raw && !files) {
					continue
				}
				if refusal != nil && f.view != views.Status {
					// a refused session lists header.json and raw.jsonl only when they can be served (a
					// header that is not JSON, an artifact that cannot be read), so that grep -r and rsync
					// -a walk it without an error
					if _, err := t.src.Render(ctx, id, f.view); err != nil {
						continue
					}
				}
				c := stable(t.fileChild(id, gen, f.name, ino(id, f.name), base+"/"+f.name, t.view(id, f.view)))
				if f.view == views.Status {
					c = volatile(c)
				} else {
					c = withAttr(c, t.src, id, f.view)
				}
				kids = append(kids, c)
			}
			if refusal != nil {
				return kids, nil
			}
			sub := func(n string, mk func() *dir) {
				kids = append(kids, t.dirChild(n, ino(id, n), func() fs.InodeEmbedder { return mk() }))
			}
			sub("events", func() *dir { return t.eventsDir(id, name) })
			sub("surface", func() *dir { return t.surfaceDir(id, name) })
			sub("shadowed", func() *dir { return t.shadowedDir(id, name) })
			sub("trace", func() *dir { return t.traceDir(id, name) })
			sub("turns", func() *dir { return t.turnsDir(id, name) })
			sub("compactions", func() *dir { return t.compactionsDir(id, name) })
			sub("forks", func() *dir { return t.forksDir(id, name) })
			sub("spill", func() *dir { return t.spillDir(id, name) })
			if t.src.Writer() != nil {
				kids = append(kids, t.ctlChild(id, ino(id, "ctl"), mtime), t.appendChild(id, mtime))
			}
			if h := e.Header; h != nil && h.ParentSession != nil && h.ParentSession.Kind == event.KindString {
				// a one-line file naming the parent, not a link: a parent link beside the parent's forks/
				// link would make diff -r, grep -R and find -L loop (DESIGN.md §4)
				body := []byte(h.ParentSession.Str + "\n")
				kids = append(kids, t.fileChild(id, gen, "parent", ino(id, "parent"), base+"/parent", func(context.Context) (Rendered, error) {
					return Rendered{Data: body, ModTime: e.ModTime}, nil
				}))
			}
			return kids, nil
		},
		find: func(ctx context.Context, n string) (child, bool, error) {
			refusal, err := t.src.Refusal(ctx, id)
			if err != nil {
				return child{}, false, err
			}
			if refusal != nil && !refusedFiles[n] {
				for _, f := range viewFiles {
					if f.name == n {
						return child{}, false, fmt.Errorf("refused: %v", refusal)
					}
				}
				switch n {
				case "events", "surface", "shadowed", "trace", "turns", "compactions", "forks", "spill", "parent", "ctl", "append":
					return child{}, false, fmt.Errorf("refused: %v", refusal)
				}
				return child{}, false, nil
			}
			return child{}, false, errFallback
		},
	}
}

// errFallback makes a dir fall back to searching its full listing.
var errFallback = fmt.Errorf("fallback to listing")

// eventName is `<seq10>.<type>.json`.
func eventName(seq int64, typ string) string {
	return fmt.Sprintf("%010d.%s.json", seq, spill.NameSegment(typ))
}

// parseSeqName reads the leading 10-digit number of a per-item file name.
func parseSeqName(name string) (int64, bool) {
	if len(name) < 11 {
		return 0, false
	}
	n, err := strconv.ParseInt(name[:10], 10, 64)
	return n, err == nil && n >= 0
}

func (t *tree) sessionTime(id string) func(context.Context) time.Time {
	return func(ctx context.Context) time.Time {
		r, err := t.src.Render(ctx, id, views.Status)
		if err != nil {
			return time.Unix(0, 0)
		}
		return r.ModTime
	}
}

// item is the per-session context of the directories below a session: which session, its directory name.
type item struct {
	t         *tree
	id, sname string
	dir       string
	gen       string // the artifact identity the listing was made at
}

// itemDir is a directory below a readable session whose entries come from the session's current snapshot;
// find, when given, answers a lookup without listing (events/ can hold a million entries).
func (t *tree) itemDir(id, sname, name string, list func(it item, s *views.Session) ([]child, error),
	find func(it item, s *views.Session, name string) (child, bool)) *dir {
	it := item{t: t, id: id, sname: sname, dir: name}
	d := &dir{src: t.src, ino: ino(id, name), sess: id, what: "sessions/" + sname + "/" + name, mtime: t.sessionTime(id),
		list: func(ctx context.Context) ([]child, error) {
			s, err := t.loaded(ctx, id)
			if err != nil {
				return nil, err
			}
			it := it
			it.gen = s.Identity // the snapshot's own artifact: no second stat
			return list(it, s)
		},
		// one snapshot, one listing: the loaded session is the same value until the session changes. The
		// key is a weak pointer: a directory node outlives the session's stay in the caches (directories
		// are never dropped, trees.go), and must not keep a decoded session alive after a walk passed it.
		key: func(ctx context.Context) (any, error) {
			s, err := t.loaded(ctx, id)
			if err != nil {
				return nil, err
			}
			return weak.Make(s), nil
		}}
	if find != nil {
		d.find = func(ctx context.Context, n string) (child, bool, error) {
			s, err := t.loaded(ctx, id)
			if err != nil {
				return child{}, false, err
			}
			it := it
			it.gen = s.Identity // the snapshot's own artifact: no second stat
			c, ok := find(it, s, n)
			return c, ok, nil
		}
	}
	return d
}

// file is one file of this directory; key identifies it for its inode number.
func (it item) file(name, key string, get func(context.Context) (Rendered, error)) child {
	return it.t.fileChild(it.id, it.gen, name, ino(it.id, it.dir, key), "sessions/"+it.sname+"/"+it.dir+"/"+name, get)
}

// event is a file holding one event line (events/, surface/, shadowed/ all serve event:SEQ).
func (it item) event(name string, seq int64) child {
	return it.file(name, name, it.t.view(it.id, views.Event(seq)))
}

// loaded is a readable session's snapshot; a refused one is an error for the directories below it.
func (t *tree) loaded(ctx context.Context, id string) (*views.Session, error) {
	s, err := t.src.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	if s.Refusal != nil {
		return nil, s.Refusal
	}
	return s, nil
}

func (t *tree) eventsDir(id, sname string) *dir {
	return t.itemDir(id, sname, "events",
		func(it item, s *views.Session) ([]child, error) {
			kids := make([]child, len(s.Events))
			for i, e := range s.Events {
				kids[i] = it.event(eventName(int64(i), e.Type), int64(i))
			}
			return kids, nil
		},
		func(it item, s *views.Session, name string) (child, bool) {
			seq, ok := parseSeqName(name)
			if !ok || seq >= int64(len(s.Events)) || eventName(seq, s.Events[seq].Type) != name {
				return child{}, false
			}
			return it.event(name, seq), true
		})
}

func (t *tree) surfaceDir(id, sname string) *dir {
	return t.itemDir(id, sname, "surface", func(it item, s *views.Session) ([]child, error) {
		fold, err := s.Fold()
		if err != nil {
			return nil, err
		}
		kids := make([]child, len(fold.Nodes))
		for pos, seq := range fold.Nodes {
			kids[pos] = it.event(fmt.Sprintf("%010d-%s", pos, eventName(seq, s.Events[seq].Type)), seq)
		}
		return kids, nil
	}, nil)
}

func (t *tree) shadowedDir(id, sname string) *dir {
	return t.itemDir(id, sname, "shadowed", func(it item, s *views.Session) ([]child, error) {
		evs, err := s.Shadowed()
		if err != nil {
			return nil, err
		}
		kids := make([]child, len(evs))
		for i, e := range evs {
			kids[i] = it.event(eventName(e.Seq, e.Type), e.Seq)
		}
		return kids, nil
	}, nil)
}

// traceDir lists the seqs that take part in a replacement; Lookup accepts the trace of any seq.
func (t *tree) traceDir(id, sname string) *dir {
	trace := func(it item, seq int64) child {
		return it.file(fmt.Sprintf("%010d.json", seq), strconv.FormatInt(seq, 10),
			t.view(id, views.Trace(seq)))
	}
	return t.itemDir(id, sname, "trace",
		func(it item, s *views.Session) ([]child, error) {
			tr, err := s.Tracer()
			if err != nil {
				return nil, err
			}
			var kids []child
			for _, seq := range tr.Seqs() {
				kids = append(kids, trace(it, seq))
			}
			return kids, nil
		},
		func(it item, s *views.Session, name string) (child, bool) {
			seq, ok := parseSeqName(name)
			if !ok || name != fmt.Sprintf("%010d.json", seq) || seq >= int64(len(s.Events)) {
				return child{}, false
			}
			return trace(it, seq), true
		})
}

func (t *tree) turnsDir(id, sname string) *dir {
	return t.itemDir(id, sname, "turns", func(it item, s *views.Session) ([]child, error) {
		seen := map[int64]bool{}
		var kids []child
		for _, turn := range eventstore.Turns(s.Events) {
			if turn.N < 0 || seen[turn.N] {
				continue // a turn file holds the first turn of that number, as turn:N does
			}
			seen[turn.N] = true
			name := fmt.Sprintf("%010d.jsonl", turn.N)
			kids = append(kids, it.file(name, name, t.view(id, views.Turn(turn.N))))
		}
		return kids, nil
	}, nil)
}

func (t *tree) compactionsDir(id, sname string) *dir {
	return t.itemDir(id, sname, "compactions", func(it item, s *views.Session) ([]child, error) {
		recs, _, err := s.Compactions()
		if err != nil {
			return nil, err
		}
		kids := []child{it.file("prunes.jsonl", "prunes.jsonl", t.view(id, views.Prunes))}
		for i := range recs {
			cid := recs[i].CompactionID
			name := spill.NameSegment(cid) + ".json"
			kids = append(kids, it.file(name, name, func(ctx context.Context) (Rendered, error) { return t.compaction(ctx, id, cid) }))
		}
		return kids, nil
	}, nil)
}

// compaction renders one record of the current snapshot.
func (t *tree) compaction(ctx context.Context, id, cid string) (Rendered, error) {
	r, err := t.src.Render(ctx, id, views.Compactions)
	if err != nil {
		return Rendered{}, err
	}
	s, err := t.loaded(ctx, id)
	if err != nil {
		return Rendered{}, err
	}
	recs, _, err := s.Compactions()
	if err != nil {
		return Rendered{}, err
	}
	for _, rec := range recs {
		if rec.CompactionID == cid {
			return Rendered{Data: append(rec.JSON(), '\n'), ModTime: r.ModTime, Revision: r.Revision}, nil
		}
	}
	return Rendered{}, fmt.Errorf("compaction %q is gone", cid)
}

// forksDir links the sessions whose header names this one as parent (from the listing alone).
func (t *tree) forksDir(id, sname string) *dir {
	return &dir{src: t.src, ino: ino(id, "forks"), sess: id, what: "sessions/" + sname + "/forks", mtime: t.sessionTime(id), key: t.listingKey,
		list: func(ctx context.Context) ([]child, error) {
			l := t.src.Listing()
			var kids []child
			for _, i := range l.Children[id] {
				name := l.Names[i]
				e := l.Entries[i]
				kids = append(kids, t.linkChild(name, ino(id, "forks", e.ID), "../../"+name,
					func() Rendered { return Rendered{ModTime: e.ModTime} }))
			}
			return kids, nil
		}}
}

// spillDir serves spill/index.json and, for each present row, the spilled file's content — re-checked
// against the spill roots at every lookup and open, since the files live outside the store.
func (t *tree) spillDir(id, sname string) *dir {
	return t.itemDir(id, sname, "spill", func(it item, s *views.Session) ([]child, error) {
		rows, err := s.SpillRows()
		if err != nil {
			return nil, err
		}
		kids := []child{it.file("index.json", "index.json", func(ctx context.Context) (Rendered, error) { return t.spillIndex(ctx, id) })}
		for _, r := range rows {
			if r.Status != spill.Present || r.File == "" {
				continue
			}
			name := strings.TrimPrefix(r.File, "spill/")
			path := r.Locator
			inode := ino(id, "spill", name)
			what := "sessions/" + sname + "/spill/" + name
			kids = append(kids, child{name: name, mode: syscall.S_IFREG, ino: inode, make: func() fs.InodeEmbedder {
				return &spillFile{src: t.src, ino: inode, path: path, what: what}
			}})
		}
		return kids, nil
	}, nil)
}

// spillIndex is never cached: presence is a property of files outside the store.
func (t *tree) spillIndex(ctx context.Context, id string) (Rendered, error) {
	s, err := t.loaded(ctx, id)
	if err != nil {
		return Rendered{}, err
	}
	b, err := s.Render(ctx, views.Spill)
	if err != nil {
		return Rendered{}, err
	}
	st, _ := t.src.Render(ctx, id, views.Status)
	return Rendered{Data: b, ModTime: st.ModTime}, nil
}
