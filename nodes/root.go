package nodes

import (
	"context"
	"syscall"
	"time"
	"weak"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dshfs/dshfs/views"
)

// The directories above the sessions: the root, sessions/ and by-project/. Their times are the store's
// (the newest artifact change), their entries the store listing's.

// rootDir is MNT/: README, status.json, stats.json, sessions/, by-project/ (JSONL stores), by-host/ (a
// store fed by many hosts), store/ (a store with artifact files) and, on a writable mount, ctl.
type rootDir struct {
	dirNode
	t *tree
}

func (t *tree) root() *rootDir {
	return &rootDir{dirNode: dirNode{src: t.src, ino: 1, what: "/"}, t: t}
}

func (d *rootDir) list(ctx context.Context) ([]child, error) {
	t := d.t
	kids := []child{
		fileChild("README", fileEntry{t: t, ino: ino("/README"), what: "README", body: readme{t.src, t.readme}}),
		fileChild("status.json", fileEntry{t: t, ino: ino("/status.json"), what: "status.json", body: storeStatus{t.src}, volatile: true}),
		fileChild("stats.json", fileEntry{t: t, ino: ino("/stats.json"), what: "stats.json", body: storeStats{t.src}, volatile: true}),
		dirChild("sessions", ino("/sessions"), t.sessions()),
	}
	// the index's pages: each session's state and evidence, newest first, linking to its transcript
	for p := 1; p <= views.IndexPages(t.src.VisibleSessions(ctx)); p++ {
		name := views.IndexPageName(p)
		kids = append(kids, fileChild(name, fileEntry{t: t, ino: ino("/" + name), what: name, body: storeIndex{t.src, p}, volatile: true}))
	}
	l := t.src.Listing()
	if l.Files {
		kids = append(kids, dirChild(byProject.top, ino("/"+byProject.top), newGroupsDir(t.src, byProject)))
	}
	if len(l.Hosts) > 0 {
		kids = append(kids, dirChild(byHost.top, ino("/"+byHost.top), newGroupsDir(t.src, byHost)))
	}
	if l.Mirror != nil {
		kids = append(kids, child{name: "store", mode: syscall.S_IFDIR, ino: ino("/store", ""), node: storeDirEntry{t.src, ""}})
	}
	if w := t.src.Writer(); w != nil {
		kids = append(kids, ctlChild(t, "", ino("/ctl"), time.Time{}))
	}
	return kids, nil
}

func (d *rootDir) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	return d.attr(storeTime(d.src), out)
}

func (d *rootDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return d.readdir(ctx, d)
}

func (d *rootDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = oneRequest(ctx)
	c, ok, err := search(ctx, d, name)
	return d.attach(ctx, name, c, ok, err, out)
}

// storeTime is the time of the directories above the sessions.
func storeTime(src Source) time.Time { return src.Listing().ModTime }

// listingKey keys a directory listed from the store listing alone: each refresh publishes a new one. (A
// weak pointer, so that no directory keeps an old listing alive.)
func listingKey(src Source) any { return weak.Make(src.Listing()) }

// sessionsDir is sessions/: every session by its encoded name. On a writable mount it is a
// writableSessionsDir (write.go), where mkdir creates a session.
type sessionsDir struct {
	dirNode
	t *tree
}

func (t *tree) sessions() fs.InodeEmbedder {
	d := &sessionsDir{dirNode: dirNode{src: t.src, ino: ino("/sessions"), what: "sessions"}, t: t}
	if w := t.src.Writer(); w != nil {
		return &writableSessionsDir{sessionsDir: d, w: w}
	}
	return d
}

func (d *sessionsDir) list(ctx context.Context) ([]child, error) {
	l := d.src.Listing()
	kids := make([]child, 0, len(l.Entries))
	for i := range l.Entries {
		if d.src.PermitSession(ctx, l.Entries[i].ID) != 0 {
			continue // a session the caller could not read in the store is not listed to it
		}
		kids = append(kids, d.session(l, i))
	}
	return kids, nil
}

// session is the entry of the listing's i-th session: stable, since the mount tells the kernel of every
// session that comes or goes.
func (d *sessionsDir) session(l *Listing, i int) child {
	e := l.Entries[i]
	return child{name: l.Names[i], mode: syscall.S_IFDIR, ino: ino(e.ID), stable: true,
		node: sessionEntry{t: d.t, e: e, name: l.Names[i]}}
}

func (d *sessionsDir) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	return d.attr(storeTime(d.src), out)
}

func (d *sessionsDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return d.readdir(ctx, d)
}

// Lookup finds a session by its name in the listing's index, without listing.
func (d *sessionsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = oneRequest(ctx)
	l := d.src.Listing()
	i, ok := l.ByName[name]
	var c child
	if ok {
		if errno := d.src.PermitSession(ctx, l.Entries[i].ID); errno != 0 {
			return nil, errno
		}
		c = d.session(l, i)
	}
	return d.attach(ctx, name, c, ok, nil, out)
}
