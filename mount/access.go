package mount

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dshfs/dshfs/eventstore"
)

// Access control of a mount shared with other users (allow_other). The kernel checks every request against
// the owner and mode each node reports (default_permissions), but a node of the mount stands for a whole
// path of the store: sessions/<id>/events.jsonl is readable in the store only to who may search every
// directory from / down to the session's artifact and read the artifact itself. No one owner and mode can
// say that for every user, so the mount checks the caller itself wherever a request reaches it — every
// open, every directory listing, every lookup — against the same modes the kernel would check in the store,
// and reports modes narrowed to what the directories above allow (Owner), so that a stat through a name
// the kernel cached for another user is refused too.
//
// The check reads mode bits only: an ACL on a store directory or artifact is not evaluated (a user an ACL
// admits beyond the mode bits is refused; one it excludes despite them is admitted).

// permTTL is how long a directory's owner and mode are trusted: a chmod in the store reaches the mount
// within it.
const permTTL = time.Second

// perm is one path's owner, group and permission bits.
type perm struct {
	uid, gid, mode uint32
	at             time.Time
}

// cred is who asks: the file-system uid and gid of the calling process and its supplementary groups.
type cred struct {
	uid    uint32
	groups []uint32 // the primary gid first
}

func (c cred) inGroup(gid uint32) bool {
	for _, g := range c.groups {
		if g == gid {
			return true
		}
	}
	return false
}

// allows reports whether c may access a path with p as asked (want: R_OK, W_OK, X_OK bits), by the
// kernel's rule: the owner's bits for the owner, the group's for a member, the others' for everyone else.
func (p perm) allows(c cred, want uint32) bool {
	bits := p.mode
	switch {
	case c.uid == p.uid:
		bits >>= 6
	case c.inGroup(p.gid):
		bits >>= 3
	}
	return bits&want == want
}

// permCache remembers the owner and mode of the directories above the store's artifacts (and spill files)
// for permTTL: a listing of sessions/ checks every session against the same few directories.
type permCache struct {
	mu sync.Mutex
	m  map[string]perm
}

// of is path's owner and mode (symbolic links followed, as a walk through them does); ok false when it
// cannot be read.
func (c *permCache) of(path string) (perm, bool) {
	now := time.Now()
	c.mu.Lock()
	p, ok := c.m[path]
	c.mu.Unlock()
	if ok && now.Sub(p.at) < permTTL {
		return p, true
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return perm{}, false
	}
	p = perm{uid: st.Uid, gid: st.Gid, mode: st.Mode & 0o7777, at: now}
	c.mu.Lock()
	if c.m == nil || len(c.m) > 4096 {
		c.m = map[string]perm{} // bounded: forgetting costs one stat
	}
	c.m[path] = p
	c.mu.Unlock()
	return p, true
}

// chainAllows reports whether c may search every directory above path and access path itself as asked.
// self, when not nil, is path's own owner and mode as already known (a listed artifact's).
func (c *permCache) chainAllows(cr cred, path string, want uint32, self *perm) bool {
	path = filepath.Clean(path)
	if !filepath.IsAbs(path) {
		return false
	}
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		p, ok := c.of(dir)
		if !ok || !p.allows(cr, 1) {
			return false
		}
		if dir == "/" {
			break
		}
	}
	if self == nil {
		p, ok := c.of(path)
		if !ok {
			return false
		}
		self = &p
	}
	return self.allows(cr, want)
}

// caller is who made the request ctx serves; checked is false when the mount need not check (it serves
// only its owner, or the caller is its owner or root, who read the store as the mount does).
func (f *FS) caller(ctx context.Context) (c cred, checked bool) {
	if !f.opts.Config.FUSE.AllowOther {
		return cred{}, false
	}
	who, ok := fuse.FromContext(ctx)
	if !ok {
		return cred{}, false // not a request: the mount itself
	}
	if who.Uid == 0 || who.Uid == uint32(os.Geteuid()) {
		return cred{}, false
	}
	return cred{uid: who.Uid, groups: append([]uint32{who.Gid}, supplementaryGroups(who.Pid)...)}, true
}

