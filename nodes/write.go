package nodes

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dshfs/dshfs/command"
	"github.com/dshfs/dshfs/eventstore"
)

// Writer is what the write-side nodes ask of the fs layer. Every error is (or wraps) an
// *eventstore.CommandError, whose Failure picks the errno; the fs layer has already recorded its reason
// in status.json and the log.
type Writer interface {
	// Append accepts the complete lines of one write request to a session's append file (input ends
	// before the request's last newline): all or none, as the command layer's Append.
	Append(ctx context.Context, id string, input []byte) error
	// Flush makes a session's accepted events durable (fsync on append).
	Flush(ctx context.Context, id string) error
	// Command runs one ctl command on a session, or on the store when id is "".
	Command(ctx context.Context, id, line string) command.Result
	// Mkdir creates a session from a directory name (the encoded name it will be listed under) and
	// returns its id.
	Mkdir(ctx context.Context, name string) (string, error)
	// Refuse records (status.json lastError and the log) why an append handle refused input it was given.
	Refuse(id, message string)
	// LineLimit is the longest append line accepted (0: no limit); a partial line may not grow past it.
	LineLimit() int64
}

// Permissions of the write-side files (docs/tree.md).
const (
	modeAppend = syscall.S_IFREG | 0o200
	modeCtl    = syscall.S_IFREG | 0o600
)

// control is what the two control files share: no data of their own (size 0, the session's mtime), and a
// truncation to size 0 accepted as a no-op, so that `echo CMD > ctl`, `>`, `>>` and `cp` work.
type control struct {
	fs.Inode
	noXattr
	src  Source
	w    Writer
	id   string // the session; "" for the store's ctl
	ino  uint64
	mode uint32
	// listed is the session's time when its directory was listed, for when the listing no longer has it
	listed time.Time
}

// controlEntry is a control file before its node exists.
type controlEntry struct {
	src    Source
	id     string
	ino    uint64
	listed time.Time
	append bool      // append, not ctl
	slots  *ctlSlots // the ctls' generations (ctlslot.go)
}

func (e controlEntry) newNode() fs.InodeEmbedder {
	if e.append {
		return &appendFile{control{src: e.src, w: e.src.Writer(), id: e.id, ino: e.ino, mode: modeAppend, listed: e.listed}}
	}
	// the generation is chosen when the node is made, at lookup (ctlslot.go), not when listed
	gen := e.slots.current(e.id)
	return &ctlFile{control: control{src: e.src, w: e.src.Writer(), id: e.id, ino: ctlIno(e.ino, gen), mode: modeCtl, listed: e.listed},
		slots: e.slots, gen: gen}
}

// ctlChild is a control file: a session's (id) or the store's (id ""); listed is the session's time (see
// control).
func ctlChild(t *tree, id string, inode uint64, listed time.Time) child {
	return child{name: "ctl", mode: syscall.S_IFREG, ino: inode, node: controlEntry{src: t.src, id: id, ino: inode, listed: listed, slots: &t.ctls}}
}

// appendChild is a session's append file.
func appendChild(t *tree, id string, listed time.Time) child {
	inode := ino(id, "append")
	return child{name: "append", mode: syscall.S_IFREG, ino: inode,
		node: controlEntry{src: t.src, id: id, ino: inode, listed: listed, append: true}}
}

// mtime is the store's time for the store's ctl, the session directory's for a session's files.
func (c *control) mtime() time.Time {
	if c.id == "" {
		return storeTime(c.src)
	}
	return sessionMtime(c.src, eventstore.Entry{ID: c.id, ModTime: c.listed})
}

func (c *control) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	fillFile(&out.Attr, 0, c.mtime(), c.ino)
	out.Attr.Mode = c.mode
	if c.id != "" {
		applyOwner(&out.Attr, c.src.Owner(c.id))
	}
	out.SetTimeout(0)
	return 0
}

func (c *control) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok && sz != 0 {
		return syscall.EINVAL
	}
	return c.Getattr(ctx, fh, out)
}

// appendFile is sessions/<id>/append: each newline-terminated line written to it is one event
// (docs/writing.md). The lines of one WRITE request are applied together or not at all; a partial line waits in the
// handle for its newline.
type appendFile struct{ control }

// appendHandle is one open of append: the partial line not yet terminated, and whether a request was
// rejected (then every later write fails, so the tail of a split write never lands without its head).
type appendHandle struct {
	mu       sync.Mutex
	partial  []byte
	rejected bool
	// scanned counts the bytes searched for a newline: each byte is searched once, however many writes a
	// long line arrives in (a 64 MiB line in 64 KiB writes was rescanned whole at every write)
	scanned int64
}

// lineEnd is where the last newline of partial+data is, -1 for none. partial never holds a newline (it is
// what follows the last one), so only data is searched.
func (h *appendHandle) lineEnd(data []byte) int {
	h.scanned += int64(len(data))
	end := bytes.LastIndexByte(data, '\n')
	if end < 0 {
		return -1
	}
	return len(h.partial) + end
}

func (f *appendFile) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if errno := f.src.PermitSession(ctx, f.id); errno != 0 {
		return nil, 0, errno // the kernel checked the write bits; the store's directories are checked here
	}
	return &appendHandle{}, fuse.FOPEN_DIRECT_IO, 0
}

