package jsonl

import (
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dshfs/dshfs/eventstore"
)

// openArtifact opens a transcript for reading so that nothing can block or escape: symlinks (of the file or
// of a directory on its path) are followed only when the target stays inside the store root (a link to
// /etc/shadow or /dev/zero is refused, not read), the open never waits (O_NONBLOCK: a FIFO would otherwise
// hang the open until a writer appears), and anything but a regular file — FIFO, device, socket, directory —
// is refused after an fstat. A refusal names the artifact and why; it is a store that cannot hold a log
// (reported like corruption), not a failure to read, which stays an *eventstore.IOError.
func (b *Backend) openArtifact(path string) (*os.File, fs.FileInfo, error) {
	refuse := func(why string) (*os.File, fs.FileInfo, error) {
		return nil, nil, fmt.Errorf("session artifact %s %s", jsonString(path), why)
	}
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		if li, lerr := os.Lstat(path); lerr == nil && li.Mode()&fs.ModeSymlink != 0 {
			return refuse("is a symlink that does not resolve (" + linkProblem(err) + ")")
		}
		return nil, nil, &eventstore.IOError{Err: err}
	}
	if !b.inRoot(target) {
		return refuse("resolves outside the store root (to " + jsonString(target) + "); it is not read")
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, &eventstore.IOError{Err: err}
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, &eventstore.IOError{Err: err}
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return refuse("is not a regular file (" + fileKind(fi.Mode()) + "); it is not read")
	}
	return f, fi, nil
}

// inRoot reports whether a resolved path lies inside the store root (itself resolved).
func (b *Backend) inRoot(target string) bool {
	rel, err := filepath.Rel(b.resolvedRoot(), target)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// resolvedRoot is the store root with its symlinks resolved, remembered once it exists (a root can be
// created after the backend is opened), so that every artifact open does not resolve it again.
func (b *Backend) resolvedRoot() string {
	if r := b.realRoot.Load(); r != nil {
		return *r
	}
	root, err := filepath.EvalSymlinks(b.root)
	if err != nil {
		return b.root
	}
	b.realRoot.Store(&root)
	return root
}

func linkProblem(err error) string {
	switch {
	case os.IsNotExist(err):
		return "dangling: its target does not exist"
	case strings.Contains(err.Error(), "too many links"), strings.Contains(err.Error(), "too many levels"):
		return "a symlink loop"
	}
	return err.Error()
}

func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	}
	return "mode " + m.String()
}

// readArtifact reads a whole transcript between two equal fstats of the open file (see stableRead).
func (b *Backend) readArtifact(path string) ([]byte, eventstore.Artifact, error) {
	if buf, art, ok := b.readDirect(path); ok {
		return buf, art, nil
	}
	var buf []byte
	art, err := b.stableRead(path, func(f *os.File, fi os.FileInfo) (err error) {
		buf, err = readAll(f, make([]byte, 0, fi.Size()+readSlack))
		if err != nil {
			return &eventstore.IOError{Err: err}
		}
		return nil
	})
	return buf, art, err
}

// stableRead runs read over the open transcript between two fstats, retrying while a writer changes it,
// so that what read took and the revision returned belong together. An error of read is returned only
// for a read of a file that did not change meanwhile (a changing file is read again first).
func (b *Backend) stableRead(path string, read func(f *os.File, fi os.FileInfo) error) (eventstore.Artifact, error) {
	for range 100 {
		f, fi, err := b.openArtifact(path)
		if err != nil {
			return eventstore.Artifact{}, err
		}
		before := artifactOf(fi)
		rerr := read(f, fi)
		fi, err = f.Stat()
		f.Close()
		if err != nil {
			return before, &eventstore.IOError{Err: err}
		}
		if after := artifactOf(fi); after.Token == before.Token {
			return after, rerr
		}
	}
	return eventstore.Artifact{}, &eventstore.IOError{Err: fmt.Errorf("%s keeps changing while it is read", path)}
}

func readAll(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// afterDirectLstat, when set (by tests), runs between readDirect's lstat of a file and its open, where a
// writer may change the file.
var afterDirectLstat func(path string)

// readDirect reads a transcript that is a regular file reached through real directories below the root,
// which cannot resolve outside it: an lstat of each directory below the root and of the file, an open that
// follows no link and waits for nothing, one read of the size the lstat saw, and an fstat that must find
// the same file unchanged (inode, size, mtime, ctime: the artifact's token). A first walk of a large store
// reads thousands of small artifacts, and resolving every path component and registering each descriptor
// with the runtime's poller were half of the system calls of each load. Anything else — a link, another
// kind of file, a file that changed or is being written, a failure — is ok false, and the careful read
// (openArtifact, stableRead) decides, with its refusals and errors.
func (b *Backend) readDirect(path string) ([]byte, eventstore.Artifact, bool) {
	return b.readDirectInto(path, nil)
}

// readDirectInto is readDirect reading into an offHeap, set in *into, when into is not nil: a mapping when
// the file is at least offHeapMin bytes, a pooled buffer when it is at most artifactPoolMax; when ok is
// false nothing stays mapped or taken from the pool.
func (b *Backend) readDirectInto(path string, into **offHeap) ([]byte, eventstore.Artifact, bool) {
	rel, err := filepath.Rel(b.root, path)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return nil, eventstore.Artifact{}, false
	}
	dir := b.root
	parts := strings.Split(rel, string(filepath.Separator))
	var st unix.Stat_t // not os.Lstat: a FileInfo for every directory of every load is garbage to collect
	for _, p := range parts[:len(parts)-1] {
		dir = filepath.Join(dir, p)
		if unix.Lstat(dir, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return nil, eventstore.Artifact{}, false
		}
	}
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, eventstore.Artifact{}, false
	}
	was, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || fi.Size() > math.MaxInt32 {
		return nil, eventstore.Artifact{}, false
	}
	if afterDirectLstat != nil {
		afterDirectLstat(path)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, eventstore.Artifact{}, false
	}
	defer unix.Close(fd)
	var buf []byte
	var mem *offHeap
	if into != nil && fi.Size() >= offHeapMin {
		if mem = mapOffHeap(int(fi.Size())); mem != nil {
			buf = mem.mem[:fi.Size()]
			defer func() {
				if *into != mem {
					mem.free()
				}
			}()
		}
	}
	if into != nil && mem == nil && fi.Size()+readSlack <= artifactPoolMax {
		mem = pooledOffHeap(int(fi.Size()))
		buf = mem.buf[:fi.Size()]
		defer func() {
			if *into != mem {
				mem.free()
			}
		}()
	}
	if buf == nil {
		buf = make([]byte, fi.Size(), fi.Size()+readSlack)
	}
	for n := 0; n < len(buf); {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || m <= 0 {
			return nil, eventstore.Artifact{}, false // shorter than it was, or unreadable: the careful read says
		}
		n += m
	}
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Dev != uint64(was.Dev) ||
		st.Ino != was.Ino || st.Size != was.Size || st.Mtim != unix.Timespec(was.Mtim) || st.Ctim != unix.Timespec(was.Ctim) {
		return nil, eventstore.Artifact{}, false
	}
	if mem != nil {
		*into = mem
	}
	return buf, artifactOf(fi), true
}

