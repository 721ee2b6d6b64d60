package nodes

import (
	"context"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// link is a symlink inside the tree (forks/, by-project/), dated like the session it points to.
type link struct {
	fs.Inode
	noXattr
	src    Source
	ino    uint64
	target string
	mtime  time.Time
}

// linkEntry is a link before its node exists (a large project's by-project/ directory keeps its listing).
type linkEntry struct {
	src    Source
	ino    uint64
	target string
	mtime  time.Time
}

func (e linkEntry) newNode() fs.InodeEmbedder {
	return &link{src: e.src, ino: e.ino, target: e.target, mtime: e.mtime}
}

func linkChild(src Source, name string, inode uint64, target string, mtime time.Time) child {
	return child{name: name, mode: syscall.S_IFLNK, ino: inode, node: linkEntry{src, inode, target, mtime}}
}

func (l *link) Readlink(ctx context.Context) ([]byte, syscall.Errno) { return []byte(l.target), 0 }

func (l *link) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	fillLink(&out.Attr, l.target, l.mtime, l.ino)
	_, attr := l.src.Timeouts()
	out.SetTimeout(attr)
	return 0
}
