package nodes

import (
	"context"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dshfs/dshfs/spill"
)

// A grouping lays the sessions out as a directory per group holding a link into sessions/ per session:
// by-project/ (the project directory a session is stored in, JSONL stores) and by-host/ (the host a fleet
// store's session came from).
type grouping struct {
	top    string                            // the top directory's name
	groups func(l *Listing) map[string][]int // group key → the sessions' indexes
	name   func(key string) string           // the group's directory name
	// permit is 0 when the caller may list the group key's directory ("" for the top directory), whose
	// sessions are members (nil for the top directory).
	permit func(ctx context.Context, src Source, key string, members []int) syscall.Errno
	// gated, when set, is the group key of the session at an index: a lookup is then judged as a listing
	// is, and a link by its own session's permission (a fleet store keeps no directory whose mode could
	// say who may look)
	gated func(l *Listing, i int) string
}

// byProject is by-project/: what the store's project directories show, to who may read them.
var byProject = &grouping{
	top:    "by-project",
	groups: func(l *Listing) map[string][]int { return l.Projects },
	name:   projectName,
	permit: func(ctx context.Context, src Source, key string, _ []int) syscall.Errno {
		return src.Permit(ctx, src.StorePath(key), nil, wantRead|wantSearch)
	},
}

// byHost is by-host/: listed, and looked into, only by who may read one of the sessions in it
// (Source.PermitSession).
var byHost = &grouping{
	top:    "by-host",
	groups: func(l *Listing) map[string][]int { return l.Hosts },
	name:   spill.NameSegment,
	permit: func(ctx context.Context, src Source, key string, members []int) syscall.Errno {
		if key == "" {
			for _, ids := range src.Listing().Hosts {
				if permitAny(ctx, src, ids) == 0 {
					return 0
				}
			}
			return syscall.EACCES
		}
		return permitAny(ctx, src, members)
	},
	gated: func(l *Listing, i int) string { return l.Entries[i].Host },
}

// projectName is a project directory's name in by-project/: its name on disk (already the harness's
// encoding of the project key, so that by-project/, store/ and the store agree), re-encoded only if it
// could not be a name at all.
func projectName(p string) string {
	if p == "." || p == ".." || strings.ContainsAny(p, "/\x00") {
		return spill.NameSegment(p)
	}
	return p
}

// permitAny is 0 when the caller may read one of the listing's sessions at idx, EACCES otherwise.
func permitAny(ctx context.Context, src Source, idx []int) syscall.Errno {
	l := src.Listing()
	for _, i := range idx {
		if src.PermitSession(ctx, l.Entries[i].ID) == 0 {
			return 0
		}
	}
	return syscall.EACCES
}

// groupsDir is a grouping's top directory: a directory per group.
type groupsDir struct {
	dirNode
	g *grouping
	listingIndex
}

func newGroupsDir(src Source, g *grouping) *groupsDir {
	inode := ino("/" + g.top)
	return &groupsDir{dirNode: dirNode{src: src, ino: inode, what: g.top}, g: g}
}

func (d *groupsDir) list(ctx context.Context) ([]child, error) {
	var kids []child
	for key := range d.g.groups(d.src.Listing()) {
		if key == "" {
			continue
		}
		inode := ino("/"+d.g.top, key)
		kids = append(kids, dirChild(d.g.name(key), inode,
			&groupDir{dirNode: dirNode{src: d.src, ino: inode, what: d.g.top + "/" + key}, g: d.g, key: key}))
	}
	return kids, nil
}

func (d *groupsDir) Opendir(ctx context.Context) syscall.Errno {
	return d.g.permit(ctx, d.src, "", nil)
}

func (d *groupsDir) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	return d.attr(storeTime(d.src), out)
}

func (d *groupsDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return d.readdir(ctx, d)
}

func (d *groupsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = oneRequest(ctx)
	if d.g.gated != nil {
		if errno := d.g.permit(ctx, d.src, "", nil); errno != 0 {
			return nil, errno
		}
	}
	c, ok, err := d.find(ctx, listingKey(d.src), d, name)
	return d.attach(ctx, name, c, ok, err, out)
}

// groupDir is one group's directory: a link into sessions/ per session of the group.
type groupDir struct {
	dirNode
	g   *grouping
	key string
	listingIndex
}

func (d *groupDir) members() []int { return d.g.groups(d.src.Listing())[d.key] }

func (d *groupDir) list(ctx context.Context) ([]child, error) {
	l := d.src.Listing()
	var kids []child
	for _, i := range d.members() {
		name := l.Names[i]
		kids = append(kids, linkChild(d.src, name, ino("/"+d.g.top, d.key, l.Entries[i].ID), "../../sessions/"+name, l.Entries[i].ModTime))
	}
	return kids, nil
}

func (d *groupDir) Opendir(ctx context.Context) syscall.Errno {
	return d.g.permit(ctx, d.src, d.key, d.members())
}

func (d *groupDir) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	return d.attr(storeTime(d.src), out)
}

func (d *groupDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return d.readdir(ctx, d)
}

func (d *groupDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = oneRequest(ctx)
	if d.g.gated != nil {
		l := d.src.Listing()
		i, ok := l.ByName[name]
		if !ok || d.g.gated(l, i) != d.key {
			return nil, syscall.ENOENT
		}
		if errno := d.src.PermitSession(ctx, l.Entries[i].ID); errno != 0 {
			return nil, errno
		}
	}
	c, ok, err := d.find(ctx, listingKey(d.src), d, name)
	return d.attach(ctx, name, c, ok, err, out)
}
