package fs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dshfs/dshfs/eventstore/jsonl"
)

// Change watching (issue: read path at scale). The kernel caches a file's attributes for the attribute
// timeout, so a reader polling `stat` or `tail -f` sees an append made by another process only when the
// mount tells the kernel. Polling the store every refresh_interval bounds that lag by the interval (and
// costs a listing of every session each time); inotify tells the mount at once. The watcher keeps a watch
// on the root, every project directory and every session directory:
//
//   - a session's artifact written (IN_MODIFY, IN_CLOSE_WRITE) invalidates that session at once — no
//     listing needed, since every access re-checks the artifact's revision anyway;
//   - anything else (a session or project created, deleted, renamed; an artifact replaced, chmod'ed or
//     chown'ed) starts a listing pass at once (bursts coalesced), which finds what changed and
//     invalidates it.
//
// Polling stays as a safety net at a slower pace (inotifyPoll). Where inotify is unavailable or runs out
// of watches the mount says so in its log and polls every refresh_interval as before.

// inotifyPoll is the safety-net listing interval while inotify watches the whole store: events a
// filesystem does not report (a network filesystem, a change made before the watch was added) are still
// found.
const inotifyPoll = time.Minute

const (
	dirMask     = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR
	sessionMask = dirMask | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_ATTRIB
)

// inotifyWatcher is the mount's inotify instance and its watches.
type inotifyWatcher struct {
	file *os.File
	fd   int
	root string

	mu       sync.Mutex
	byWD     map[int32]string // watch → directory
	byDir    map[string]int32
	sessions map[string]string // session directory → session id
	full     bool              // a watch could not be added: polling covers the rest
	// files, for a store kept in files of its own (a SQLite database and its WAL), maps each watched
	// directory to the names in it whose change starts a listing pass; directories are then not synced.
	files map[string]map[string]bool
}

// newInotify starts an inotify instance; nil when the system has none.
func newInotify() (*inotifyWatcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	return &inotifyWatcher{file: os.NewFile(uintptr(fd), "inotify"), fd: fd,
		byWD: map[int32]string{}, byDir: map[string]int32{}, sessions: map[string]string{}}, nil
}

// sync watches the root, every project directory and every session directory of the listing. A watch
// ends when its directory is deleted (IN_IGNORED). It reports a failure to add a watch once (ENOSPC: out
// of watches), after which the store is still polled.
func (w *inotifyWatcher) sync(root string, paths map[string]string, log func(string, ...any)) {
	want := map[string]uint32{root: dirMask}
	sessions := map[string]string{}
	for path, id := range paths {
		dir := filepath.Dir(path)
		want[dir] = sessionMask
		want[filepath.Dir(dir)] = dirMask
		sessions[dir] = id
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.root = root
	w.sessions = sessions
	for dir, mask := range want {
		w.addLocked(dir, mask, log)
	}
}

func (w *inotifyWatcher) addLocked(dir string, mask uint32, log func(string, ...any)) {
	if _, ok := w.byDir[dir]; ok {
		return
	}
	wd, err := unix.InotifyAddWatch(w.fd, dir, mask)
	if err != nil {
		if !w.full && log != nil {
			w.full = true
			log("inotify cannot watch every directory; changes there are found by polling every refresh_interval", "dir", dir, "err", err)
		}
		return
	}
	w.byDir[dir], w.byWD[int32(wd)] = int32(wd), dir
}

// complete reports whether every directory is watched.
func (w *inotifyWatcher) complete() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.full
}

// run reads events until the instance is closed: an artifact written is reported through changed (the
// session's id), anything else through structural.
func (w *inotifyWatcher) run(changed func(id string), structural func()) {
	buf := make([]byte, 64<<10)
	for {
		n, err := w.file.Read(buf)
		if err != nil {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			name = bytes.TrimRight(name, "\x00")
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				structural() // events were lost: a listing finds what changed
				continue
			}
			w.mu.Lock()
			dir := w.byWD[ev.Wd]
			if names, ok := w.files[dir]; ok {
				w.mu.Unlock()
				// any commit by any connection writes the database or its WAL: one listing pass (the
				// sessions rows' revisions, not the events) finds which sessions changed
				if names[string(name)] || ev.Mask&unix.IN_Q_OVERFLOW != 0 {
					structural()
				}
				continue
			}
			id, isSession := w.sessions[dir]
			if ev.Mask&unix.IN_IGNORED != 0 {
				delete(w.byDir, dir)
				delete(w.byWD, ev.Wd)
			}
			if ev.Mask&unix.IN_ISDIR != 0 && ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 && dir != "" && !isSession {
				// a new project or session directory: watched before its content is listed, so a
				// transcript linked into it a moment later is reported too
				mask := uint32(sessionMask)
				if dir == w.root {
					mask = dirMask
				}
				sub := filepath.Join(dir, string(name))
				w.addLocked(sub, mask, nil)
				if mask == dirMask { // a new project: its sessions may have been made before the watch
					if entries, err := os.ReadDir(sub); err == nil {
						for _, e := range entries {
							if e.IsDir() {
								w.addLocked(filepath.Join(sub, e.Name()), sessionMask, nil)
							}
						}
					}
				}
			}
			w.mu.Unlock()
			// a chmod or chown (IN_ATTRIB) changes who may read the session: the listing holds the owner,
			// so that is a listing pass, not just an invalidation
			written := ev.Mask&(unix.IN_MODIFY|unix.IN_CLOSE_WRITE) != 0
			if isSession && written && artifactName(string(name)) {
				changed(id)
				continue
			}
			if isSession && (written || string(name) == leaseName) {
				// a sidecar or a temp file beside the artifact; or the harness's write lease, which it
				// creates, opens and closes around every write: none of it is the session's content
				continue
			}
			structural()
		}
	}
}

