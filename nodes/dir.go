package nodes

import (
	"context"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// What every directory type shares: an entry describes a child before its node exists (a listing of a
// million events builds no node), dirReaddir and dirLookup answer from entries, and listingIndex lets a
// directory answer lookups from its last listing.

// child describes one directory entry before its node exists.
type child struct {
	name string
	mode uint32 // S_IFREG, S_IFDIR or S_IFLNK
	ino  uint64
	node maker
	// stable: the name stands for the same node until the mount tells the kernel otherwise (a session's
	// directory, its whole-view files), so the kernel may keep it for Source.StableTimeouts
	stable bool
}

// maker builds the node a child entry stands for, once a lookup needs it.
type maker interface {
	newNode() fs.InodeEmbedder
}

// lister is a directory whose entries are computed on demand (sorted by Readdir, not by the lister).
type lister interface {
	list(ctx context.Context) ([]child, error)
}

// dirNode is what every directory node reports: its inode number, the session whose owner it takes ("" above
// the sessions), its path for the log, and whether it is stable (a session's directory).
type dirNode struct {
	fs.Inode
	noXattr
	src    Source
	ino    uint64
	sess   string
	what   string
	stable bool
}

// attr fills a directory's attributes, its time mtime.
func (d *dirNode) attr(mtime time.Time, out *fuse.AttrOut) syscall.Errno {
	fillDir(&out.Attr, mtime, d.ino)
	if d.sess != "" {
		applyOwner(&out.Attr, d.src.Owner(d.sess))
	}
	out.SetTimeout(d.attrTimeout())
	return 0
}

// Opendir refuses a directory of a session to a caller who could not read the session's artifact in the
// store (Source.PermitSession); the directories that stand for a store path check that path instead.
func (d *dirNode) Opendir(ctx context.Context) syscall.Errno {
	if d.sess != "" {
		return d.src.PermitSession(ctx, d.sess)
	}
	return 0
}

// Unlink refuses: nothing of the tree is removed by removing its name (go-fuse would otherwise answer a
// node without Unlink with success, and the name would only vanish until the next lookup). Directories
// report their owner's write bit (modeDir), so this is what a user's rm meets.
func (d *dirNode) Unlink(ctx context.Context, name string) syscall.Errno { return syscall.EPERM }

// Rmdir refuses as Unlink does.
func (d *dirNode) Rmdir(ctx context.Context, name string) syscall.Errno { return syscall.EPERM }

// attrTimeout is how long the kernel may keep the directory's attributes.
func (d *dirNode) attrTimeout() time.Duration {
	_, attr := d.src.Timeouts()
	if d.stable {
		_, attr = d.src.StableTimeouts()
	}
	return attr
}

// readdir answers READDIR from l's listing, sorted by name, with the inode numbers lookups give.
func (d *dirNode) readdir(ctx context.Context, l lister) (fs.DirStream, syscall.Errno) {
	kids, err := l.list(oneRequest(ctx))
	if err != nil {
		d.src.Logf("%s: %v", d.what, err)
		return nil, failed(ctx, err)
	}
	sort.Slice(kids, func(i, j int) bool { return kids[i].name < kids[j].name })
	ents := make([]fuse.DirEntry, len(kids))
	for i, k := range kids {
		ents[i] = dirEntry(k.name, k.mode, k.ino)
	}
	return fs.NewListDirStream(ents), 0
}

// search finds name in l's full listing (for the small directories, which keep no index).
func search(ctx context.Context, l lister, name string) (child, bool, error) {
	kids, err := l.list(ctx)
	if err != nil {
		return child{}, false, err
	}
	for _, c := range kids {
		if c.name == name {
			return c, true, nil
		}
	}
	return child{}, false, nil
}

// attach answers a LOOKUP of name with c (found: ok; err: the search failed): the new node's attributes,
// its cache timeouts, and — for a session's whole view the lookup had in hand — the kernel's page cache
// primed with its bytes (primer.go).
func (d *dirNode) attach(ctx context.Context, name string, c child, ok bool, err error, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if d.sess != "" {
		// exact, whatever the kernel cached: the session's artifact as the caller may read it in the store
		if errno := d.src.PermitSession(ctx, d.sess); errno != 0 {
			return nil, errno
		}
	}
	if err != nil {
		d.src.Logf("%s/%s: %v", d.what, name, err)
		return nil, failed(ctx, err)
	}
	if !ok {
		return nil, syscall.ENOENT
	}
	node := c.node.newNode()
	var (
		a      fuse.AttrOut
		prime  priming
		primes bool
	)
	switch n := node.(type) {
	case *file:
		r, errno := n.getattr(ctx, nil, &a)
		if errno != 0 {
			return nil, errno
		}
		out.Attr = a.Attr
		prime, primes = n.priming(r, int64(a.Attr.Size))
	case fs.NodeGetattrer:
		if errno := n.Getattr(ctx, nil, &a); errno != 0 {
			return nil, errno
		}
		out.Attr = a.Attr
	}
	entryTimes(d.src, out)
	if c.stable {
		entry, _ := d.src.StableTimeouts()
		out.SetEntryTimeout(entry)
	}
	if a, ok := node.(interface{ attrTimeout() time.Duration }); ok {
		out.SetAttrTimeout(a.attrTimeout())
	}
	inum := c.ino
	if cf, ok := node.(*ctlFile); ok {
		// which inode a ctl is depends on whether a command runs on it (ctlslot.go): the kernel must ask
		// again at the next walk. 1ns, not 0: go-fuse replaces a zero timeout by the mount's default.
		inum = cf.ino
		out.SetEntryTimeout(time.Nanosecond)
	}
	inode := d.NewInode(ctx, node, fs.StableAttr{Mode: c.mode, Ino: inum})
	if f, ok := inode.Operations().(*file); ok && primes && f == node {
		// the kernel holds no pages of a new inode: hand it the bytes the walk will read next (primer.go)
		f.kernel.primer.add(prime)
	}
	return inode, 0
}

// listingIndex remembers a directory's last listing by name, for the state it was made for (a session
// snapshot, a store listing): Lookup then answers from it, so the lookup READDIRPLUS makes of every entry
// costs O(1), not a listing each.
type listingIndex struct {
	mu    sync.Mutex
	key   any
	index map[string]child
}

// find looks name up in the listing for state key, listing with l only when the state changed.
func (x *listingIndex) find(ctx context.Context, key any, l lister, name string) (child, bool, error) {
	x.mu.Lock()
	if x.index != nil && x.key == key {
		c, ok := x.index[name]
		x.mu.Unlock()
		return c, ok, nil
	}
	x.mu.Unlock()
	kids, err := l.list(ctx)
	if err != nil {
		return child{}, false, err
	}
	idx := make(map[string]child, len(kids))
	for _, c := range kids {
		idx[c.name] = c
	}
	x.mu.Lock()
	x.key, x.index = key, idx
	x.mu.Unlock()
	c, ok := idx[name]
	return c, ok, nil
}

func (x *listingIndex) dropListing() {
	x.mu.Lock()
	x.key, x.index = nil, nil
	x.mu.Unlock()
}

// DropListings makes the directories at and below n forget the listings they remember for lookups. The
// mount calls it for a session that fell out of its working set (mount/trees.go): its directory nodes may
// live on for a while (until the kernel forgets them; a working directory's for as long as it is one),
// but the entries they listed — a child per event in events/ — go, and the next lookup lists again.
func DropListings(n *fs.Inode) {
	if d, ok := n.Operations().(interface{ dropListing() }); ok {
		d.dropListing()
	}
	for _, kid := range n.Children() {
		if kid.IsDir() {
			DropListings(kid)
		}
	}
}
