package nodes

import (
	"context"
	"syscall"
	"time"
	"weak"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dshfs/dshfs/views"
)

// itemDir is one of a readable session's per-item directories (events/, surface/, shadowed/, trace/,
// turns/, compactions/, spill/): its entries are the items views lists for the session's current snapshot
// (views.Session.Items), mapped to inodes here.
type itemDir struct {
	dirNode
	t     *tree
	sname string // the session's directory name
	dir   views.Dir
	listingIndex
}

// itemEntry is one item's file before its node exists (events/ can hold a million).
type itemEntry struct {
	d    *itemDir
	item views.Item
	gen  string // the artifact identity of the snapshot the item was listed from
}

func (e itemEntry) newNode() fs.InodeEmbedder {
	d, it := e.d, e.item
	what := "sessions/" + d.sname + "/" + string(d.dir) + "/" + it.Name
	switch it.Source {
	case views.FromSpilled:
		// outside the store: re-checked against the spill roots at every lookup and open, never numbered
		// by the artifact
		return &spillFile{src: d.src, ino: ino(d.sess, string(d.dir), it.Name), path: it.Path, what: what}
	}
	return fileEntry{t: d.t, ino: e.ino(), sess: d.sess, gen: e.gen, what: what, body: e.content()}.newNode()
}

// ino is the item's inode number: of its session, directory and key — and for a file of the session's
// artifact, of that artifact's identity (see fileChild).
func (e itemEntry) ino() uint64 {
	if e.item.Source == views.FromSpilled {
		return ino(e.d.sess, string(e.d.dir), e.item.Name)
	}
	return fileIno(ino(e.d.sess, string(e.d.dir), e.item.Key), e.gen)
}

// content is what the item's file serves.
func (e itemEntry) content() content {
	src, id := e.d.src, e.d.sess
	switch e.item.Source {
	case views.FromCompaction:
		return compactionRecord{src: src, id: id, cid: e.item.ID}
	case views.FromSpillIndex:
		return spillIndex{src: src, id: id}
	}
	return sessionView{src: src, id: id, view: e.item.View}
}

func (e itemEntry) child() child {
	return child{name: e.item.Name, mode: syscall.S_IFREG, ino: e.ino(), node: e}
}

func (d *itemDir) list(ctx context.Context) ([]child, error) {
	s, err := loaded(ctx, d.src, d.sess)
	if err != nil {
		return nil, err
	}
	items, err := s.Items(d.dir)
	if err != nil {
		return nil, err
	}
	kids := make([]child, len(items))
	for i, it := range items {
		// the snapshot's own artifact: no second stat
		kids[i] = itemEntry{d: d, item: it, gen: s.Identity}.child()
	}
	return kids, nil
}

func (d *itemDir) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	return d.attr(sessionTime(ctx, d.src, d.sess), out)
}

func (d *itemDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return d.readdir(ctx, d)
}

// Lookup answers an addressable directory (events/, trace/) without listing it; the others from an index
// of the listing made for the same snapshot. The key is a weak pointer: one snapshot, one listing, and a
// directory node, which outlives the session's stay in the caches (directories are never dropped,
// mount/trees.go), must not keep a decoded session alive after a walk passed it.
func (d *itemDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = oneRequest(ctx)
	s, err := loaded(ctx, d.src, d.sess)
	if err != nil {
		return d.attach(ctx, name, child{}, false, err, out)
	}
	if d.dir.Addressable() {
		it, ok, err := s.Find(d.dir, name)
		return d.attach(ctx, name, itemEntry{d: d, item: it, gen: s.Identity}.child(), ok, err, out)
	}
	c, ok, err := d.find(ctx, weak.Make(s), d, name)
	return d.attach(ctx, name, c, ok, err, out)
}

// sessionTime is the time of a session's subdirectories: its status view's (the session's newest event).
func sessionTime(ctx context.Context, src Source, id string) time.Time {
	r, err := src.Render(ctx, id, views.Status)
	if err != nil {
		return time.Unix(0, 0)
	}
	return r.ModTime
}

// forksDir is sessions/<id>/forks/: a link per session whose header names this one as parent, from the
// listing alone.
type forksDir struct {
	dirNode
	listingIndex
}

func (d *forksDir) list(ctx context.Context) ([]child, error) {
	l := d.src.Listing()
	var kids []child
	for _, i := range l.Children[d.sess] {
		name := l.Names[i]
		kids = append(kids, linkChild(d.src, name, ino(d.sess, "forks", l.Entries[i].ID), "../../"+name, l.Entries[i].ModTime))
	}
	return kids, nil
}

func (d *forksDir) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	return d.attr(sessionTime(ctx, d.src, d.sess), out)
}

func (d *forksDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return d.readdir(ctx, d)
}

func (d *forksDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = oneRequest(ctx)
	c, ok, err := d.find(ctx, listingKey(d.src), d, name)
	return d.attach(ctx, name, c, ok, err, out)
}
