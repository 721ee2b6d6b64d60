package fleetsync

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

// Following a store (sync --watch). inotify tells at once which session's artifact was written, so a
// growing session is copied as its lines land without listing the store; anything structural (a session
// or project created, renamed, deleted; a SQLite database or its WAL written) starts a pass over the
// listing, which reads only the sessions whose revision changed. A slower pass runs anyway (pollEvery),
// for what inotify does not report; without inotify (or out of watches) the passes are all there is.

// pollEvery is the safety-net pass interval while inotify watches; fallbackPoll the interval without it.
const (
	pollEvery    = 30 * time.Second
	fallbackPoll = 2 * time.Second
	// settle coalesces a burst of writes (a batch is a write, a close and often a lease's open and
	// close) into one read of the session.
	settle = 20 * time.Millisecond
)

const (
	dirMask     = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR
	sessionMask = dirMask | unix.IN_MODIFY | unix.IN_CLOSE_WRITE
	fileMask    = unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_MOVED_TO
)

// Watch follows the source until ctx ends: each change is synced as it lands, and every report of a
// sync that did something (or refused, skipped or failed) goes to report. notice gets one line when
// inotify cannot be used and the source is polled instead. It returns nil when ctx ends.
func (s *Syncer) Watch(ctx context.Context, report func(Report), notice func(string)) error {
	w, err := newWatcher()
	if err != nil {
		notice("inotify is unavailable (" + err.Error() + "): polling the store every " + fallbackPoll.String())
	} else {
		defer w.close()
		go w.run()
	}
	full := true // the first listing after the pass that preceded Watch sets the watches
	poll := pollEvery
	if w == nil {
		poll = fallbackPoll
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	refresh := time.NewTicker(refreshAfter)
	defer refresh.Stop()
	pending := map[string]bool{}
	for {
		if full {
			full = false
			if w != nil {
				s.watchAll(w, notice)
			}
			reports, err := s.Pass(ctx, true)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				report(Report{Status: Failed, Reason: "listing this host's store: " + err.Error()})
			}
			for _, r := range reports {
				if r.Status != Unchanged {
					report(r)
				}
			}
			if w != nil {
				s.watchAll(w, notice) // sessions the pass found
			}
			continue
		}
		for id := range pending {
			delete(pending, id)
			if !s.listed(id) {
				full = true // a session the last listing did not have: a pass lists it
				continue
			}
			r, ok := s.Session(ctx, id)
			if ctx.Err() != nil {
				return nil
			}
			if ok && r.Status != Unchanged {
				report(r)
			}
		}
		var changes <-chan string
		if w != nil {
			changes = w.changes
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			full = true
		case <-refresh.C:
			s.Refresh(ctx)
		case id := <-changes:
			// let the burst settle, then take everything it brought
			timer := time.NewTimer(settle)
		drain:
			for {
				if id == "" {
					full = true
				} else {
					pending[id] = true
				}
				select {
				case id = <-changes:
				case <-timer.C:
					break drain
				case <-ctx.Done():
					timer.Stop()
					return nil
				}
			}
		}
	}
}

// watchAll adds watches for the source's root, its project and session directories (JSONL), or the
// database's directory (SQLite).
func (s *Syncer) watchAll(w *watcher, notice func(string)) {
	b := s.src.Backend()
	if r, ok := b.(interface{ Root() string }); ok {
		root := r.Root()
		w.mu.Lock()
		w.root = root
		w.mu.Unlock()
		s.mu.Lock()
		dirs := map[string]string{}
		for id, e := range s.entries {
			if e.Path != "" {
				dirs[filepath.Dir(e.Path)] = id
			}
		}
		s.mu.Unlock()
		w.add(root, dirMask, "", notice)
		if entries, err := os.ReadDir(root); err == nil {
			for _, e := range entries {
				if e.IsDir() {
					w.add(filepath.Join(root, e.Name()), dirMask, "", notice)
				}
			}
		}
		for dir, id := range dirs {
			w.add(dir, sessionMask, id, notice)
		}
		return
	}
	if p, ok := b.(interface{ Path() string }); ok {
		path := p.Path()
		w.mu.Lock()
		w.files[filepath.Dir(path)] = map[string]bool{filepath.Base(path): true, filepath.Base(path) + "-wal": true}
		w.mu.Unlock()
		w.add(filepath.Dir(path), fileMask, "", notice)
	}
}

