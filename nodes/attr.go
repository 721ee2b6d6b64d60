package nodes

import (
	"context"
	"hash/fnv"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dshfs/dshfs/eventstore"
)

// ino derives a stable inode number from a node's identity (session id and path inside the tree), so the
// same path keeps its number across lookups, forgets and remounts, and Readdir agrees with Lookup.
func ino(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	n := h.Sum64()
	if n <= 1 || n == ^uint64(0) {
		n ^= 0x5bd1e995 // 0 means "automatic", 1 is the root, ^0 is reserved by go-fuse
	}
	return n
}

// Permissions of docs/tree.md (read-only tree). Directories report their owner's write bit although nothing
// in them can be created or removed (a read-only mount refuses with EROFS, a writable one with EPERM): a copy
// made with `rsync -a` or `cp -a` then has directories its owner can remove, not dr-x------ ones.
const (
	modeFile = syscall.S_IFREG | 0o444
	modeDir  = syscall.S_IFDIR | 0o755
	modeLink = syscall.S_IFLNK | 0o777
)

// ownerWrite is a directory's owner write bit, given when the owner may read it (see modeDir).
func ownerWrite(perm uint32) uint32 { return (perm & 0o400) >> 1 }

func setTimes(a *fuse.Attr, t time.Time) {
	sec, nsec := uint64(t.Unix()), uint32(t.Nanosecond())
	if t.Unix() < 0 {
		sec, nsec = 0, 0
	}
	a.Mtime, a.Mtimensec = sec, nsec
	a.Ctime, a.Ctimensec = sec, nsec
	a.Atime, a.Atimensec = sec, nsec
}

// fillFile sets every attribute a file needs for cat, rsync and tar to copy exact bytes: size, mtime
// from the data, Nlink, blocks.
func fillFile(a *fuse.Attr, size int64, mtime time.Time, inode uint64) {
	a.Mode = modeFile
	a.Size = uint64(size)
	a.Nlink = 1
	a.Blksize = 4096
	a.Blocks = (uint64(size) + 511) / 512
	a.Ino = inode
	setTimes(a, mtime)
}

func fillDir(a *fuse.Attr, mtime time.Time, inode uint64) {
	a.Mode = modeDir
	a.Nlink = 2
	a.Size = 4096
	a.Blksize = 4096
	a.Ino = inode
	setTimes(a, mtime)
}

func fillLink(a *fuse.Attr, target string, mtime time.Time, inode uint64) {
	a.Mode = modeLink
	a.Nlink = 1
	a.Size = uint64(len(target))
	a.Ino = inode
	setTimes(a, mtime)
}

// applyOwner gives a session's node its artifact's owner and read permission: files keep the artifact's
// read bits, directories those read bits plus the matching search bits, control files their own mode. With
// default_permissions the kernel then refuses whoever could not read the artifact itself.
func applyOwner(a *fuse.Attr, o *eventstore.Owner) {
	if o == nil {
		return
	}
	a.Uid, a.Gid = o.UID, o.GID
	read := o.Perm & 0o444
	switch a.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		a.Mode = syscall.S_IFDIR | read | read>>2 | ownerWrite(read)
	case syscall.S_IFREG:
		if a.Mode&0o222 == 0 { // a view; ctl and append keep their write modes
			a.Mode = syscall.S_IFREG | read
		}
	}
}

// applyPathOwner gives a node that stands for a path of the store or a spill root that path's owner and
// mode, without write bits but a directory's owner's (see modeDir): a directory keeps its own search bits
// (one searchable but not listable stays so), a file its read bits.
func applyPathOwner(a *fuse.Attr, o *eventstore.Owner) {
	if o == nil {
		return
	}
	a.Uid, a.Gid = o.UID, o.GID
	a.Mode = a.Mode&syscall.S_IFMT | o.Perm&0o555
	if a.Mode&syscall.S_IFMT == syscall.S_IFREG {
		a.Mode &^= 0o111
	} else {
		a.Mode |= ownerWrite(o.Perm)
	}
}

// Access wanted of a path (access(2)'s R_OK and X_OK).
const (
	wantRead   = 4
	wantSearch = 1
)

// entryTimes applies the configured kernel cache timeouts to a lookup answer.
func entryTimes(src Source, out *fuse.EntryOut) {
	entry, attr := src.Timeouts()
	out.SetEntryTimeout(entry)
	out.SetAttrTimeout(attr)
}

// dirEntry is one Readdir row, with the same inode number Lookup gives.
func dirEntry(name string, mode uint32, inode uint64) fuse.DirEntry {
	return fuse.DirEntry{Name: name, Mode: mode, Ino: inode}
}

// noXattr answers extended-attribute requests with ENOSYS, which tells the kernel once that this
// filesystem has none: it stops asking, so `ls -l` (which looks for ACLs and security labels on every
// entry) costs no extra round trip per file.
type noXattr struct{}

func (noXattr) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

func (noXattr) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}
