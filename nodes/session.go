package nodes

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/views"
)

// sessionEntry is a session's directory before its node exists (sessions/ lists thousands).
type sessionEntry struct {
	t    *tree
	e    eventstore.Entry
	name string
}

func (s sessionEntry) newNode() fs.InodeEmbedder {
	return &sessionDir{dirNode: dirNode{src: s.t.src, ino: ino(s.e.ID), sess: s.e.ID, what: "sessions/" + s.name, stable: true},
		t: s.t, e: s.e, name: s.name}
}

// sessionDir is sessions/<id>/: the session's view files, its per-item directories, parent, and on a
// writable mount ctl and append. A refused session shows only header.json, status.json and raw.jsonl.
type sessionDir struct {
	dirNode
	t    *tree
	e    eventstore.Entry // the listing's entry when the directory was made
	name string
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
	{"transcript.md", views.Transcript},
	{"transcript.html", views.TranscriptHTML},
	{"usage.jsonl", views.Usage},
	{"usage.svg", views.UsageSVG},
}

// refusedFiles are all a refused session shows, so grep -r and rsync -a still work over it.
var refusedFiles = map[string]bool{"header.json": true, "status.json": true, "raw.jsonl": true}

// mtime is the directory's time, from the listing alone (the artifact's mtime), so that `ls -l sessions/`
// over a large store never decodes a session.
func (d *sessionDir) mtime() time.Time { return sessionMtime(d.src, d.e) }

// sessionMtime is the listed time of session e now, e's own when the listing no longer has it.
func sessionMtime(src Source, e eventstore.Entry) time.Time {
	if l := src.Listing(); l != nil {
		if i, ok := l.ByID[e.ID]; ok {
			return l.Entries[i].ModTime
		}
	}
	return e.ModTime
}

func (d *sessionDir) list(ctx context.Context) ([]child, error) { return d.children(ctx, "") }

// find is search over the session's children, making only the one named: a first walk looks up one file
// in each of thousands of sessions, and making every child's node for it was most of that lookup's
// allocation.
func (d *sessionDir) find(ctx context.Context, name string) (child, bool, error) {
	if name == "" {
		return child{}, false, nil
	}
	kids, err := d.children(ctx, name)
	if err != nil || len(kids) == 0 {
		return child{}, false, err
	}
	return kids[0], true, nil
}

// children lists the session's children, or (only not "") the one of them named only, if it is one.
func (d *sessionDir) children(ctx context.Context, only string) ([]child, error) {
	skip := func(name string) bool { return only != "" && name != only }
	id := d.e.ID
	refusal, err := d.src.Refusal(ctx, id)
	if err != nil {
		return nil, err
	}
	gen := d.src.Identity(ctx, id)
	base := "/sessions/" + id
	var kids []child
	files := d.src.Listing().Files
	for _, f := range viewFiles {
		if skip(f.name) || (refusal != nil && !refusedFiles[f.name]) || (f.view == views.Raw && !files) {
			continue
		}
		if refusal != nil && f.view != views.Status {
			// a refused session lists header.json and raw.jsonl only when they can be served (a header
			// that is not JSON, an artifact that cannot be read), so that grep -r and rsync -a walk it
			// without an error
			if _, err := d.src.Render(ctx, id, f.view); err != nil {
				continue
			}
		}
		e := fileEntry{t: d.t, ino: ino(id, f.name), sess: id, gen: gen, what: base + "/" + f.name, stable: true}
		view := sessionView{src: d.src, id: id, view: f.view}
		if f.view == views.Status || f.view.Volatile() {
			// counts, states and the last command change in place (and a transcript's spill statuses with
			// files outside the store): direct I/O, and the size is never known without rendering
			e.body, e.volatile = view, true
		} else {
			e.body = knownView{view}
		}
		kids = append(kids, fileChild(f.name, e))
	}
	if refusal != nil {
		return kids, nil
	}
	for _, dir := range views.Dirs {
		if !skip(string(dir)) {
			kids = append(kids, dirChild(string(dir), ino(id, string(dir)), d.itemDir(dir)))
		}
	}
	if !skip("forks") {
		kids = append(kids, dirChild("forks", ino(id, "forks"),
			&forksDir{dirNode: dirNode{src: d.src, ino: ino(id, "forks"), sess: id, what: "sessions/" + d.name + "/forks"}}))
	}
	if d.src.Writer() != nil {
		if !skip("ctl") {
			kids = append(kids, ctlChild(d.t, id, ino(id, "ctl"), d.e.ModTime))
		}
		if !skip("append") {
			kids = append(kids, appendChild(d.t, id, d.e.ModTime))
		}
	}
	if skip("parent") {
		return kids, nil
	}
	if h := d.e.Header; h != nil && h.ParentSession != nil && h.ParentSession.Kind == event.KindString {
		// a one-line file naming the parent, not a link: a parent link beside the parent's forks/ link
		// would make diff -r, grep -R and find -L loop (docs/tree.md)
		kids = append(kids, fileChild("parent", fileEntry{t: d.t, ino: ino(id, "parent"), sess: id, gen: gen, what: base + "/parent",
			body: fixed{data: []byte(h.ParentSession.Str + "\n"), mtime: d.e.ModTime}}))
	}
	return kids, nil
}

// itemDir is the node of one of the session's per-item directories.
func (d *sessionDir) itemDir(dir views.Dir) *itemDir {
	id := d.e.ID
	return &itemDir{dirNode: dirNode{src: d.src, ino: ino(id, string(dir)), sess: id, what: "sessions/" + d.name + "/" + string(dir)},
		t: d.t, sname: d.name, dir: dir}
}

// sessionNames are the names a readable session may show besides its view files.
var sessionNames = map[string]bool{"events": true, "surface": true, "shadowed": true, "trace": true, "turns": true,
	"compactions": true, "forks": true, "spill": true, "parent": true, "ctl": true, "append": true}

func (d *sessionDir) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	return d.attr(d.mtime(), out)
}

func (d *sessionDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return d.readdir(ctx, d)
}

// Lookup of a refused session's name answers from the refusal alone: EIO for a name a readable session
// has (the user asked for something the refusal hides), ENOENT for anything else.
func (d *sessionDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = oneRequest(ctx)
	refusal, err := d.src.Refusal(ctx, d.e.ID)
	if err == nil && refusal != nil && !refusedFiles[name] {
		if isViewFile(name) || sessionNames[name] {
			err = fmt.Errorf("refused: %v", refusal)
		}
		return d.attach(ctx, name, child{}, false, err, out)
	}
	var (
		c  child
		ok bool
	)
	if err == nil {
		c, ok, err = d.find(ctx, name)
	}
	return d.attach(ctx, name, c, ok, err, out)
}

func isViewFile(name string) bool {
	for _, f := range viewFiles {
		if f.name == name {
			return true
		}
	}
	return false
}