// supplementaryGroups are the groups of process pid beyond its primary one, from /proc (a FUSE request
// carries only the fsuid and fsgid). None when the process is gone or not visible: the caller is then
// judged by its primary group alone, which can only refuse more.
func supplementaryGroups(pid uint32) []uint32 {
	if pid == 0 {
		return nil
	}
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return nil
	}
	var out []uint32
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Bytes()
		if rest, ok := bytes.CutPrefix(line, []byte("Groups:")); ok {
			for _, g := range bytes.Fields(rest) {
				if n, err := strconv.ParseUint(string(g), 10, 32); err == nil {
					out = append(out, uint32(n))
				}
			}
			break
		}
	}
	return out
}

// Permit reports whether the caller of the request ctx serves may access path (a store artifact or
// directory, a spill file) as asked — R_OK, X_OK — as the kernel would let it in the store: EACCES when
// not. self is path's own owner and mode when already known (an opened file's), nil to read them. 0 on a
// mount that serves only its owner.
func (f *FS) Permit(ctx context.Context, path string, self *eventstore.Owner, want uint32) syscall.Errno {
	c, checked := f.caller(ctx)
	if !checked {
		return 0
	}
	var sp *perm
	if self != nil {
		sp = &perm{uid: self.UID, gid: self.GID, mode: self.Perm}
	}
	if !f.perms.chainAllows(c, path, want, sp) {
		return syscall.EACCES
	}
	return 0
}

// PathOwner is the owner and mode the mount reports for path (a store directory or artifact, a spill
// file): self (its own, read from path when nil), narrowed to what the directories above it allow.
func (f *FS) PathOwner(path string, self *eventstore.Owner) *eventstore.Owner {
	if self == nil {
		p, ok := f.perms.of(path)
		if !ok {
			return nil
		}
		self = &eventstore.Owner{UID: p.uid, GID: p.gid, Perm: p.mode & 0o777}
	}
	return f.narrowed(self, path)
}

// StorePath is the path in the store of a store/ entry, rel its root-relative path.
// The root of a database store is the database file: its store/ stands for the directory holding it.
func (f *FS) StorePath(rel string) string {
	root := f.opts.Root
	if _, _, ok := f.opts.Store.Database(); ok {
		root = filepath.Dir(root)
	}
	return filepath.Join(root, filepath.FromSlash(rel))
}

// PermitSession reports whether the caller may read session id's artifact in the store: search on every
// directory above it and read on the artifact itself (its listed owner and mode).
func (f *FS) PermitSession(ctx context.Context, id string) syscall.Errno {
	c, checked := f.caller(ctx)
	if !checked {
		return 0
	}
	l := f.Listing()
	i, ok := l.ByID[id]
	if !ok {
		return 0 // gone: the lookup answers ENOENT
	}
	e := l.Entries[i]
	if e.Owner == nil || !filepath.IsAbs(e.Path) {
		// no artifact file to judge by (a fleet store's session): the owner and mode it is served with are
		// the whole rule (Owner)
		o := f.Owner(id)
		if o == nil || !(perm{uid: o.UID, gid: o.GID, mode: o.Perm}).allows(c, 4) {
			return syscall.EACCES
		}
		return 0
	}
	var self *perm
	if o := e.Owner; o != nil {
		self = &perm{uid: o.UID, gid: o.GID, mode: o.Perm}
	}
	if !f.perms.chainAllows(c, e.Path, 4, self) {
		return syscall.EACCES
	}
	return 0
}

// narrowed is owner o as the mount reports it for the path p of an artifact: each class (owner, group,
// others) keeps its bits only if a user of that class — the owner, a member of the group, anyone else —
// may search every directory above p. The kernel then refuses a stat through a name it cached for another
// user where the store's directories would; the open, listing and lookup checks (Permit) are exact.
func (f *FS) narrowed(o *eventstore.Owner, p string) *eventstore.Owner {
	if o == nil || !filepath.IsAbs(p) || !f.opts.Config.FUSE.AllowOther {
		return o // no path of this host's above it (a fleet store's session): its own mode is the rule
	}
	classes := []struct {
		c    cred
		bits uint32
	}{
		{cred{uid: o.UID, groups: []uint32{o.GID}}, 0o700},
		{cred{uid: ^uint32(0), groups: []uint32{o.GID}}, 0o070},
		{cred{uid: ^uint32(0)}, 0o007},
	}
	n := *o
	for _, k := range classes {
		if !f.perms.chainAllows(k.c, filepath.Dir(p), 1, nil) {
			n.Perm &^= k.bits
		}
	}
	return &n
}
