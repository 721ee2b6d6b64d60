package nodes

import (
	"strconv"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
)

// NewRoot returns the root of the mounted tree; primed counts the views it hands to the kernel's page
// cache after a lookup (primer.go; stats.json "primed").
func NewRoot(src Source, readme []byte, primed *atomic.Int64) fs.InodeEmbedder {
	t := &tree{src: src, readme: readme}
	t.kernel.primes = primed
	return t.root()
}

// tree is what every node of one mount shares: the source, the README's text, and what the kernel was
// told about each file (kernelView).
type tree struct {
	src    Source
	readme []byte
	kernel kernelView
	ctls   ctlSlots
}

// fileEntry is a read-only file before its node exists.
type fileEntry struct {
	t    *tree
	ino  uint64
	sess string // the session whose owner the file takes; "" for the store's files
	gen  string // the identity of the session's artifact now (see file)
	what string
	body content
	// stable and volatile: see file
	stable, volatile bool
}

func (e fileEntry) newNode() fs.InodeEmbedder {
	return &file{src: e.t.src, ino: e.ino, sess: e.sess, gen: e.gen, what: e.what, body: e.body,
		stable: e.stable, volatile: e.volatile, kernel: &e.t.kernel}
}

// fileChild is the entry of a regular file. A session's file's inode number includes its artifact's
// identity (e.gen), so a replaced artifact's files are new inodes (see file).
func fileChild(name string, e fileEntry) child {
	e.ino = fileIno(e.ino, e.gen)
	return child{name: name, mode: syscall.S_IFREG, ino: e.ino, node: e, stable: e.stable}
}

// fileIno is the inode number of a file whose identity in the tree is inode, of the artifact gen.
func fileIno(inode uint64, gen string) uint64 {
	if gen == "" {
		return inode
	}
	return ino(strconv.FormatUint(inode, 16), gen)
}

// built is a node made when its entry was listed: the fixed directories of the tree, cheap and few.
type built struct{ n fs.InodeEmbedder }

func (b built) newNode() fs.InodeEmbedder { return b.n }

func dirChild(name string, inode uint64, n fs.InodeEmbedder) child {
	return child{name: name, mode: syscall.S_IFDIR, ino: inode, node: built{n}}
}
