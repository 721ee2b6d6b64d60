package fs

import (
	"container/list"
	"sync"
)

// The node tree is bounded by sessions, not by the kernel. go-fuse keeps a node for every inode the kernel
// holds, and the kernel holds every dentry a walk looked up (find, grep -r, rsync) until memory pressure —
// a 2,000-session walk left 224k file nodes, about 190 MiB. So the mount remembers which sessions' files
// the kernel was last shown, and when more than maxTrees sessions have been shown since, it asks the
// kernel to drop the file entries of the least recent one (notify_inval_entry). Their inodes are then
// forgotten and go-fuse releases the nodes; the next lookup makes them again, served from the caches.
//
// A session holding no more than a few file nodes (keptFiles: the views a grep or an ls -l looked at) is
// left alone: keeping them costs less than a notification per file. Only files are dropped, never
// directories: a shell whose working directory is inside a session keeps
// it (dropping a directory's entry would unhash a working directory), and an open file keeps working
// (its descriptor holds the inode, not the name).

// maxTrees is how many sessions keep their file nodes: enough for any interactive use and for a walk's
// working set, small enough that the nodes of maxTrees ordinary sessions stay a few MiB.
const maxTrees = 128

// trees is the LRU of sessions whose files the kernel was shown.
type trees struct {
	mu    sync.Mutex
	lru   *list.List // of session ids, most recent at the front
	index map[string]*list.Element
	max   int
}

func newTrees(max int) *trees {
	return &trees{lru: list.New(), index: map[string]*list.Element{}, max: max}
}

// touch records that a session's files were shown, and returns the sessions that fall out of the bound.
func (t *trees) touch(id string) (evicted []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if el, ok := t.index[id]; ok {
		t.lru.MoveToFront(el)
		return nil
	}
	t.index[id] = t.lru.PushFront(id)
	for t.lru.Len() > t.max {
		el := t.lru.Back()
		old := el.Value.(string)
		t.lru.Remove(el)
		delete(t.index, old)
		evicted = append(evicted, old)
	}
	return evicted
}
