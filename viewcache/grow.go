package viewcache

import (
	"context"
	"errors"
	"hash/fnv"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/dshfs/dshfs/views"
)

// Incremental views of a live session. Each accepted batch gives a live session a new revision, and every
// view of it was rendered again at the next read: `tail -f` of a large live session cost a rendering of
// the whole view per batch. The views that grow by appends (views.Growable) are instead kept as a
// growing rendering: the bytes rendered at an earlier revision of the same engine, extended with what the
// events accepted since add (views.Session.Extend). A rendering served at one revision is a prefix of
// every later one and its bytes never change, so readers holding it (an open file, `tail -f` on one
// descriptor) are never disturbed; a batch that rewrites the view (a compaction or prune in
// surface.jsonl or messages.jsonl) is rendered whole, into a new growing rendering.
//
// A growing rendering lives in memory while it is shorter than blobMin, then in a file of its own,
// unlinked at once (the cache directory's, else the system's temporary directory), so that a large live
// session's events.jsonl is not held on the heap: the view LRU counts it as a Blob and evicts it like
// one, after which the next read renders it whole again.

// Work counts what the cache rendered: whole renderings and their bytes, extensions of growing
// renderings and the bytes they added. Tests read it to show that a batch appended to a live session
// costs in proportion to the batch, not to the session.
type Work struct {
	Renders       int64 // views rendered whole
	RenderedBytes int64 // the bytes of those renderings
	Extends       int64 // growing renderings extended by a batch
	ExtendedBytes int64 // the bytes those extensions added
}

// work is Work as the cache counts it.
type work struct {
	renders, renderedBytes, extends, extendedBytes atomic.Int64
}

func (w *work) rendered(n int64) {
	w.renders.Add(1)
	w.renderedBytes.Add(n)
}

// Work is what the cache has rendered so far.
func (c *Cache) Work() Work {
	return Work{Renders: c.work.renders.Load(), RenderedBytes: c.work.renderedBytes.Load(),
		Extends: c.work.extends.Load(), ExtendedBytes: c.work.extendedBytes.Load()}
}

// growing is one growing rendering: the bytes so far, in memory or in an unlinked file, and the reach of
// the snapshot they render (views.Reach). It is extended under its stripe of Cache.grow only; its readers hold the
// Rendered of one moment, whose bytes are never written again.
type growing struct {
	dir   string   // where its file is made ("" for the system's temporary directory)
	data  []byte   // the bytes while in memory
	file  *os.File // the bytes once past blobMin
	buf   []byte   // written to file at the next flush
	size  int64
	reach views.Reach
}

func (g *growing) Write(p []byte) (int, error) {
	if g.file == nil && g.size+int64(len(p)) < blobMin {
		g.data = append(g.data, p...)
		g.size += int64(len(p))
		return len(p), nil
	}
	if g.file == nil {
		f, err := os.CreateTemp(g.dir, "live.tmp-*")
		if err != nil {
			return 0, err
		}
		os.Remove(f.Name()) // nothing on disk outlives the process; the open file keeps the bytes
		g.file, g.buf, g.data = f, g.data, nil
	}
	g.buf = append(g.buf, p...)
	g.size += int64(len(p))
	if len(g.buf) >= viewWriteBuffer {
		return len(p), g.flush()
	}
	return len(p), nil
}

// flush writes out what is buffered for the file.
func (g *growing) flush() error {
	if g.file == nil || len(g.buf) == 0 {
		return nil
	}
	off := g.size - int64(len(g.buf))
	if _, err := g.file.WriteAt(g.buf, off); err != nil {
		return err
	}
	g.buf = g.buf[:0]
	return nil
}

// rendered is the bytes so far as a Rendered (in memory: a slice no later extension writes into; in the
// file: a Blob of the current size, which later extensions only lengthen the file past).
func (g *growing) rendered() (Rendered, error) {
	if err := g.flush(); err != nil {
		return Rendered{}, err
	}
	if g.file != nil {
		return Rendered{Blob: io.NewSectionReader(g.file, 0, g.size)}, nil
	}
	return Rendered{Data: g.data[:g.size:g.size]}, nil
}

// counted counts the bytes written through it.
type counted struct {
	w io.Writer
	n int64
}

func (c *counted) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// live answers a growable view of a live session (views.Growable; k.Live): the kept rendering when it is
// at k.Revision, else that rendering extended by the events accepted since, else a new growing rendering
// of the whole view. ok is false when the snapshot's view cannot grow (Get renders it as any other).
func (c *Cache) live(ctx context.Context, k Key) (r Rendered, ok bool, err error) {
	e, err := c.entry(ctx, k)
	if err != nil {
		return Rendered{}, true, err
	}
	if _, growable := e.sess.Reach(k.View); !growable || e.rev != k.Revision {
		return Rendered{}, false, nil
	}
	mu := c.growLock(k.Session, k.View)
	mu.Lock()
	defer mu.Unlock()
	if r, ok := c.lru.view(k.Session, k.Revision, k.View); ok {
		r.Identity = k.Revision.Identity
		return r, true, nil // another reader extended it meanwhile
	}
	if g := c.lru.growing(k.Session, k.View); g != nil {
		w := &counted{w: g}
		next, ok, err := e.sess.Extend(w, k.View, g.reach)
		if ok && err == nil {
			g.reach = next
			c.work.extends.Add(1)
			c.work.extendedBytes.Add(w.n)
			return c.keepGrowing(e, k, g)
		}
		if ok {
			// the writer failed part way: the rendering no longer matches its reach, so it is not used again
			c.lru.dropGrowing(k.Session, k.View)
		}
		if ok || (g.reach.Of(e.sess) && g.reach.Events() > e.sess.EventCount()) {
			// an older snapshot than the rendering (a reader that asked before the last batch), or a failed
			// extension: rendered whole, apart from the growing rendering, which stays for the next batch
			data, err := e.sess.Render(ctx, k.View)
			if err != nil {
				return Rendered{}, true, err
			}
			c.work.rendered(int64(len(data)))
			return Rendered{Data: data, ModTime: e.mtime, Revision: k.Revision.String(), Identity: k.Revision.Identity}, true, nil
		}
	}
	reach, _ := e.sess.Reach(k.View)
	g := &growing{dir: c.spoolDir, reach: reach}
	w := &counted{w: g}
	if err := e.sess.WriteView(ctx, w, k.View); err != nil {
		if g.file != nil {
			g.file.Close()
		}
		var we *views.WriteError
		if errors.As(err, &we) {
			return Rendered{}, false, nil // the spool could not take it: rendered in memory instead
		}
		return Rendered{}, true, err
	}
	c.work.rendered(w.n)
	return c.keepGrowing(e, k, g)
}

// growLock is the stripe of c.grow that orders the growing rendering of a session's view.
func (c *Cache) growLock(id string, view views.View) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(id))
	h.Write([]byte(view.String()))
	return &c.grow[h.Sum32()%uint32(len(c.grow))]
}

// keepGrowing keeps g's bytes now as the view's rendering at k.Revision.
func (c *Cache) keepGrowing(e *cached, k Key, g *growing) (Rendered, bool, error) {
	r, err := g.rendered()
	if err != nil {
		c.lru.dropGrowing(k.Session, k.View)
		return Rendered{}, false, nil
	}
	r.ModTime, r.Revision, r.Identity = e.mtime, k.Revision.String(), k.Revision.Identity
	c.lru.keepGrowing(k.Session, k.View, k.Revision, r, g)
	return r, true, nil
}