// Read of append returns no bytes, so grep -r and rsync over a writable mount stay harmless.
func (f *appendFile) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return fuse.ReadResultData(nil), 0
}

func (f *appendFile) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	h, ok := fh.(*appendHandle)
	if !ok {
		return 0, syscall.EBADF
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.rejected {
		f.w.Refuse(f.id, "this append handle rejected an earlier write; reopen append to write again (nothing of this write was appended)")
		return 0, syscall.EINVAL
	}
	end := h.lineEnd(data)
	buf := append(h.partial, data...)
	if limit := f.w.LineLimit(); limit > 0 && int64(len(buf)-end-1) > limit {
		// the unterminated tail alone is already too long: buffering more would only grow memory
		h.rejected, h.partial = true, nil
		f.w.Refuse(f.id, "a line longer than [writer] max_line_bytes ("+strconv.FormatInt(limit, 10)+" bytes) was refused before its end; nothing of this write was appended")
		return 0, syscall.EINVAL
	}
	if end < 0 {
		h.partial = buf
		return uint32(len(data)), 0
	}
	if err := f.w.Append(ctx, f.id, buf[:end]); err != nil {
		h.rejected = true
		h.partial = nil
		return 0, eventstore.WriteErrno(err)
	}
	h.partial = append([]byte(nil), buf[end+1:]...)
	return uint32(len(data)), 0
}

// Flush (each close of a descriptor) reports a partial line left without its newline: it is discarded,
// and the close fails so the writer learns it.
func (f *appendFile) Flush(ctx context.Context, fh fs.FileHandle) syscall.Errno {
	h, ok := fh.(*appendHandle)
	if !ok {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.partial); n > 0 && !h.rejected {
		h.partial = nil
		f.w.Refuse(f.id, "a partial line of "+strconv.Itoa(n)+" bytes without its newline was discarded when append was closed")
		return syscall.EINVAL
	}
	return 0
}

// Fsync is flush: it returns once every accepted event of the session is durable.
func (f *appendFile) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	return eventstore.WriteErrno(f.w.Flush(ctx, f.id))
}

// ctlFile is a control file (a session's, or the store's when id is ""): each write is one command; the
// errno comes back from write(2), and a read on the same handle returns that command's result as one JSON
// line (a fresh handle reads nothing).
type ctlFile struct {
	control
	slots *ctlSlots
	gen   uint64 // this node's generation of the ctl (ctlslot.go)
}

// ctlHandle is one open of ctl: the last command's result, and the file offset just after the write that
// produced it, so that a read continuing after the write (`exec 3<>ctl`, write, read) and a read from the
// start both see the whole result.
type ctlHandle struct {
	mu     sync.Mutex
	result []byte
	base   int64
	// origin is where the result starts for this handle's reads since the write: base for a read
	// continuing after it, 0 for one from the start; -1 until the first read decides. Deciding once keeps
	// a read past the result's end from landing inside it again, the other way round.
	origin int64
}

func (f *ctlFile) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if f.id != "" {
		if errno := f.src.PermitSession(ctx, f.id); errno != 0 {
			return nil, 0, errno
		}
	}
	return &ctlHandle{origin: -1}, fuse.FOPEN_DIRECT_IO, 0
}

func (f *ctlFile) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h, ok := fh.(*ctlHandle)
	if !ok {
		return nil, syscall.EBADF
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.origin < 0 {
		h.origin = 0
		if off >= h.base {
			h.origin = h.base
		}
	}
	off -= h.origin
	if off < 0 || off >= int64(len(h.result)) {
		return fuse.ReadResultData(nil), 0
	}
	end := min(off+int64(len(dest)), int64(len(h.result)))
	return fuse.ReadResultData(h.result[off:end]), 0
}

func (f *ctlFile) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	h, ok := fh.(*ctlHandle)
	if !ok {
		return 0, syscall.EBADF
	}
	end := f.slots.begin(f.id, f.gen)
	r := f.w.Command(ctx, f.id, string(data))
	end()
	h.mu.Lock()
	// a failed write(2) leaves the file offset where it was: the result is read from there
	h.result, h.base, h.origin = r.JSON(), off, -1
	if r.Err == nil {
		h.base += int64(len(data))
	}
	h.mu.Unlock()
	if r.Err != nil {
		return 0, eventstore.WriteErrno(r.Err)
	}
	return uint32(len(data)), 0
}

// writableSessionsDir is sessions/ on a writable mount: mkdir creates a session whose encoded name is the
// new directory's name (so `mkdir sessions/a~002Fb` creates id "a/b").
type writableSessionsDir struct {
	*sessionsDir
	w Writer
}

// Getattr reports 0755: the directory is where sessions are created.
func (d *writableSessionsDir) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	e := d.sessionsDir.Getattr(ctx, fh, out)
	out.Mode = syscall.S_IFDIR | 0o755
	return e
}

func (d *writableSessionsDir) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if _, err := d.w.Mkdir(ctx, name); err != nil {
		return nil, eventstore.WriteErrno(err)
	}
	return d.sessionsDir.Lookup(ctx, name, out)
}