// readDecodeOnly is readArtifact for a load that reads the bytes only while it decodes them (a zstd log):
// a large file is read into an offHeap mapping (mem, nil for the heap), which the caller frees once the
// decode is done, handing pages back as it passes them (offHeap.releaseBefore).
func (b *Backend) readDecodeOnly(path string) (buf []byte, art eventstore.Artifact, mem *offHeap, err error) {
	if buf, art, ok := b.readDirectInto(path, &mem); ok {
		return buf, art, mem, nil
	}
	buf, art, err = b.readArtifact(path)
	return buf, art, nil, err
}

// offHeapMin is the size from which readDecodeOnly reads a file outside the Go heap: below it, the two
// system calls of a mapping cost more than the memory is worth. A variable so tests can use small files.
var offHeapMin int64 = 4 << 20

// offHeap holds an artifact's bytes where its load gives them back when it is done with them. A whole-load
// command paces no collection during its load (cmd/dshfs, wholeLoadCollector), so a large compressed
// artifact read onto the heap would stay in memory to the end of the load, an eighth of a 500k-event
// session's peak, though its frames are decoded long before: it is read into an anonymous mapping outside
// the heap, whose pages go back to the kernel as the decode passes them (releaseBefore), and the mapping
// when the load is done (free). A small one is read into a buffer that free hands back to a pool for the
// next load: a first walk over a large store reads thousands of artifacts of a few KB, and each made anew
// was garbage for the collector to chase. Either way nothing decoded aliases it: the load's events own
// copies of their bytes. Its methods do nothing on nil, the heap's case.
type offHeap struct {
	mem      []byte  // the whole mapping
	released int     // how many bytes at its start went back to the kernel
	buf      []byte  // a pooled buffer, instead of a mapping
	pooled   *[]byte // what free puts back in artifactPool
}

// readSlack is the room after an artifact's bytes that every read buffer has: the capacity the careful
// read gives its buffer.
const readSlack = 512

// artifactPoolMax is the largest buffer, slack included, that readDecodeOnly takes from artifactPool. A
// variable so tests can change it.
var artifactPoolMax int64 = 64 << 10

var artifactPool = sync.Pool{New: func() any { b := make([]byte, 0, 8<<10); return &b }}

// poisonPooled makes free overwrite a pooled buffer, so that a test sees any decoded bytes that still
// alias it.
var poisonPooled = false

// pooledOffHeap takes a buffer of at least n bytes and the read's slack from artifactPool.
func pooledOffHeap(n int) *offHeap {
	p := artifactPool.Get().(*[]byte)
	if cap(*p) < n+readSlack {
		*p = make([]byte, 0, n+readSlack)
	}
	return &offHeap{buf: (*p)[:cap(*p)], pooled: p}
}

// mapOffHeap maps room for n bytes and the careful read's slack; nil when the kernel refuses.
func mapOffHeap(n int) *offHeap {
	mem, err := unix.Mmap(-1, 0, n+readSlack, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil
	}
	return &offHeap{mem: mem}
}

// releaseBefore hands the whole pages before offset off back to the kernel: no reader of the mapping goes
// below off again. A page read after it reads as zeros, never as another's memory. A pooled buffer keeps
// its pages.
func (m *offHeap) releaseBefore(off int64) {
	if m == nil || m.mem == nil {
		return
	}
	end := int(off) &^ (os.Getpagesize() - 1)
	if end <= m.released || end > len(m.mem) {
		return
	}
	if unix.Madvise(m.mem[m.released:end], unix.MADV_DONTNEED) == nil {
		m.released = end
	}
}

// free unmaps the whole mapping, or puts the pooled buffer back; no reader may be left.
func (m *offHeap) free() {
	if m == nil {
		return
	}
	if m.mem != nil {
		unix.Munmap(m.mem)
		m.mem = nil
	}
	if m.pooled != nil {
		if poisonPooled {
			for i := range m.buf {
				m.buf[i] = 0xaa
			}
		}
		artifactPool.Put(m.pooled)
		m.buf, m.pooled = nil, nil
	}
}
