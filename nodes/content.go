package nodes

import (
	"context"
	"errors"
	"time"

	"github.com/dshfs/dshfs/views"
)

// What a file serves. Each kind of read-only file is a content type: a session's view (whose size the
// caches may know without rendering), the root's README, status.json and stats.json, a session's parent,
// a compaction record, the spill index.

// content renders a file's bytes now.
type content interface {
	render(ctx context.Context) (Rendered, error)
}

// knownContent is content whose size and time the caches may know without rendering it (Source.Attr), and
// whose bytes they may keep (Source.Kept): a session's view. A stat of it need not decode the session, and
// a lookup answered from the index primes the kernel with the kept bytes (primer.go).
type knownContent interface {
	content
	attr(ctx context.Context) (Rendered, int64, error)
	kept(ctx context.Context) (Rendered, bool)
}

// statOf is what a GETATTR reports for c: its known size, or its rendering's.
func statOf(ctx context.Context, c content) (Rendered, int64, error) {
	if k, ok := c.(knownContent); ok {
		return k.attr(ctx)
	}
	r, err := c.render(ctx)
	return r, r.Size(), err
}

// sessionView is one view of a session, cached by revision (Source.Render).
type sessionView struct {
	src  Source
	id   string
	view views.View
}

func (v sessionView) render(ctx context.Context) (Rendered, error) {
	return v.src.Render(ctx, v.id, v.view)
}

// knownView is a session's whole view, whose size the caches and the persistent index know.
type knownView struct{ sessionView }

func (v knownView) attr(ctx context.Context) (Rendered, int64, error) {
	return v.src.Attr(ctx, v.id, v.view)
}

func (v knownView) kept(ctx context.Context) (Rendered, bool) { return v.src.Kept(ctx, v.id, v.view) }

// readme is the root README: static text, dated like the store.
type readme struct {
	src  Source
	text []byte
}

func (r readme) render(context.Context) (Rendered, error) {
	return Rendered{Data: r.text, ModTime: r.src.Listing().ModTime}, nil
}

// storeStatus is the root status.json.
type storeStatus struct{ src Source }

func (s storeStatus) render(ctx context.Context) (Rendered, error) {
	return Rendered{Data: s.src.StoreStatus(ctx), ModTime: s.src.Listing().ModTime}, nil
}

// errGone is the reading of an index page past the last: the store shrank since the root was listed.
var errGone = errors.New("that index page no longer exists: the store holds fewer sessions now")

// storeIndex is a page of the root index (index.html, index-2.html, …).
type storeIndex struct {
	src  Source
	page int
}

func (s storeIndex) render(ctx context.Context) (Rendered, error) {
	b, ok := s.src.StoreIndex(ctx, s.page)
	if !ok {
		return Rendered{}, errGone
	}
	return Rendered{Data: b, ModTime: s.src.Listing().ModTime}, nil
}

// storeStats is the root stats.json: the mount's cache counters.
type storeStats struct{ src Source }

func (s storeStats) render(ctx context.Context) (Rendered, error) {
	return Rendered{Data: s.src.StoreStats(ctx), ModTime: s.src.Listing().ModTime}, nil
}

// fixed is bytes known when the file was listed (a session's parent: the id its header names).
type fixed struct {
	data  []byte
	mtime time.Time
}

func (f fixed) render(context.Context) (Rendered, error) {
	return Rendered{Data: f.data, ModTime: f.mtime}, nil
}

// compactionRecord is compactions/<id>.json of the current snapshot, dated and versioned like the
// compactions view it is a line of.
type compactionRecord struct {
	src Source
	id  string
	cid string
}

func (c compactionRecord) render(ctx context.Context) (Rendered, error) {
	r, err := c.src.Render(ctx, c.id, views.Compactions)
	if err != nil {
		return Rendered{}, err
	}
	s, err := loaded(ctx, c.src, c.id)
	if err != nil {
		return Rendered{}, err
	}
	b, err := s.CompactionRecord(c.cid)
	if err != nil {
		return Rendered{}, err
	}
	return Rendered{Data: b, ModTime: r.ModTime, Revision: r.Revision}, nil
}

// spillIndex is spill/index.json, never cached: presence is a property of files outside the store.
type spillIndex struct {
	src Source
	id  string
}

func (x spillIndex) render(ctx context.Context) (Rendered, error) {
	s, err := loaded(ctx, x.src, x.id)
	if err != nil {
		return Rendered{}, err
	}
	b, mtime, err := s.SpillIndex()
	if err != nil {
		return Rendered{}, err
	}
	return Rendered{Data: b, ModTime: mtime}, nil
}

// loaded is a readable session's snapshot; a refused one is an error for the files and directories below
// it.
func loaded(ctx context.Context, src Source, id string) (*views.Session, error) {
	s, err := src.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	if s.Refusal != nil {
		return nil, s.Refusal
	}
	return s, nil
}
