package nodes

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dshfs/dshfs/eventstore"
)

// file is a read-only regular file whose bytes come from its content (content.go): a session view, a
// per-event file, the root README or status. Its size is exact at every GETATTR (rsync and tar trust it) and every open reads one
// snapshot.
//
// A session's file belongs to one artifact storage identity (gen), as a file of a disk filesystem belongs
// to one inode: when the artifact is replaced (renamed over), the session's files get new inode numbers and
// this one goes stale. A stale file keeps answering with the attributes it last reported (or its open
// handle's snapshot), so the kernel never cuts a reader of the old bytes short at the new, smaller size.
type file struct {
	fs.Inode
	noXattr
	src  Source
	ino  uint64
	sess string // the session whose owner the file takes; "" for the store's own files
	gen  string // the artifact identity this inode belongs to; "" when unknown (never stale)
	// volatile: bytes that change in place and in both directions at any moment (a status.json: counts,
	// states, the last command), always served with direct I/O. A page-cache read trusts the size of the
	// last GETATTR, and a rendering one byte shorter than that size — taken a moment later — would come
	// back padded with a NUL.
	volatile bool
	// stable: a session's whole-view file, whose name and attributes change only with a notification from
	// the mount, so that the kernel may keep them for Source.StableTimeouts (a volatile one's attributes
	// still get the attribute timeout)
	stable bool
	what   string // for the log: which file failed
	body   content
	kernel *kernelView

	mu   sync.Mutex
	last attrs // what the last GETATTR or open of the current artifact reported
}

type attrs struct {
	size  int64
	mtime time.Time
	ok    bool
}

// stale reports whether r was rendered from another artifact than the one this inode belongs to.
func (f *file) stale(r Rendered) bool { return f.gen != "" && r.Identity != "" && r.Identity != f.gen }

// attrsFor is what GETATTR reports for r, of n bytes: r's own size and time, or — once the artifact was
// replaced — the open handle's snapshot, else what was reported before.
func (f *file) attrsFor(r Rendered, n int64, fh fs.FileHandle) (int64, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.stale(r) {
		f.last = attrs{size: n, mtime: r.ModTime, ok: true}
		return f.last.size, f.last.mtime
	}
	mtime := f.last.mtime
	if h, ok := fh.(*handle); ok {
		return h.size(), mtime
	}
	if f.last.ok {
		return f.last.size, mtime
	}
	return n, r.ModTime
}

// kernelView remembers, per file inode, the size last reported to the kernel and the revision last served by
// an open. The kernel trusts a reported size for the attribute timeout and cuts reads at it, so a file
// opened after its view changed (before the watcher invalidated the kernel's attributes) must not be cut to
// the old size; and an open that serves the very bytes of the previous one may keep the page cache.
//
// Each inode's record changes under its stripe's lock, read, decided and written as one step: a GETATTR
// writing back a record it read before an open (or a priming) changed it would make the next open keep
// pages of a revision the kernel no longer holds.
type kernelView struct {
	m       sync.Map
	stripes [64]sync.Mutex
	primer  primer
	primes  *atomic.Int64 // views primed (primer.go); nil: not counted
}

type seen struct {
	size   int64
	opened string // revision served by the last open; "" when unknown or not cacheable
}

func (s *kernelView) lock(ino uint64) *sync.Mutex {
	mu := &s.stripes[ino%uint64(len(s.stripes))]
	mu.Lock()
	return mu
}

func (s *kernelView) load(ino uint64) seen {
	if v, ok := s.m.Load(ino); ok {
		return v.(seen)
	}
	return seen{size: -1}
}

// update changes ino's record with change, under the inode's lock.
func (s *kernelView) update(ino uint64, change func(*seen)) {
	defer s.lock(ino).Unlock()
	v := s.load(ino)
	change(&v)
	s.m.Store(ino, v)
}

// keeps reports whether an open of ino at revision rev, n bytes, will keep the kernel's page cache.
func (s *kernelView) keeps(ino uint64, rev string, n int64) bool {
	return s != nil && s.load(ino).flags(rev, n) == fuse.FOPEN_KEEP_CACHE
}

func (s *kernelView) forget(ino uint64) {
	if s != nil {
		defer s.lock(ino).Unlock()
		s.m.Delete(ino)
	}
}

func (s *kernelView) reported(ino uint64, n int64) {
	if s != nil {
		s.update(ino, func(v *seen) { v.size = n })
	}
}

