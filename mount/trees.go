package mount

import (
	"container/list"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/dshfs/dshfs/internal/procscan"
	"github.com/dshfs/dshfs/nodes"
)

// Dentry eviction: the node tree is bounded by sessions, not by the kernel. go-fuse keeps a node for every inode the kernel
// holds, and the kernel holds every dentry a walk looked up (find, grep -r, rsync) until memory pressure —
// a 2,000-session walk left 224k file nodes, about 190 MiB; and a directory node, once it had children,
// keeps their table's room after they go (a Go map does not shrink), so the directories of 10k sessions
// walked by grep -r held over 70 MiB. So the mount remembers which sessions' files the kernel was last
// shown, and when more than maxTrees sessions have been shown since, it asks the kernel to drop the least
// recent session's entry (notify_inval_entry on its directory, which drops everything below it). The
// kernel then forgets those inodes and go-fuse releases the nodes; the next lookup makes them again,
// served from the caches and the index. Open descriptors keep working: they hold their inodes, not names.
//
// A session whose nodes are only the view or two a grep -l or a stat looked at (keptNodes) is left alone:
// they take little room, and a dropped inode loses its page cache, so a repeated grep over every session
// would read every file through the mount again.
//
// A session directory with a process working in it (its current directory, read from /proc/PID/cwd) keeps
// its directories, and only its files are dropped: unhashing a working directory's dentry would make
// getcwd(3) fail there ("No such file or directory") until the shell cd's again.
//
// What pays for it, measured: the 224k nodes (about 190 MiB) a 2,000-session walk left, and a grep -r of the
// 10k-session store, which held 747 MiB after 300 s with directories kept and 190 MiB with this (README,
// memory); the read-path issue's bound is 256 MiB for the whole process. Its cost is one notify per session
// falling out of the bound and, at most once a second, a readlink of every process's /proc/PID/cwd.

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

// workingDirs are the current directories of this machine's processes below the mount's sessions/.
type workingDirs struct {
	sessions string   // MOUNTPOINT/sessions/
	dirs     []string // below it
}

// cwdScan is the last scan of /proc: a walk evicts a session per session it reaches, and a scan of every
// process's cwd (a readlink each) once a second is enough — a process that enters a session makes it the
// most recent one, far from eviction.
type cwdScan struct {
	sync.Mutex
	at   time.Time
	dirs []string
}

// cwdScanDeadline bounds a scan of the working directories.
const cwdScanDeadline = 500 * time.Millisecond

// workingDirs returns the working directories below the mount's sessions (scanned at most once a second).
func (f *FS) workingDirs() *workingDirs {
	w := &workingDirs{sessions: filepath.Join(f.mountpoint, "sessions") + "/"}
	if f.mountpoint == "" {
		return w
	}
	c := &f.cwds
	c.Lock()
	defer c.Unlock()
	if time.Since(c.at) > time.Second {
		// each process read apart, under a deadline: a process stuck in the kernel would block a readlink of
		// its cwd, and with it every walk of the mount
		c.at = time.Now()
		c.dirs, _ = procscan.Scan(&procs, cwdScanDeadline, func(pid int) (string, bool) {
			cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
			return cwd, err == nil && strings.HasPrefix(cwd, w.sessions)
		})
	}
	w.dirs = c.dirs
	return w
}

// inside reports whether a process works in session directory name or below it.
func (w *workingDirs) inside(name string) bool {
	for _, d := range w.dirs {
		if rest := strings.TrimPrefix(d, w.sessions); rest == name || strings.HasPrefix(rest, name+"/") {
			return true
		}
	}
	return false
}

// shown records that the kernel is being shown a session's files, and queues the eviction of those that
// fall out of the bound.
func (f *FS) shown(id string) {
	if evicted := f.trees.touch(id); len(evicted) > 0 {
		f.queue(changes{evicted: evicted})
	}
}

// evict asks the kernel to drop the nodes of sessions that fell out of the bound (trees.touch), below
// the sessions directory node; l names them. Called by the notifier, outside FUSE callbacks.
func (f *FS) evict(sessions *gofs.Inode, l *nodes.Listing, ids []string) {
	var cwds *workingDirs
	for _, id := range ids {
		i, ok := l.ByID[id]
		if !ok {
			continue
		}
		name := l.Names[i]
		dir := sessions.GetChild(name)
		if dir == nil {
			continue
		}
		nodes.DropListings(dir)
		if countNodes(dir, keptNodes) <= keptNodes {
			continue // a few views looked at (grep -l, stat): cheaper to keep, with their page cache
		}
		if cwds == nil {
			cwds = f.workingDirs()
		}
		if cwds.inside(name) {
			dropFiles(dir) // a process works in it: its directories stay
		} else {
			sessions.NotifyEntry(name)
		}
		f.evicted.Add(1)
	}
}

// keptNodes is how many nodes a session out of the bound may keep: the view or two a grep -l or a stat of
// every session looks at cost less kept than dropped, since a dropped inode loses its page cache and the
// next grep reads every file through the mount again.
const keptNodes = 4

// countNodes counts the nodes below n, stopping once past limit.
func countNodes(n *gofs.Inode, limit int) int {
	c := 0
	for _, kid := range n.Children() {
		c++
		if kid.IsDir() {
			c += countNodes(kid, limit-c)
		}
		if c > limit {
			break
		}
	}
	return c
}

// dropFiles asks the kernel to drop the entries of every file below n: directories keep theirs.
func dropFiles(n *gofs.Inode) {
	for name, kid := range n.Children() {
		if kid.IsDir() {
			dropFiles(kid)
			continue
		}
		n.NotifyEntry(name)
	}
}
