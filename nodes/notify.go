package nodes

import (
	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/dshfs/dshfs/views"
)

// NotifyGrown tells the kernel what an append to a live session this process writes may have changed
// below the session's directory dir, and nothing more. A view that only grows by appends
// (views.GrowsByAppend: events.jsonl, a turn's file) is invalidated from the size the kernel was last told
// on — its attributes, and its pages from the one holding the old end; a per-event file never changes and
// is left alone; a file served with direct I/O (status.json) has only its attributes dropped; every other
// file — a view a compaction may rewrite — and every directory is invalidated whole, as any change is.
//
// The kernel itself still drops a file's cached pages when a GETATTR shows it a new size (the mount does not
// ask for FUSE_EXPLICIT_INVAL_DATA, under which every size change would have to be notified before a page
// could go stale), so a growing file's prefix is read again by whoever reads it whole — from the growing
// rendering, never rendered again (viewcache/grow.go); `tail -f` reads only past its offset.
func NotifyGrown(dir *fs.Inode) {
	for _, kid := range dir.Children() {
		if kid.IsDir() {
			NotifyGrown(kid)
			continue
		}
		f, ok := kid.Operations().(*file)
		if !ok {
			kid.NotifyContent(0, 0)
			continue
		}
		v, isView := viewOf(f.body)
		switch {
		case isView && v.Kind == views.KindEvent:
		case f.volatile:
			kid.NotifyContent(-1, 0) // attributes only: its reads never use the page cache
		case isView && views.GrowsByAppend(v):
			if size := f.kernel.load(f.ino).size; size > 0 {
				kid.NotifyContent(size, 0) // from the page holding the old end on, and the attributes
			} else {
				kid.NotifyContent(0, 0)
			}
		default:
			kid.NotifyContent(0, 0)
		}
	}
	dir.NotifyContent(0, 0)
}

// viewOf is the session view c serves, if it serves one.
func viewOf(c content) (views.View, bool) {
	switch v := c.(type) {
	case sessionView:
		return v.view, true
	case knownView:
		return v.view, true
	}
	return views.View{}, false
}