// flags decides how to serve an open at revision rev, n bytes: direct I/O when the kernel may hold a
// different size, the kept page cache when the previous open served the same revision of the same bytes.
func (v seen) flags(rev string, n int64) uint32 {
	switch {
	case v.size >= 0 && v.size != n:
		return fuse.FOPEN_DIRECT_IO
	case rev != "" && v.opened == rev:
		return fuse.FOPEN_KEEP_CACHE
	}
	return 0
}

// openFlags records an open of ino at revision rev, n bytes, and returns its flags.
func (s *kernelView) openFlags(ino uint64, rev string, n int64) (flags uint32) {
	if s == nil {
		return 0
	}
	s.update(ino, func(v *seen) {
		flags = v.flags(rev, n)
		v.opened = rev
	})
	return flags
}

// prime stores data, the bytes of revision rev, in the kernel's page cache with store, when the kernel was
// told their size and no open has recorded what it holds; then records that it holds rev (primer.go). store
// runs under the inode's lock, so it must not wait on a request to this mount (FUSE_NOTIFY_STORE does not).
func (s *kernelView) prime(ino uint64, rev string, data []byte, store func([]byte) syscall.Errno) (errno syscall.Errno, done bool) {
	defer s.lock(ino).Unlock()
	v := s.load(ino)
	if v.opened != "" || v.size != int64(len(data)) {
		return 0, true
	}
	if errno = store(data); errno != 0 {
		return errno, false
	}
	v.opened = rev
	s.m.Store(ino, v)
	if s.primes != nil {
		s.primes.Add(1)
	}
	return 0, true
}

// OnForget releases what the mount remembers of the inode for the kernel (its last reported size and
// served revision) once the kernel has forgotten it: a walk over a large store must not leave an entry
// per file it ever looked at.
func (f *file) OnForget() { f.kernel.forget(f.ino) }

func (f *file) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	_, errno := f.getattr(ctx, fh, out)
	return errno
}

// getattr is Getattr, and also returns what the attributes came from.
func (f *file) getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) (Rendered, syscall.Errno) {
	r, n, err := statOf(ctx, f.body)
	if err != nil {
		f.src.Logf("%s: %v", f.what, err)
		return Rendered{}, failed(ctx, err)
	}
	size, mtime := f.attrsFor(r, n, fh)
	fillFile(&out.Attr, size, mtime, f.ino)
	if f.sess != "" {
		applyOwner(&out.Attr, f.src.Owner(f.sess))
	}
	f.kernel.reported(f.ino, size)
	out.SetTimeout(f.attrTimeout())
	return r, 0
}

// priming is what a lookup that reported n bytes from r hands to the kernel's page cache (primer.go): a
// session's whole view, small, of the artifact this inode belongs to — r's bytes when it has them, else
// (a size from the persistent index) the bytes the index keeps, read by the primer, never rendered.
func (f *file) priming(r Rendered, n int64) (priming, bool) {
	known, isView := f.body.(knownContent)
	if !isView || f.volatile || f.stale(r) || r.Revision == "" || n <= 0 || n > primeMax {
		return priming{}, false
	}
	j := priming{kernel: f.kernel, ino: f.ino, rev: r.Revision, store: func(b []byte) syscall.Errno { return f.WriteCache(0, b) }}
	switch {
	case int64(len(r.Data)) == n:
		j.data = r.Data
	case r.Data == nil && r.Blob == nil && r.Sum != "":
		rev := r.Revision
		j.fetch = func() []byte {
			k, ok := known.kept(oneRequest(context.Background()))
			if !ok || k.Revision != rev || f.stale(k) || int64(len(k.Data)) != n {
				return nil
			}
			return k.Data
		}
	default:
		return priming{}, false
	}
	return j, true
}

// attrTimeout is how long the kernel may keep the file's attributes.
func (f *file) attrTimeout() time.Duration {
	_, attr := f.src.Timeouts()
	if f.stable && !f.volatile {
		_, attr = f.src.StableTimeouts()
	}
	return attr
}

// writes reports whether open flags ask for writing; the kernel's read-only mount refuses those before
// they reach dshfs, and the nodes refuse them too rather than trust that.
func writes(flags uint32) bool {
	return flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND) != 0
}

