// Package storewatch tells, with inotify, which session of a store on this host was written and when
// anything else about the store changed. The backends that keep a store in this host's files build their
// change feed on it (eventstore.Watcher): the JSONL backend for its tree of session directories, the
// SQLite backend for its database and WAL; a mount and `dshfs sync --watch` follow the store through that
// feed, without listing it again and again.
//
// A tree store is watched as a tree: its root, every project directory and every session directory. A
// session's transcript written (IN_MODIFY, IN_CLOSE_WRITE) is reported as that session's change; anything
// else (a session or project created, deleted or renamed, an artifact replaced, chmod'ed or chown'ed) as a
// structural change, after which a listing finds what changed. Which files are transcripts is the
// backend's to say (Layout). A store kept in files of its own (a SQLite database and its WAL) is watched
// through the directories of those files, and every change to one of them is structural: the listing's
// revisions tell which sessions moved. inotify reports only what this host's kernel sees, and a watch can
// fail (out of watches), so callers keep a slower listing as a safety net.
package storewatch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dshfs/dshfs/internal/namecodec"
)

const (
	dirMask     = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR
	sessionMask = dirMask | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_ATTRIB
	filesMask   = unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_DELETE | unix.IN_ATTRIB | unix.IN_ONLYDIR
)

// Layout is what a watcher of a tree store knows of the files in a session directory.
type Layout struct {
	// Transcript tells the files a write to which is a write of the session's content (every generation's
	// transcript, in either encoding); a new one linked in beside them is structural.
	Transcript func(name string) bool
	// Quiet names a file whose events say nothing about the session's content (the harness's write lease:
	// created once, never deleted, and opened for writing around every write).
	Quiet string
}

// Watcher is an inotify instance and its watches.
type Watcher struct {
	file   *os.File
	fd     int
	layout Layout

	mu       sync.Mutex
	root     string // a JSONL store's root ("" while none is watched)
	byWD     map[int32]string
	byDir    map[string]int32
	sessions map[string]string // session directory → session id
	// files maps each watched directory of a store kept in files of its own to the names in it whose
	// change is structural (nil for a tree of sessions)
	files map[string]map[string]bool
	gap   error // the first watch that could not be added: changes there are found only by listing
}

// New starts an inotify instance for a store laid out as layout says (the zero Layout for a store of its
// own files). DSHFS_NO_INOTIFY in the environment refuses it, so that tests can take the polling path.
func New(layout Layout) (*Watcher, error) {
	if os.Getenv("DSHFS_NO_INOTIFY") != "" {
		return nil, errors.New("inotify disabled by DSHFS_NO_INOTIFY")
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	return &Watcher{file: os.NewFile(uintptr(fd), "inotify"), fd: fd, layout: layout,
		byWD: map[int32]string{}, byDir: map[string]int32{}, sessions: map[string]string{}}, nil
}

// Close ends the instance; Run then returns.
func (w *Watcher) Close() error { return w.file.Close() }

// Tree watches a tree store as its directories are now: root, every project directory in it and every
// session directory in those, each session known by the id its directory's name encodes (as a listing
// names it). It reads directories only, no file, so it is cheap enough to run before a mount answers;
// Sessions then keeps the watches in step with each listing.
func (w *Watcher) Tree(root string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.root = root
	w.addLocked(root, dirMask)
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if e.IsDir() {
			w.addNewLocked(filepath.Join(root, e.Name()))
		}
	}
}

