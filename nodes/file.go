package nodes

import (
	"bytes"
	"context"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// file is a read-only regular file whose bytes come from get: a session view, a per-event file, the root
// README or status. Its size is exact at every GETATTR (rsync and tar trust it) and every open reads one
// snapshot.
type file struct {
	fs.Inode
	src   Source
	ino   uint64
	what  string // for the log: which file failed
	get   func(ctx context.Context) (Rendered, error)
	sizes *sizes
}

// sizes remembers the size last reported to the kernel for each file inode. The kernel trusts a reported
// size for the attribute timeout and cuts reads at it; a file opened after its view changed (the store
// moved on before the watcher invalidated the kernel's attributes) must not be cut to the old size.
type sizes struct{ m sync.Map }

func (s *sizes) reported(ino uint64, n int64) {
	if s != nil {
		s.m.Store(ino, n)
	}
}

// stale reports whether the kernel may hold a different size for ino than n.
func (s *sizes) stale(ino uint64, n int64) bool {
	if s == nil {
		return false
	}
	v, ok := s.m.Load(ino)
	return ok && v.(int64) != n
}

var (
	_ fs.NodeGetattrer = (*file)(nil)
	_ fs.NodeOpener    = (*file)(nil)
	_ fs.NodeReader    = (*file)(nil)
)

func (f *file) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	r, err := f.get(ctx)
	if err != nil {
		f.src.Logf("%s: %v", f.what, err)
		return syscall.EIO
	}
	fillFile(&out.Attr, int64(len(r.Data)), r.ModTime, f.ino)
	f.sizes.reported(f.ino, int64(len(r.Data)))
	_, attr := f.src.Timeouts()
	out.SetTimeout(attr)
	return 0
}

func (f *file) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND) != 0 {
		return nil, 0, syscall.EROFS
	}
	r, err := f.get(ctx)
	if err != nil {
		f.src.Logf("%s: %v", f.what, err)
		return nil, 0, syscall.EIO
	}
	var fuseFlags uint32
	if f.sizes.stale(f.ino, int64(len(r.Data))) {
		// The kernel still holds the size of an older snapshot and would cut reads at it: serve this
		// open with direct I/O, which reads until the server's end of file.
		fuseFlags = fuse.FOPEN_DIRECT_IO
	}
	return &handle{data: r.Data, get: f.get}, fuseFlags, 0
}

func (f *file) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h, ok := fh.(*handle)
	if !ok {
		return nil, syscall.EBADF
	}
	return fuse.ReadResultData(h.read(ctx, dest, off)), 0
}

// handle is one open snapshot. A read past its end looks at the current rendering and, when the snapshot
// is a prefix of it (the log grew), continues with the longer bytes — so `tail -f` follows appends on one
// descriptor, while bytes already read never change under a reader.
type handle struct {
	mu   sync.Mutex
	data []byte
	get  func(ctx context.Context) (Rendered, error)
}

func (h *handle) read(ctx context.Context, dest []byte, off int64) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	if off+int64(len(dest)) > int64(len(h.data)) {
		if r, err := h.get(ctx); err == nil && len(r.Data) > len(h.data) && bytes.HasPrefix(r.Data, h.data) {
			h.data = r.Data
		}
	}
	if off >= int64(len(h.data)) {
		return nil
	}
	end := off + int64(len(dest))
	if end > int64(len(h.data)) {
		end = int64(len(h.data))
	}
	return h.data[off:end]
}

// link is a symlink inside the tree (forks/, parent, by-project/).
type link struct {
	fs.Inode
	src    Source
	ino    uint64
	target string
	mtime  func() Rendered
}

var (
	_ fs.NodeReadlinker = (*link)(nil)
	_ fs.NodeGetattrer  = (*link)(nil)
)

func (l *link) Readlink(ctx context.Context) ([]byte, syscall.Errno) { return []byte(l.target), 0 }

func (l *link) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	fillLink(&out.Attr, l.target, l.mtime().ModTime, l.ino)
	_, attr := l.src.Timeouts()
	out.SetTimeout(attr)
	return 0
}