func (f *file) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	ctx = oneRequest(ctx)
	if f.sess != "" {
		if errno := f.src.PermitSession(ctx, f.sess); errno != 0 {
			return nil, 0, errno
		}
	}
	if writes(flags) {
		if f.src.Writer() != nil {
			return nil, 0, syscall.EACCES // a view on a writable mount: only ctl and append take writes
		}
		return nil, 0, syscall.EROFS
	}
	var r Rendered
	n := int64(-1)
	if known, ok := f.body.(knownContent); ok && !f.volatile {
		// What a stat knows may be enough: a rendering cached at this revision, or — from the persistent
		// index — the size and checksum of the bytes the kernel's page cache already holds, when the
		// previous open served this very revision. Then the bytes are read only if the kernel asks for a
		// page it no longer has: a repeated grep over a large store reads no view from disk.
		if a, size, err := known.attr(ctx); err == nil && !f.stale(a) && (a.Data != nil || a.Blob != nil || a.Sum != "") {
			r, n = a, size
		}
	}
	lazy := r.Data == nil && r.Blob == nil
	if n < 0 || (lazy && !f.kernel.keeps(f.ino, r.Revision, n)) {
		var err error
		if r, err = f.body.render(ctx); err != nil {
			f.src.Logf("%s: %v", f.what, err)
			return nil, 0, failed(ctx, err)
		}
		n, lazy = r.Size(), false
	}
	if !f.stale(r) {
		f.mu.Lock()
		f.last = attrs{size: n, mtime: r.ModTime, ok: true}
		f.mu.Unlock()
	}
	open := f.kernel.openFlags(f.ino, r.Revision, n)
	if f.volatile {
		open = fuse.FOPEN_DIRECT_IO
	}
	h := &handle{b: bodyOf(r), gen: r.Identity, src: f.body, what: f.what, log: f.src.Logf}
	if lazy {
		h.lazy = &snapshot{rev: r.Revision, size: n, sum: r.Sum}
	}
	return h, open | noFlush, 0
}

// noFlush is in the flags of every open of a file that takes no writes (views, store/ and spill/ files):
// the kernel then sends no FLUSH when a descriptor is closed (FOPEN_NOFLUSH, Linux 5.16 and later; older
// kernels ignore it). Only append acts on a FLUSH, and a FLUSH is a round trip the closing process waits
// for: a repeated grep -l over 10k sessions of a writable mount spent about a third of its time in them.
const noFlush = fuse.FOPEN_NOFLUSH

func (f *file) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h, ok := fh.(*handle)
	if !ok {
		return nil, syscall.EBADF
	}
	data, errno := h.read(ctx, dest, off)
	if errno != 0 {
		return nil, errno
	}
	return fuse.ReadResultData(data), 0
}

// handle is one open snapshot. A read past its end looks at the current rendering and, when the snapshot
// is a prefix of it (the log grew), continues with the longer bytes — so `tail -f` follows appends on one
// descriptor, while bytes already read never change under a reader.
//
// A handle opened on the kernel's kept page cache starts without its bytes (lazy): it knows the revision,
// size and checksum it was opened at, and renders only when the kernel asks for a page after all. What it
// then renders is served only if it is those bytes (the same revision, or a later one of which the opened
// bytes are a checksummed prefix); otherwise the read fails rather than mix two revisions in one file.
type handle struct {
	mu   sync.Mutex
	b    body
	lazy *snapshot // set until the bytes are loaded
	gen  string    // the artifact identity b was rendered from: a replaced artifact is never followed
	src  content   // what the handle renders again when it must (a lazy load, a read past its end)
	what string
	log  func(format string, args ...any)
}

// snapshot is what a lazy handle was opened at.
type snapshot struct {
	rev  string
	size int64
	sum  string // SHA-256 (hex) of the size bytes
}

// body is the bytes a handle serves: in memory, or in a Blob (a large view, read from its file as the
// kernel asks, so an open of it holds no copy).
type body struct {
	data []byte
	blob Blob
	sum  string // SHA-256 (hex) of the bytes when known ("" for most in-memory ones)
}

func bodyOf(r Rendered) body {
	if r.Blob != nil {
		return body{blob: r.Blob, sum: r.Sum}
	}
	return body{data: r.Data}
}

func (b body) size() int64 {
	if b.blob != nil {
		return b.blob.Size()
	}
	return int64(len(b.data))
}

// prefix is b's first n bytes (n <= b.size()), whose checksum is sum ("" when unknown).
func (b body) prefix(n int64, sum string) body {
	if b.blob != nil {
		return body{blob: io.NewSectionReader(b.blob, 0, n), sum: sum}
	}
	return body{data: b.data[:n:n], sum: sum}
}