// watching reports whether dir is watched (and so a change in it will be reported).
func (w *inotifyWatcher) watching(dir string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.byDir[dir]
	return ok
}

// artifactName tells the transcript files — every generation the harness writes, in either encoding —
// from sidecars and temp files in a session directory. A write to any of them may be a write to the
// session's current generation; a new generation file linked in beside them is a structural change (a
// listing pass finds the session's new artifact).
func artifactName(name string) bool {
	_, ok := jsonl.ParseGenerationName(name)
	return ok
}

// leaseName is the harness's write lease in a session directory (0.1.5 and later): it is created once,
// never deleted, and opened for writing by every writer, so its events say nothing about the content.
const leaseName = "session.lock"

func (w *inotifyWatcher) close() { w.file.Close() }

// watchFiles watches the directories of a store's own files instead of a tree of sessions.
func (w *inotifyWatcher) watchFiles(files []string, log func(string, ...any)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.files = map[string]map[string]bool{}
	for _, f := range files {
		dir := filepath.Dir(f)
		if w.files[dir] == nil {
			w.files[dir] = map[string]bool{}
		}
		w.files[dir][filepath.Base(f)] = true
		w.addLocked(dir, unix.IN_MODIFY|unix.IN_CLOSE_WRITE|unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_DELETE|unix.IN_ATTRIB|unix.IN_ONLYDIR, log)
	}
}

// remoteFS names the network filesystem dir is on ("" for a local one, or when it cannot tell): inotify
// reports only the changes made through this host's kernel, so what another host writes there is found
// by polling alone.
func remoteFS(dir string) string {
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

// watchInotify runs inotify beside the polling loop: it returns a channel that asks the loop for a listing
// pass now, and whether inotify covers the store (then the loop polls at the slower safety-net pace).
func (f *FS) watchInotify(ctx context.Context) (passNow <-chan struct{}, w *inotifyWatcher) {
	if os.Getenv("DSHFS_NO_INOTIFY") != "" { // tests of the polling path
		f.log.Info("inotify disabled by DSHFS_NO_INOTIFY: polling every refresh_interval")
		f.watchMode.Store(watchRefresh)
		return nil, nil
	}
	w, err := newInotify()
	if err != nil {
		f.log.Info("inotify unavailable: polling every refresh_interval", "err", err)
		f.watchMode.Store(watchRefresh)
		return nil, nil
	}
	f.watchMode.Store(watchInotify)
	if fw, ok := f.opts.Store.Backend().(interface{ WatchFiles() []string }); ok {
		w.watchFiles(fw.WatchFiles(), f.log.Info)
	}
	pass := make(chan struct{}, 1)
	switch remote := remoteFS(f.opts.Root); {
	case w.files != nil:
	case remote != "":
		// another host's writes to a network filesystem raise no inotify event here: every access keeps
		// stat'ing the artifact, and names keep the configured timeouts
		f.log.Info("the store is on a network filesystem: inotify sees only this host's changes; the polling safety net finds the others", "fs", remote)
	default:
		f.watcher.Store(w) // its watches vouch for artifact stats and stable names (stats.go)
	}
	go func() {
		<-ctx.Done()
		f.watcher.Store(nil)
		w.close()
	}()
	go w.run(func(id string) {
		f.queue(changes{changed: []string{id}}) // drops the session's stat first
	}, func() {
		f.stats.dropAll() // a listing pass finds what changed; until then no stat is trusted
		select {
		case pass <- struct{}{}:
		default: // a pass is already asked for: bursts coalesce
		}
	})
	return pass, w
}
