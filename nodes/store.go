package nodes

import (
	"context"
	"io"
	"os"
	"path"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dshfs/dshfs/eventstore"
)

// store/ mirrors the physical store (docs/tree.md): the harness's own layout, each artifact a regular file
// frozen at its last durable flush — complete lines or zstd frames only — with its exact size and a
// data-derived time, so `rsync -a MNT/store/ DEST/` copies a store the harness opens, and a repeat copies
// nothing when nothing was flushed. Refused sessions' artifacts are mirrored whole; anything the backend
// will not open (a FIFO, a link out of the root) is not listed.

// storeDir is store/ or a directory below it: rel is its root-relative path ("" for store/ itself).
type storeDir struct {
	dirNode
	rel string
}

// mirrorEntry is an artifact file of store/ before its node exists.
type mirrorEntry struct {
	src Source
	ino uint64
	rel string
}

func (e mirrorEntry) newNode() fs.InodeEmbedder {
	return &mirrorFile{src: e.src, ino: e.ino, rel: e.rel}
}

// kid is the entry name in m below the directory, if it is one: a refused artifact is listed only when it
// can be served.
func (d *storeDir) kid(ctx context.Context, m *Mirror, name string) (child, bool) {
	p := path.Join(d.rel, name)
	if e, isFile := m.Files[p]; isFile {
		if e.Refusal != nil {
			f, _, err := d.src.OpenArtifact(ctx, e.Path)
			if err != nil {
				return child{}, false
			}
			f.Close()
		}
		inode := ino("/store", p, e.Identity)
		return child{name: name, mode: syscall.S_IFREG, ino: inode, node: mirrorEntry{src: d.src, ino: inode, rel: p}}, true
	}
	if _, isDir := m.Dirs[p]; isDir {
		return child{name: name, mode: syscall.S_IFDIR, ino: ino("/store", p), node: storeDirEntry{d.src, p}}, true
	}
	return child{}, false
}

// storeDirEntry is a directory of store/ before its node exists.
type storeDirEntry struct {
	src Source
	rel string
}

func (e storeDirEntry) newNode() fs.InodeEmbedder {
	return &storeDir{dirNode: dirNode{src: e.src, ino: ino("/store", e.rel), what: path.Join("store", e.rel)}, rel: e.rel}
}

func (d *storeDir) list(ctx context.Context) ([]child, error) {
	m := d.src.Listing().Mirror
	if m == nil {
		return nil, nil
	}
	var kids []child
	for _, name := range m.Dirs[d.rel] {
		if k, ok := d.kid(ctx, m, name); ok {
			kids = append(kids, k)
		}
	}
	return kids, nil
}

// Getattr: a directory of store/ reports its store directory's owner and mode (narrowed to what the
// directories above allow), and Opendir and Lookup check the caller against them exactly.
func (d *storeDir) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	errno := d.attr(storeTime(d.src), out)
	if errno == 0 {
		applyPathOwner(&out.Attr, d.src.PathOwner(d.src.StorePath(d.rel), nil))
	}
	return errno
}

func (d *storeDir) Opendir(ctx context.Context) syscall.Errno {
	return d.src.Permit(ctx, d.dirPath(), nil, wantRead|wantSearch)
}

// dirPath is the directory of the store that d stands for: the root's for store/ of a database store.
func (d *storeDir) dirPath() string { return d.src.StorePath(d.rel) }

func (d *storeDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return d.readdir(ctx, d)
}

// Lookup answers from the mirror's index, without listing.
func (d *storeDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = oneRequest(ctx)
	if errno := d.src.Permit(ctx, d.dirPath(), nil, wantSearch); errno != 0 {
		return nil, errno
	}
	var (
		c  child
		ok bool
	)
	if m := d.src.Listing().Mirror; m != nil {
		c, ok = d.kid(ctx, m, name)
	}
	return d.attach(ctx, name, c, ok, nil, out)
}

// mirrorFile is one artifact in store/. Each open reads the artifact itself (no copy in memory), bounded
// at the frozen size of that moment; the open descriptor keeps that file and size, so a copy in progress
// is one consistent prefix even while writers append or the artifact is replaced.
type mirrorFile struct {
	fs.Inode
	noXattr
	src Source
	ino uint64
	rel string
}