// Sessions watches a tree store: root, the project directories in it, and the directory of every
// session artifact in paths (artifact path → session id), which replaces the sessions known so far.
// Watches stay until their directory is deleted.
func (w *Watcher) Sessions(root string, paths map[string]string) {
	want := map[string]uint32{root: dirMask}
	sessions := make(map[string]string, len(paths))
	for path, id := range paths {
		dir := filepath.Dir(path)
		want[dir] = sessionMask
		want[filepath.Dir(dir)] = dirMask
		sessions[dir] = id
	}
	// a project holding no session yet: a session made in it later is reported too
	if entries, err := os.ReadDir(root); err == nil {
		for _, e := range entries {
			if dir := filepath.Join(root, e.Name()); e.IsDir() && want[dir] == 0 {
				want[dir] = dirMask
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.root, w.sessions = root, sessions
	for dir, mask := range want {
		w.addLocked(dir, mask)
	}
}

// Files watches a store kept in files of its own (a database and its WAL) through their directories.
func (w *Watcher) Files(files []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.files = map[string]map[string]bool{}
	for _, f := range files {
		dir := filepath.Dir(f)
		if w.files[dir] == nil {
			w.files[dir] = map[string]bool{}
		}
		w.files[dir][filepath.Base(f)] = true
		w.addLocked(dir, filesMask)
	}
}

// OfFiles reports whether the watcher follows a store's own files (Files) rather than a tree of sessions.
func (w *Watcher) OfFiles() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.files != nil
}

// Complete reports whether every directory asked for is watched.
func (w *Watcher) Complete() bool { return w.Gap() == nil }

// Gap is why the watcher is incomplete — the first directory it could not watch (ENOSPC: out of watches)
// — or nil while it is complete. An incomplete watcher stays so for good.
func (w *Watcher) Gap() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gap
}

// Watching reports whether dir is watched (a change in it will be reported).
func (w *Watcher) Watching(dir string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.byDir[dir]
	return ok
}

func (w *Watcher) addLocked(dir string, mask uint32) {
	if _, ok := w.byDir[dir]; ok {
		return
	}
	wd, err := unix.InotifyAddWatch(w.fd, dir, mask)
	if err != nil {
		if w.gap == nil {
			w.gap = fmt.Errorf("inotify cannot watch %s: %w", dir, err)
		}
		return
	}
	w.byDir[dir], w.byWD[int32(wd)] = int32(wd), dir
}

// addNewLocked watches a directory just created in the root (a project, with the session directories
// already in it) or in a project (a session, whose id its name encodes), before its content is read: a
// transcript written into it a moment later is reported too.
func (w *Watcher) addNewLocked(dir string) {
	if filepath.Dir(dir) != w.root {
		if id, ok := namecodec.DecodeSegment(filepath.Base(dir)); ok {
			w.sessions[dir] = id
		}
		w.addLocked(dir, sessionMask)
		return
	}
	w.addLocked(dir, dirMask)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		if id, ok := namecodec.DecodeSegment(e.Name()); ok {
			w.sessions[sub] = id
		}
		w.addLocked(sub, sessionMask)
	}
}

// Run reads events until Close: a session's transcript written is reported through changed (its id),
// anything else that may change the listing through structural. Both are called from Run's goroutine.
func (w *Watcher) Run(changed func(id string), structural func()) {
	buf := make([]byte, 64<<10)
	for {
		n, err := w.file.Read(buf)
		if err != nil {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)], "\x00"))
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				structural() // events were lost: a listing finds what changed
				continue
			}
			w.mu.Lock()
			dir := w.byWD[ev.Wd]
			if names, ok := w.files[dir]; ok {
				w.mu.Unlock()
				// any commit by any connection writes the database or its WAL: one listing (the sessions'
				// revisions, not their events) finds which sessions changed
				if names[name] {
					structural()
				}
				continue
			}
			id, isSession := w.sessions[dir]
			if ev.Mask&unix.IN_IGNORED != 0 {
				delete(w.byDir, dir)
				delete(w.byWD, ev.Wd)
			}
			if ev.Mask&unix.IN_ISDIR != 0 && ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 && dir != "" && !isSession && w.root != "" {
				w.addNewLocked(filepath.Join(dir, name))
			}
			w.mu.Unlock()
			// a chmod or chown (IN_ATTRIB) changes who may read the session: the listing holds the owner,
			// so that is structural, not just the session's change
			written := ev.Mask&(unix.IN_MODIFY|unix.IN_CLOSE_WRITE) != 0
			if isSession && written && w.layout.Transcript != nil && w.layout.Transcript(name) {
				changed(id)
				continue
			}
			if isSession && (written || name != "" && name == w.layout.Quiet) {
				// a sidecar or a temp file beside the transcript, or the harness's write lease: none of it
				// is the session's content
				continue
			}
			structural()
		}
	}
}

// RemoteFS names the network filesystem dir is on ("" for a local one, or when it cannot tell): inotify
// reports only the changes made through this host's kernel, so what another host writes there is found
// by listing alone.
func RemoteFS(dir string) string {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return ""
	}
	return networkFS[int64(st.Type)]
}

// networkFS are the statfs magic numbers of filesystems another host can write to.
var networkFS = map[int64]string{
	0x6969: "nfs", 0x517b: "smb", 0xff534d42: "cifs", 0xfe534d42: "smb2", 0x01021997: "9p",
	0x00c36400: "ceph", 0x5346414f: "afs", 0x73757245: "coda", 0x01161970: "gfs2", 0x7461636f: "ocfs2",
	0x0bd00bd0: "lustre", 0x65735546: "fuse", 0x564c: "ncp",
}