// watcher is an inotify instance reporting changed sessions ("" for a structural change) on changes.
type watcher struct {
	file    *os.File
	fd      int
	changes chan string

	mu       sync.Mutex
	byWD     map[int32]string // watch → directory
	byDir    map[string]int32
	sessions map[string]string          // session directory → session id
	files    map[string]map[string]bool // directory → the file names in it whose change is structural
	full     bool                       // a watch could not be added (said once)
	root     string                     // a JSONL store's root ("" for a database)
}

// addNew watches a directory created in the root (a project: its session directories too) or in a
// project (a session, whose id its name encodes).
func (w *watcher) addNew(root, dir string) {
	quiet := func(string) {}
	if filepath.Dir(dir) == root {
		w.add(dir, dirMask, "", quiet)
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if id, ok := jsonl.DecodeSegment(e.Name()); ok && e.IsDir() {
				w.add(filepath.Join(dir, e.Name()), sessionMask, id, quiet)
			}
		}
		return
	}
	if id, ok := jsonl.DecodeSegment(filepath.Base(dir)); ok {
		w.add(dir, sessionMask, id, quiet)
	}
}

func newWatcher() (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	return &watcher{file: os.NewFile(uintptr(fd), "inotify"), fd: fd, changes: make(chan string, 1024),
		byWD: map[int32]string{}, byDir: map[string]int32{}, sessions: map[string]string{},
		files: map[string]map[string]bool{}}, nil
}

func (w *watcher) close() { w.file.Close() }

func (w *watcher) add(dir string, mask uint32, id string, notice func(string)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if id != "" {
		w.sessions[dir] = id
	}
	if _, ok := w.byDir[dir]; ok {
		return
	}
	wd, err := unix.InotifyAddWatch(w.fd, dir, mask)
	if err != nil {
		if !w.full {
			w.full = true
			notice("inotify cannot watch " + dir + " (" + err.Error() + "): changes there are found by the pass every " + pollEvery.String())
		}
		return
	}
	w.byDir[dir], w.byWD[int32(wd)] = int32(wd), dir
}

// send reports a change without ever blocking the reader: a full queue becomes one structural change.
func (w *watcher) send(id string) {
	select {
	case w.changes <- id:
	default:
		select {
		case w.changes <- "":
		default:
		}
	}
}

// run reads events until the instance is closed.
func (w *watcher) run() {
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
				w.send("")
				continue
			}
			w.mu.Lock()
			dir := w.byWD[ev.Wd]
			names, isFiles := w.files[dir]
			id, isSession := w.sessions[dir]
			if ev.Mask&unix.IN_IGNORED != 0 {
				delete(w.byDir, dir)
				delete(w.byWD, ev.Wd)
			}
			root := w.root
			w.mu.Unlock()
			if ev.Mask&unix.IN_ISDIR != 0 && ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 && !isSession && root != "" {
				// watched before its content is read, so that a transcript written into it a moment later
				// is reported too
				w.addNew(root, filepath.Join(dir, name))
			}
			switch {
			case isFiles:
				if names[name] {
					w.send("") // a commit to the database: a pass finds which sessions' revisions moved
				}
			case isSession && ev.Mask&(unix.IN_MODIFY|unix.IN_CLOSE_WRITE) != 0:
				if _, ok := jsonl.ParseGenerationName(name); ok {
					w.send(id)
				}
				// a sidecar, a temp file or the harness's write lease: not the session's content
			case ev.Mask&unix.IN_IGNORED != 0:
			default:
				w.send("") // created, renamed or deleted: a pass over the listing
			}
		}
	}
}