func (f *mirrorFile) frozen(ctx context.Context) (size int64, mtime time.Time, errno syscall.Errno) {
	m := f.src.Listing().Mirror
	if m == nil {
		return 0, time.Time{}, syscall.ENOENT
	}
	e, ok := m.Files[f.rel]
	if !ok {
		return 0, time.Time{}, syscall.ENOENT
	}
	fr, err := f.src.Frozen(ctx, e)
	if err != nil {
		f.src.Logf("store/%s: %v", f.rel, err)
		return 0, time.Time{}, eventstore.ReadErrno(err)
	}
	return fr.Size, fr.ModTime, 0
}

func (f *mirrorFile) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	size, mtime, errno := int64(0), time.Time{}, syscall.Errno(0)
	if h, ok := fh.(*mirrorHandle); ok {
		size, mtime = h.size, h.mtime
	} else if size, mtime, errno = f.frozen(ctx); errno != 0 {
		return errno
	}
	fillFile(&out.Attr, size, mtime, f.ino)
	if m := f.src.Listing().Mirror; m != nil {
		if e, ok := m.Files[f.rel]; ok {
			applyOwner(&out.Attr, f.src.PathOwner(e.Path, e.Owner))
		}
	}
	_, attr := f.src.Timeouts()
	out.SetTimeout(attr)
	return 0
}

func (f *mirrorFile) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if writes(flags) {
		return nil, 0, syscall.EROFS // store/ is read-only even on a writable mount
	}
	m := f.src.Listing().Mirror
	if m == nil {
		return nil, 0, syscall.ENOENT
	}
	e, ok := m.Files[f.rel]
	if !ok {
		return nil, 0, syscall.ENOENT
	}
	if errno := f.src.Permit(ctx, e.Path, nil, wantRead); errno != 0 {
		return nil, 0, errno
	}
	// The size is taken after the open: the opened file is at least that long (artifacts only grow, and a
	// replaced one is a new file whose identity the frozen size belongs to — checked, retried once).
	for range 2 {
		file, opened, err := f.src.OpenArtifact(ctx, e.Path)
		if err != nil {
			f.src.Logf("store/%s: %v", f.rel, err)
			return nil, 0, eventstore.ReadErrno(err)
		}
		fr, err := f.src.Frozen(ctx, e)
		if err != nil {
			file.Close()
			f.src.Logf("store/%s: %v", f.rel, err)
			return nil, 0, eventstore.ReadErrno(err)
		}
		if fi, err := file.Stat(); err == nil && fi.Size() >= fr.Size && opened.Identity == fr.Identity {
			// direct I/O: the size a handle serves is its own, whatever the kernel cached for the inode
			return &mirrorHandle{f: file, size: fr.Size, mtime: fr.ModTime}, fuse.FOPEN_DIRECT_IO | noFlush, 0
		}
		file.Close()
	}
	f.src.Logf("store/%s: the artifact keeps being replaced while it is opened", f.rel)
	return nil, 0, syscall.EIO
}

func (f *mirrorFile) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h, ok := fh.(*mirrorHandle)
	if !ok {
		return nil, syscall.EBADF
	}
	return h.read(dest, off)
}

// mirrorHandle is one open artifact, served up to its frozen size.
type mirrorHandle struct {
	mu    sync.Mutex
	f     *os.File
	size  int64
	mtime time.Time
}

func (h *mirrorHandle) read(dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off >= h.size {
		return fuse.ReadResultData(nil), 0
	}
	want := min(int64(len(dest)), h.size-off)
	n, err := h.f.ReadAt(dest[:want], off)
	if err != nil && err != io.EOF {
		return nil, fs.ToErrno(err)
	}
	if int64(n) < want {
		return nil, syscall.EIO // the artifact shrank under the copy: never serve a silently short file
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *mirrorHandle) Release(ctx context.Context) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f != nil {
		h.f.Close()
		h.f = nil
	}
	return 0
}
