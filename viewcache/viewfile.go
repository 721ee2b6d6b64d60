package viewcache

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/views"
)

// viewSink takes a rendering on its way into the index: it checksums it, keeps it in memory while it is
// shorter than blobMin (most views: one write at the end, and the bytes are kept inside the entry and
// served from memory), and from there writes it out to a file of its own (made by create when the view
// reaches blobMin) in viewWriteBuffer pieces. file is nil exactly while the view is shorter than blobMin.
//
// Its buffer comes from scratchBuffers and goes back there (release): a rendering arrives in two writes per
// event line, and a buffer grown by append from nothing for each view allocated five times the view's
// size — the largest part of what a first walk over a cold store allocated.
type viewSink struct {
	create func() (*os.File, error)
	file   *os.File
	sum    hash.Hash
	buf    []byte // the whole view while n < blobMin, then what is not yet written
	hashed int    // how much of buf sum has taken: it takes buf in bulk, not the rendering's small writes
	n      int64
	failed error // the file's creation or write error
}

// scratchBuffers holds the buffers of finished sinks and of entries written out, as *[]byte.
var scratchBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// getScratch is an empty buffer from scratchBuffers.
func getScratch() []byte { return (*scratchBuffers.Get().(*[]byte))[:0] }

// putScratch returns a buffer to scratchBuffers, unless it grew past what is worth keeping (a view rendered
// whole past blobMin); its bytes are not used after it.
func putScratch(b []byte) {
	if cap(b) <= 2*blobMin {
		b = b[:0]
		scratchBuffers.Put(&b)
	}
}

func newViewSink(create func() (*os.File, error)) *viewSink {
	return &viewSink{create: create, sum: sha256.New(), buf: getScratch()}
}

// release returns the buffer to scratchBuffers: the sink's bytes are not used after it.
func (s *viewSink) release() {
	putScratch(s.buf)
	s.buf = nil
}

func (s *viewSink) Write(p []byte) (int, error) {
	if s.failed != nil {
		return 0, s.failed
	}
	s.n += int64(len(p))
	if s.n < blobMin || len(s.buf)+len(p) < viewWriteBuffer {
		s.buf = append(s.buf, p...)
		return len(p), nil
	}
	if err := s.flush(); err != nil {
		return 0, err
	}
	if len(p) < viewWriteBuffer {
		s.buf = append(s.buf, p...)
		return len(p), nil
	}
	s.sum.Write(p)
	if _, err := s.file.Write(p); err != nil { // a view rendered whole arrives in one piece: no copy
		s.failed = err
		return 0, err
	}
	return len(p), nil
}

// checksum is the SHA-256 (hex) of everything written to the sink. A rendering arrives in two writes per
// event line, and the hash taking each of them on its own was most of the cost of checksumming it.
func (s *viewSink) checksum() string {
	s.sum.Write(s.buf[s.hashed:])
	s.hashed = len(s.buf)
	return hex.EncodeToString(s.sum.Sum(nil))
}

// flush writes out what is buffered, to the file it makes first if there is none yet.
func (s *viewSink) flush() error {
	if s.file == nil {
		f, err := s.create()
		if err != nil {
			s.failed = err
			return err
		}
		s.file = f
	}
	s.sum.Write(s.buf[s.hashed:])
	if _, err := s.file.Write(s.buf); err != nil {
		s.failed = err
		return err
	}
	s.buf, s.hashed = s.buf[:0], 0
	return nil
}

// fileStamp is a view file's stamp (eventstore.FileToken); "" where there is none, so the file is always
// hashed.
func fileStamp(info os.FileInfo) string {
	token, _ := eventstore.FileToken(info)
	return token
}

// viewPath is the file holding a view's bytes.
func (x *index) viewPath(id string, view views.View) string { return x.keyPath(x.key(id), view) }

// keyPath is the file holding a view's bytes of the session whose key is key.
func (x *index) keyPath(key string, view views.View) string {
	return filepath.Join(x.dir, key+"."+view.String())
}

// content returns a view's bytes at revision rev as the index keeps them, when they are still the bytes the
// entry names: kept inside the entry, checked against their checksum; in a file of their own, with the
// stamp the entry saw or else the same checksum (then the new stamp is remembered). A view of blobMin bytes
// or more comes back as a Blob over the open file.
func (x *index) content(id string, rev artifactRev, view views.View) (Rendered, bool) {
	return x.contentOf(id, x.entry(id, rev), view)
}

// contentHeld is content from an entry the index holds in memory, reading no entry from the pack.
func (x *index) contentHeld(id string, rev artifactRev, view views.View) (Rendered, bool) {
	return x.contentOf(id, x.held(id, rev), view)
}

func (x *index) contentOf(id string, e *indexEntry, view views.View) (Rendered, bool) {
	if e == nil || x.dir == "" {
		return Rendered{}, false
	}
	x.mu.Lock()
	rec, _ := e.views.get(view)
	x.mu.Unlock()
	var r Rendered
	ok := false
	switch rec.place {
	case inEntry:
		r, ok = x.inside(id, e, rec)
	case inFile:
		f, err := os.Open(x.viewPath(id, view))
		if err != nil {
			return Rendered{}, false
		}
		r, ok = x.verified(f, e, view, rec)
		if !ok || r.Blob == nil {
			f.Close()
		}
	}
	if ok {
		x.hits.Add(1)
	}
	return r, ok
}

// inside reads the bytes of a view kept inside the entry.
func (x *index) inside(id string, e *indexEntry, rec viewRec) (Rendered, bool) {
	r, ok := x.pack.known(x.key(id))
	if !ok {
		return Rendered{}, false
	}
	data := make([]byte, rec.size)
	if !x.pack.readAt(r, data, rec.off) || hexSum(data) != rec.sum {
		return Rendered{}, false
	}
	return Rendered{ModTime: e.mtime, Sum: rec.sum, Data: data}, true
}

// verified reads an open view file that should hold the bytes rec names, as its entry last saw it
// (rec.stamp).
func (x *index) verified(f *os.File, e *indexEntry, view views.View, rec viewRec) (Rendered, bool) {
	info, err := f.Stat()
	if err != nil || info.Size() != rec.size {
		return Rendered{}, false
	}
	r := Rendered{ModTime: e.mtime, Sum: rec.sum}
	var data []byte
	if rec.size < blobMin {
		data = make([]byte, rec.size)
		if _, err := io.ReadFull(f, data); err != nil {
			return Rendered{}, false
		}
	}
	if now := fileStamp(info); now == "" || now != rec.stamp {
		h := sha256.New()
		if data != nil {
			h.Write(data)
		} else if _, err := io.Copy(h, io.NewSectionReader(f, 0, rec.size)); err != nil {
			return Rendered{}, false
		}
		if hex.EncodeToString(h.Sum(nil)) != rec.sum {
			return Rendered{}, false
		}
		x.mu.Lock()
		if cur, ok := e.views.get(view); ok && cur.place == inFile && cur.sum == rec.sum {
			cur.stamp = now // verified: the next use need not hash it again
			e.views.set(cur)
		}
		x.mu.Unlock()
	}
	if data != nil {
		r.Data = data
	} else {
		r.Blob = io.NewSectionReader(f, 0, rec.size)
	}
	return r, true
}
