package nodes

import (
	"context"
	"os"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/spill"
)

// spillFile serves a spilled tool result from outside the store. It re-resolves its target against the
// spill roots at every GETATTR and open (docs/tree.md): a file that was deleted, or replaced by a link out
// of the roots, stops being served.
type spillFile struct {
	fs.Inode
	noXattr
	src  Source
	ino  uint64
	path string
	what string
}

func (f *spillFile) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := fh.(*spillHandle); ok {
		fi, err := h.f.Stat()
		if err != nil {
			return fs.ToErrno(err)
		}
		fillFile(&out.Attr, fi.Size(), fi.ModTime(), f.ino)
		applyOwner(&out.Attr, f.src.PathOwner(h.f.Name(), ownerOf(fi)))
		return 0
	}
	status, resolved, size := f.src.Spill().Resolve(f.path)
	if status != spill.Present {
		f.src.Logf("%s: spill target %s is %s", f.what, f.path, status)
		return syscall.ENOENT
	}
	mtime := time.Unix(0, 0)
	fi, err := os.Lstat(resolved)
	if err == nil {
		mtime = fi.ModTime()
	}
	fillFile(&out.Attr, size, mtime, f.ino)
	if err == nil {
		// the file's own owner and read bits, not 0444: a 0600 spill file (or a hard link to one) is
		// its owner's alone, through the mount as in the spill root
		applyOwner(&out.Attr, f.src.PathOwner(resolved, ownerOf(fi)))
	}
	_, attr := f.src.Timeouts()
	out.SetTimeout(attr)
	return 0
}

func (f *spillFile) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if writes(flags) {
		return nil, 0, syscall.EROFS
	}
	file, err := f.src.Spill().Open(f.path)
	if err != nil {
		f.src.Logf("%s: %v", f.what, err)
		return nil, 0, syscall.ENOENT
	}
	// judged by what the opened file is — its own owner and mode, whatever name led to it — and the
	// directories above it
	fi, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, 0, fs.ToErrno(err)
	}
	if errno := f.src.Permit(ctx, file.Name(), ownerOf(fi), wantRead); errno != 0 {
		file.Close()
		return nil, 0, errno
	}
	return &spillHandle{f: file}, fuse.FOPEN_DIRECT_IO | noFlush, 0
}

// spillHandle reads the opened spill file; direct I/O because the target lives outside the mount's
// change tracking.
type spillHandle struct{ f *os.File }

func (h *spillHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n, err := h.f.ReadAt(dest, off)
	if n == 0 && err != nil && err.Error() != "EOF" {
		return nil, fs.ToErrno(err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *spillHandle) Release(ctx context.Context) syscall.Errno {
	h.f.Close()
	return 0
}

// ownerOf is a file's owner and permission bits.
func ownerOf(fi os.FileInfo) *eventstore.Owner {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	return &eventstore.Owner{UID: st.Uid, GID: st.Gid, Perm: uint32(fi.Mode().Perm())}
}
