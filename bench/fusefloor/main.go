// Command fusefloor serves the least a FUSE file system can: N files sessions/sNNNNN/events.jsonl of SIZE
// bytes each, from memory, with minute-long entry and attribute timeouts, every open kept in the page cache
// and without FLUSH (FOPEN_KEEP_CACHE | FOPEN_NOFLUSH). It measures what go-fuse and the kernel cost per
// file on this machine, without dshfs, for bench/floor.sh: a repeated grep -l over the mount then costs one
// OPEN and one RELEASE per file and nothing else. With -noopen it answers OPEN and FLUSH with ENOSYS, which
// makes the kernel stop sending them for the whole connection (zero-message opens: no OPEN, no RELEASE, no
// FLUSH), the one way to take those round trips away — at the price of every per-open state a file system
// keeps (dshfs's per-open snapshots, status.json's direct I/O, append's per-descriptor partial lines).
//
// Usage: fusefloor [-n 10000] [-size 12000] [-noopen] MOUNTPOINT (unmount with SIGTERM or SIGINT).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

var noOpen = flag.Bool("noopen", false, "answer OPEN and FLUSH with ENOSYS (zero-message opens)")

type file struct {
	fs.Inode
	data []byte
}

var (
	_ fs.NodeOpener    = (*file)(nil)
	_ fs.NodeGetattrer = (*file)(nil)
	_ fs.NodeReader    = (*file)(nil)
	_ fs.NodeFlusher   = (*file)(nil)
)

func (f *file) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if *noOpen {
		return nil, 0, syscall.ENOSYS
	}
	return nil, fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_NOFLUSH, 0
}

func (f *file) Flush(ctx context.Context, fh fs.FileHandle) syscall.Errno {
	if *noOpen {
		return syscall.ENOSYS
	}
	return 0
}

func (f *file) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = 0o444
	out.Size = uint64(len(f.data))
	out.SetTimeout(time.Minute)
	return 0
}

func (f *file) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	end := min(off+int64(len(dest)), int64(len(f.data)))
	if off >= end {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(f.data[off:end]), 0
}

type root struct {
	fs.Inode
	n, size int
}

// OnAdd builds the whole tree up front: lookups then cost go-fuse's own work only.
func (r *root) OnAdd(ctx context.Context) {
	data := make([]byte, r.size)
	for i := range data {
		data[i] = 'a' + byte(i%26)
		if i%100 == 99 {
			data[i] = '\n'
		}
	}
	sessions := r.NewPersistentInode(ctx, &fs.Inode{}, fs.StableAttr{Mode: fuse.S_IFDIR})
	r.AddChild("sessions", sessions, false)
	for i := range r.n {
		dir := r.NewPersistentInode(ctx, &fs.Inode{}, fs.StableAttr{Mode: fuse.S_IFDIR})
		sessions.AddChild(fmt.Sprintf("s%05d", i), dir, false)
		dir.AddChild("events.jsonl", r.NewPersistentInode(ctx, &file{data: data}, fs.StableAttr{}), false)
	}
}

func main() {
	n := flag.Int("n", 10000, "files")
	size := flag.Int("size", 12000, "bytes per file")
	flag.Parse()
	if flag.NArg() != 1 {
		log.Fatal("usage: fusefloor [-n N] [-size BYTES] [-noopen] MOUNTPOINT")
	}
	timeout := time.Minute
	opts := &fs.Options{EntryTimeout: &timeout, AttrTimeout: &timeout}
	opts.DirectMount = os.Geteuid() == 0
	opts.MaxReadAhead = 1 << 20
	opts.FsName, opts.Name = "fusefloor", "fusefloor"
	server, err := fs.Mount(flag.Arg(0), &root{n: *n, size: *size}, opts)
	if err != nil {
		log.Fatal(err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sig; server.Unmount() }()
	server.Wait()
}
