package fs

import (
	"container/list"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// The node tree is bounded by sessions, not by the kernel. go-fuse keeps a node for every inode the kernel
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
		c.at, c.dirs = time.Now(), nil
		procs, _ := os.ReadDir("/proc")
		for _, p := range procs {
			if p.Name()[0] < '0' || p.Name()[0] > '9' {
				continue
			}
			if cwd, err := os.Readlink("/proc/" + p.Name() + "/cwd"); err == nil && strings.HasPrefix(cwd, w.sessions) {
				c.dirs = append(c.dirs, cwd)
			}
		}
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
