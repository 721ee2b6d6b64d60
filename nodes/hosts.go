package nodes

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dshfs/dshfs/spill"
)

// by-host/ shows where each session of a store fed by many hosts (a fleet store) came from: a directory per
// source host, a link into sessions/ per session, as by-project/ does per project. A host's directory is
// listed, and looked into, only by who may read one of its sessions (Source.PermitSession): a fleet store
// keeps no directory whose mode could say so.

// hostsDir is by-host/: a directory per source host.
type hostsDir struct {
	dirNode
	listingIndex
}

func (d *hostsDir) list(ctx context.Context) ([]child, error) {
	var kids []child
	for h := range d.src.Listing().Hosts {
		inode := ino("/by-host", h)
		kids = append(kids, dirChild(spill.NameSegment(h), inode,
			&hostDir{dirNode: dirNode{src: d.src, ino: inode, what: "by-host/" + h}, host: h}))
	}
	return kids, nil
}

// permitAny is 0 when the caller may read one of the listing's sessions at idx (all of them, when idx is
// nil), EACCES otherwise.
func permitAny(ctx context.Context, src Source, idx []int) syscall.Errno {
	l := src.Listing()
	if idx == nil {
		for _, ids := range l.Hosts {
			if permitAny(ctx, src, ids) == 0 {
				return 0
			}
		}
		return syscall.EACCES
	}
	for _, i := range idx {
		if src.PermitSession(ctx, l.Entries[i].ID) == 0 {
			return 0
		}
	}
	return syscall.EACCES
}

func (d *hostsDir) Opendir(ctx context.Context) syscall.Errno { return permitAny(ctx, d.src, nil) }

func (d *hostsDir) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	return d.attr(storeTime(d.src), out)
}

func (d *hostsDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return d.readdir(ctx, d)
}

func (d *hostsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = oneRequest(ctx)
	if errno := permitAny(ctx, d.src, nil); errno != 0 {
		return nil, errno
	}
	c, ok, err := d.find(ctx, listingKey(d.src), d, name)
	return d.attach(ctx, name, c, ok, err, out)
}

// hostDir is by-host/<host>/: a link into sessions/ per session the host synced or wrote.
type hostDir struct {
	dirNode
	host string
	listingIndex
}

func (d *hostDir) list(ctx context.Context) ([]child, error) {
	l := d.src.Listing()
	var kids []child
	for _, i := range l.Hosts[d.host] {
		name := l.Names[i]
		kids = append(kids, linkChild(d.src, name, ino("/by-host", d.host, l.Entries[i].ID), "../../sessions/"+name, l.Entries[i].ModTime))
	}
	return kids, nil
}

func (d *hostDir) Opendir(ctx context.Context) syscall.Errno {
	return permitAny(ctx, d.src, d.src.Listing().Hosts[d.host])
}

func (d *hostDir) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	return d.attr(storeTime(d.src), out)
}

func (d *hostDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return d.readdir(ctx, d)
}

func (d *hostDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = oneRequest(ctx)
	l := d.src.Listing()
	i, ok := l.ByName[name]
	if !ok || l.Entries[i].Host != d.host {
		return nil, syscall.ENOENT
	}
	if errno := d.src.PermitSession(ctx, l.Entries[i].ID); errno != 0 {
		return nil, errno
	}
	c, ok, err := d.find(ctx, listingKey(d.src), d, name)
	return d.attach(ctx, name, c, ok, err, out)
}
