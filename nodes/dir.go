package nodes

import (
	"context"
	"errors"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// child describes one directory entry before its node exists.
type child struct {
	name string
	mode uint32 // S_IFREG, S_IFDIR or S_IFLNK
	ino  uint64
	make func() fs.InodeEmbedder
	// stable: the name stands for the same node until the mount tells the kernel otherwise (a session's
	// directory, its whole-view files), so the kernel may keep it for Source.StableTimeouts
	stable bool
}

// dir is a directory whose entries are computed on demand: list gives them all (sorted by name), find
// one by name without listing (per-event directories can hold a million entries).
type dir struct {
	fs.Inode
	noXattr
	src   Source
	ino   uint64
	sess  string // the session whose owner the directory takes; "" above the sessions
	what  string
	mtime func(ctx context.Context) time.Time
	// stable: a session's directory (see stable)
	stable bool
	list   func(ctx context.Context) ([]child, error)
	find   func(ctx context.Context, name string) (child, bool, error)
	// key, when set (for a directory without find), names the state list answers for — a session
	// snapshot, a store listing. Lookup then answers from an index of the last listing made for the same
	// state, so the lookup READDIRPLUS makes of every entry costs O(1), not a listing each.
	key func(ctx context.Context) (any, error)

	mu       sync.Mutex
	indexKey any
	index    map[string]child
}

// indexed lists the directory for the state key names, reusing the index of the last listing for it.
func (d *dir) indexed(ctx context.Context) (map[string]child, error) {
	k, err := d.key(ctx)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	if d.index != nil && d.indexKey == k {
		idx := d.index
		d.mu.Unlock()
		return idx, nil
	}
	d.mu.Unlock()
	kids, err := d.list(ctx)
	if err != nil {
		return nil, err
	}
	idx := make(map[string]child, len(kids))
	for _, c := range kids {
		idx[c.name] = c
	}
	d.mu.Lock()
	d.indexKey, d.index = k, idx
	d.mu.Unlock()
	return idx, nil
}

// DropListings makes the directories at and below n forget the listings they remember for lookups. The
// mount calls it for a session that fell out of its working set (fs/trees.go): its directory nodes may
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

func (d *dir) dropListing() {
	d.mu.Lock()
	d.indexKey, d.index = nil, nil
	d.mu.Unlock()
}

var (
	_ fs.NodeGetattrer = (*dir)(nil)
	_ fs.NodeLookuper  = (*dir)(nil)
	_ fs.NodeReaddirer = (*dir)(nil)
)

func (d *dir) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	fillDir(&out.Attr, d.mtime(ctx), d.ino)
	if d.sess != "" {
		applyOwner(&out.Attr, d.src.Owner(d.sess))
	}
	out.SetTimeout(d.attrTimeout())
	return 0
}

// attrTimeout is how long the kernel may keep the directory's attributes.
func (d *dir) attrTimeout() time.Duration {
	_, attr := d.src.Timeouts()
	if d.stable {
		_, attr = d.src.StableTimeouts()
	}
	return attr
}

func (d *dir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	ctx = oneRequest(ctx)
	kids, err := d.list(ctx)
	if err != nil {
		d.src.Logf("%s: %v", d.what, err)
		return nil, syscall.EIO
	}
	sort.Slice(kids, func(i, j int) bool { return kids[i].name < kids[j].name })
	ents := make([]fuse.DirEntry, len(kids))
	for i, k := range kids {
		ents[i] = dirEntry(k.name, k.mode, k.ino)
	}
	return fs.NewListDirStream(ents), 0
}

func (d *dir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = oneRequest(ctx)
	var (
		k   child
		ok  bool
		err error
	)
	if d.find != nil {
		k, ok, err = d.find(ctx, name)
	}
	if d.find == nil && d.key != nil {
		var idx map[string]child
		if idx, err = d.indexed(ctx); err == nil {
			k, ok = idx[name]
		}
	} else if d.find == nil || errors.Is(err, errFallback) {
		err = nil
		var kids []child
		kids, err = d.list(ctx)
		for _, c := range kids {
			if c.name == name {
				k, ok = c, true
				break
			}
		}
	}
	if err != nil {
		d.src.Logf("%s/%s: %v", d.what, name, err)
		return nil, syscall.EIO
	}
	if !ok {
		return nil, syscall.ENOENT
	}
	node := k.make()
	var (
		a      fuse.AttrOut
		prime  priming // of the kernel's page cache, after the lookup (primer.go)
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
	if k.stable {
		entry, _ := d.src.StableTimeouts()
		out.SetEntryTimeout(entry)
	}
	if a, ok := node.(interface{ attrTimeout() time.Duration }); ok {
		out.SetAttrTimeout(a.attrTimeout())
	}
	inum := k.ino
	if c, ok := node.(*ctlFile); ok {
		// which inode a ctl is depends on whether a command runs on it (ctlslot.go): the kernel must ask
		// again at the next walk. 1ns, not 0: go-fuse replaces a zero timeout by the mount's default.
		inum = c.ino
		out.SetEntryTimeout(time.Nanosecond)
	}
	inode := d.NewInode(ctx, node, fs.StableAttr{Mode: k.mode, Ino: inum})
	if f, ok := inode.Operations().(*file); ok && primes && f == node {
		// the kernel holds no pages of a new inode: hand it the bytes the walk will read next (primer.go)
		f.kernel.primer.add(prime)
	}
	return inode, 0
}
