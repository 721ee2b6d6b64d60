package viewcache

import (
	"io"
	"time"
)

// Rendered is one view's bytes and the time of the last change it covers.
type Rendered struct {
	Data []byte
	// Blob holds the bytes instead of Data when they are in a file rather than in memory: a large view
	// kept by the persistent index (index.go), so that serving an 80 MB events.jsonl does not put 80 MB
	// on the heap. Sum is set with it.
	Blob     Blob
	ModTime  time.Time
	Revision string
	// Identity is the storage identity of the artifact the bytes were rendered from (Artifact.Identity);
	// "" when they come from no artifact.
	Identity string
	// Sum is the SHA-256 (hex) of the bytes at Revision when they are known without Data (an Attr
	// served from the persistent index); "" otherwise. An open that keeps the kernel's page cache need not
	// read the bytes, and a later read checks whatever it renders against it.
	Sum string
}

// Blob is bytes served from a file that does not change while it is held: Size bytes read with ReadAt
// (an *io.SectionReader over an open file is one).
type Blob interface {
	io.ReaderAt
	Size() int64
}

// Size is the number of bytes r holds.
func (r Rendered) Size() int64 {
	if r.Blob != nil {
		return r.Blob.Size()
	}
	return int64(len(r.Data))
}
