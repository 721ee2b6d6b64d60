package jsonl

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

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
	var buf []byte
	art, err := b.stableRead(path, func(f *os.File, fi os.FileInfo) (err error) {
		buf, err = readAll(f, make([]byte, 0, fi.Size()+512))
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