// prefixSum is the SHA-256 (hex) of b's first n bytes (n <= b.size()).
func (b body) prefixSum(n int64) (string, error) {
	if n == b.size() && b.sum != "" {
		return b.sum, nil
	}
	if b.blob == nil {
		return sha256Hex(b.data[:n]), nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(b.blob, 0, n)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// extends reports whether next starts with all of b's bytes.
func (b body) extends(next body) bool {
	n := b.size()
	if next.size() < n {
		return false
	}
	if sameStart(b, next) {
		return true
	}
	if b.blob == nil && next.blob == nil {
		return bytes.HasPrefix(next.data, b.data)
	}
	mine, err := b.prefixSum(n)
	if err != nil {
		return false
	}
	theirs, err := next.prefixSum(n)
	return err == nil && mine == theirs
}

// sameStart reports whether a and b are views of the same bytes from the same start: one array in
// memory, or one open file from offset 0. The bytes a rendering was served with are never written again —
// a live session's growing rendering (viewcache/grow.go) only appends past every length it served, and a
// view file is renamed over, never rewritten — so the shorter is then the longer's prefix without a
// comparison: `tail -f` of a large live session on one descriptor costs each read its new bytes, not a
// pass over all of them.
func sameStart(a, b body) bool {
	switch {
	case a.blob == nil && b.blob == nil:
		return len(a.data) > 0 && len(b.data) > 0 && &a.data[0] == &b.data[0]
	case a.blob != nil && b.blob != nil:
		fa, fb := blobFile(a.blob), blobFile(b.blob)
		return fa != nil && fa == fb
	}
	return false
}

// blobFile is the open file a Blob reads from offset 0 of, through sections each from 0; nil when it is
// anything else.
func blobFile(b Blob) *os.File {
	var r io.ReaderAt = b
	for {
		switch s := r.(type) {
		case *os.File:
			return s
		case *io.SectionReader:
			outer, off, _ := s.Outer()
			if off != 0 {
				return nil
			}
			r = outer
		default:
			return nil
		}
	}
}

// readAt returns up to len(dest) bytes from off (fewer at the end).
func (b body) readAt(dest []byte, off int64) ([]byte, error) {
	size := b.size()
	if off >= size {
		return nil, nil
	}
	if end := off + int64(len(dest)); end > size {
		dest = dest[:size-off]
	}
	if b.blob == nil {
		return b.data[off : off+int64(len(dest))], nil
	}
	n, err := b.blob.ReadAt(dest, off)
	if n == len(dest) {
		err = nil // io.ReaderAt may report io.EOF with the last byte
	}
	return dest[:n], err
}

func (h *handle) size() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lazy != nil {
		return h.lazy.size
	}
	return h.b.size()
}

// load renders a lazy handle's bytes; the caller holds h.mu.
func (h *handle) load(ctx context.Context) syscall.Errno {
	s := h.lazy
	r, err := h.src.render(ctx)
	if err != nil {
		h.log("%s: %v", h.what, err)
		return failed(ctx, err)
	}
	now := bodyOf(r)
	switch n := now.size(); {
	case r.Revision == s.rev && n == s.size:
	case r.Identity == h.gen && n >= s.size && h.prefixIs(now, s):
		// the log grew since the open: the opened bytes are its prefix
	default:
		h.log("%s: changed since it was opened and no longer holds the bytes opened (revision %s); reopen it", h.what, s.rev)
		return syscall.EIO
	}
	h.b, h.lazy = now.prefix(s.size, s.sum), nil
	return 0
}

// prefixIs reports whether now's first s.size bytes have the checksum the handle was opened with.
func (h *handle) prefixIs(now body, s *snapshot) bool {
	sum, err := now.prefixSum(s.size)
	if err != nil {
		h.log("%s: %v", h.what, err)
	}
	return err == nil && sum == s.sum
}

func (h *handle) read(ctx context.Context, dest []byte, off int64) ([]byte, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lazy != nil {
		if errno := h.load(ctx); errno != 0 {
			return nil, errno
		}
	}
	if off+int64(len(dest)) > h.b.size() {
		if r, err := h.src.render(ctx); err == nil && r.Identity == h.gen && r.Size() > h.b.size() {
			if next := bodyOf(r); h.b.extends(next) {
				h.b = next
			}
		}
	}
	data, err := h.b.readAt(dest, off)
	if err != nil {
		h.log("%s: %v", h.what, err)
		return nil, eventstore.ReadErrno(err)
	}
	return data, 0
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// failed is the errno of a request whose content could not be had because of err: EINTR when the request
// was interrupted (the reader got a signal, and the kernel asked to give the request up: the reply the FUSE
// protocol expects then, which a reader that restarts its read never sees), else the read failure table's.
func failed(ctx context.Context, err error) syscall.Errno {
	if ctx.Err() != nil {
		return syscall.EINTR
	}
	return eventstore.ReadErrno(err)
}
