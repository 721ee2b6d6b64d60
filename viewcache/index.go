package viewcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dshfs/dshfs/views"
)

// The persistent per-revision index (issue: read path at scale; its file formats are in doc.go). Getting the exact size of a session's
// view means rendering it, and rendering means decoding and validating the whole session; a stat of every
// events.jsonl of a large store (ls -l, rsync, find -size) would decode every session again after the
// caches evicted it, or after a remount. So the mount remembers, per session and per artifact revision,
// that the session reads (is not refused) and the size and time of each whole view it rendered — in
// memory, and in an entry per session in the store's pack file under the cache directory ([cache] dir,
// default $XDG_CACHE_HOME/dshfs; pack.go), so a remount or an evicted session is warm.
//
// The rendered bytes of those views are kept too: with the small default memory budgets a 10k-session
// store's views do not fit in memory, and a repeated grep would otherwise decode every session again. A view
// shorter than blobMin (nearly all of them) is kept inside its session's entry, after the entry's text: the
// first read of a session then costs one append to the pack and no file created (a walk over a cold
// 10k-session store spent a quarter of its time creating and renaming files). A view of blobMin bytes or more is
// rendered straight into a file of its own (a temporary one, renamed into place) and served from that file
// rather than from memory: the events view of a 500k-event session is 80 MB, which would otherwise sit on
// the heap beside the decoded session. The kernel's page cache, not the mount's heap, keeps the hot ones.
// The cache directory can be deleted at any time (it is rebuilt as sessions are read).
//
// Every kept view is named in the entry with its size and SHA-256, and served only while it has them. A
// view inside the entry is hashed each time it is read back (it is small). A view file is served without
// hashing while it has the stamp (device, inode, size, mtime, ctime) the entry saw when it was written or
// last verified; a file whose stamp differs — rewritten in place, replaced, copied — is hashed again and
// served only if the checksum still matches; no one can set a file's ctime, so an unchanged stamp means
// unchanged bytes. Entries are appended to the pack (the checksums make a torn or mixed one harmless);
// view files are renamed over, never rewritten, because a reader may hold one open.
//
// An entry is trusted only for the revision it was written at: the artifact's token (JSONL:
// dev:ino:size:mtime:ctime, so an artifact replaced by one of the same size and mtime is a new revision
// through its inode and ctime; SQLite: the session's incarnation and revision) and its storage identity.
// An entry that does not parse, whose checksum does not match or that names another session is ignored and
// written again by the next rendering: a corrupt or stale entry is never served. Sizes are only served when
// no rendering is cached; reading a file always renders it, so the index can make a stat wrong only if
// the checksum is forged — and even then a read returns the true bytes.

// indexed views: whole views whose bytes depend only on the stored log (not status.json, whose results
// change without a new revision, and not the spill index, whose truth lives outside the store).
var indexed = map[views.View]bool{views.Events: true, views.Raw: true, views.Header: true,
	views.Surface: true, views.Messages: true, views.Shadowed: true}

// Indexed reports whether the index keeps view v (whatever the cache's configuration): the views whose
// bytes depend only on the stored log.
func Indexed(v views.View) bool { return indexed[v] }

const indexMagic = "dshfs-index 4"

// headerRead is the first read of an entry, and headerMax the most its text may take (a few hundred
// bytes per view, and a session id no longer than a file name); the bytes of the views kept inside it
// follow.
const (
	headerRead = 4 << 10
	headerMax  = 16 << 10
)

// blobMin is the size from which a view is served from a file of its own instead of from memory (and kept
// inside its entry below it): below it a copy on the heap is cheaper than a file read per request, above it
// the copy is what breaks the mount's memory bound.
const blobMin = 1 << 20

// viewWriteBuffer is the buffer between a rendering (two writes per event line) and its file.
const viewWriteBuffer = 256 << 10

// index is the in-memory copy of the entries and the directory they persist in ("" when disabled).
type index struct {
	dir  string
	salt string // the store and the limits (indexSalt), part of each file's name: one directory, many stores
	pack *pack  // the entries' file (nil when disabled)

	mu      sync.Mutex
	entries map[string]*indexEntry // by session id; at most maxEntries (the pack has them all)
	max     int                    // maxEntries (tests lower it)
	// files orders the writes of entries and the renames of view files, so that an entry never names the
	// stamp of a file another writer has since renamed over it, and the bytes an entry carries over from
	// its record are the ones this process last wrote there
	files sync.Mutex

	hits atomic.Int64 // stats served from the index (stats.json "indexHits")

	// entryFiles are the keys of the entry files of earlier versions in the directory (dropEntryFile),
	// listed at the first use; under files
	entryFiles map[string]bool
}

// place is where the index keeps a view's bytes.
type place int8

const (
	inMemory place = iota // nowhere: the index directory could not take them (only the size is known)
	inEntry               // inside the entry, from off (in its record's body)
	inFile                // in the view's own file (viewPath)
)

// viewRec is what an entry knows of one view.
type viewRec struct {
	view  views.View
	size  int64
	sum   string // SHA-256 (hex) of the view's bytes
	place place
	off   int64  // inEntry: where the bytes start in the entry
	stamp string // inFile: the file's stamp (fileStamp) when written or last verified; "" unknown
}

// artifactRev is the revision an entry is trusted for: the artifact's token (eventstore.Artifact.Token,
// which changes with every change to the stored log) and its storage identity. It leaves out what changes
// without a new artifact (a live engine's durable and pending counts, the results generation): a live
// session is never indexed, and the indexed views do not depend on the results. An entry names both in
// lines of their own, so no separator has to be kept out of either.
type artifactRev struct{ artifact, identity string }

// indexEntry is one session at one revision.
type indexEntry struct {
	rev   artifactRev
	mtime time.Time
	views viewRecs
}

// viewRecs is what an entry knows of its views, a record per view, in no order. A session has at most six
// indexed views, and most entries hold one: a map per entry made the in-memory index about 1.4 KB per
// session (14 MB after a walk of 10k sessions, all of it scanned by every collection).
type viewRecs []viewRec

// get is view v's record.
func (rs viewRecs) get(v views.View) (viewRec, bool) {
	for _, r := range rs {
		if r.view == v {
			return r, true
		}
	}
	return viewRec{}, false
}

// set records r for its view, replacing the view's record if there is one.
func (rs *viewRecs) set(r viewRec) {
	for i := range *rs {
		if (*rs)[i].view == r.view {
			(*rs)[i] = r
			return
		}
	}
	*rs = append(*rs, r)
}

// del drops view v's record.
func (rs *viewRecs) del(v views.View) {
	*rs = slices.DeleteFunc(*rs, func(r viewRec) bool { return r.view == v })
}

// entryOrder is the order of an entry's view lines, and of the bytes kept after them.
var entryOrder = []views.View{views.Header, views.Raw, views.Events, views.Surface, views.Messages, views.Shadowed}

func newEntry(rev artifactRev, mtime time.Time) *indexEntry {
	return &indexEntry{rev: rev, mtime: mtime}
}

func newIndex(dir, salt string) *index {
	x := &index{dir: dir, salt: salt, entries: map[string]*indexEntry{}, max: maxEntries}
	if dir != "" {
		sum := sha256.Sum256([]byte("pack\x00" + salt))
		x.pack = newPack(filepath.Join(dir, hex.EncodeToString(sum[:16])+".pack"))
	}
	return x
}

// key names session id in the index: its record's key in the pack, and the start of its view files' names.
// It hashes the salt and the id (ids may hold any character).
func (x *index) key(id string) string {
	sum := sha256.Sum256([]byte(x.salt + "\x00" + id))
	return hex.EncodeToString(sum[:16])
}

// size returns a view's size, time and checksum (SHA-256, hex) at revision rev, if the index holds it,
// and counts the hit.
func (x *index) size(id string, rev artifactRev, view views.View) (int64, time.Time, string, bool) {
	n, mtime, sum, ok := x.lookup(id, rev, view)
	if ok {
		x.hits.Add(1)
	}
	return n, mtime, sum, ok
}

// lookup is size without counting a hit (readahead asks whether there is work to do).
func (x *index) lookup(id string, rev artifactRev, view views.View) (int64, time.Time, string, bool) {
	e := x.entry(id, rev)
	if e == nil {
		return 0, time.Time{}, "", false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	r, ok := e.views.get(view)
	return r.size, e.mtime, r.sum, ok
}

// reads reports whether the index knows that session id reads (is not refused) at revision rev.
func (x *index) reads(id string, rev artifactRev) bool {
	if x.entry(id, rev) != nil {
		x.hits.Add(1)
		return true
	}
	return false
}

// entry is session id's entry at rev, from memory or from its file.
func (x *index) entry(id string, rev artifactRev) *indexEntry {
	if e := x.held(id, rev); e != nil || rev.artifact == "" || x.dir == "" {
		return e
	}
	e := x.load(id)
	if e == nil || e.rev != rev {
		return nil
	}
	x.mu.Lock()
	x.entries[id] = e
	x.boundLocked()
	x.mu.Unlock()
	return e
}

// held is session id's entry at rev if the index holds it in memory (nil for an empty rev).
func (x *index) held(id string, rev artifactRev) *indexEntry {
	if rev.artifact == "" {
		return nil
	}
	x.mu.Lock()
	e := x.entries[id]
	x.mu.Unlock()
	if e != nil && e.rev == rev {
		return e
	}
	return nil
}

// remember records in memory a view rendered in memory, of a session that reads, at revision rev: the
// index directory is disabled, or could not take the view (write said so), so no file holds its bytes.
func (x *index) remember(id string, rev artifactRev, view views.View, data []byte, mtime time.Time) {
	if rev.artifact == "" || !indexed[view] {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.current(id, rev, mtime).views.set(viewRec{view: view, size: int64(len(data)), sum: hexSum(data), place: inMemory})
}

// current is session id's in-memory entry at rev, replaced by an empty one when it is of another
// revision; the caller holds x.mu.
func (x *index) current(id string, rev artifactRev, mtime time.Time) *indexEntry {
	e := x.entries[id]
	if e == nil || e.rev != rev {
		e = newEntry(rev, mtime)
		x.entries[id] = e
		x.boundLocked()
	}
	return e
}

// maxEntries bounds the entries the index keeps in memory. The pack keeps them all, and loading one again
// costs a read of a few KB; without a bound the index would grow with the store (about 300 bytes a
// session), whatever the budgets.
const maxEntries = 16384

// boundLocked drops entries past x.max, down to seven eighths of it, in the map's order (a random one: no
// order to keep up on every use). A dropped entry is loaded again from the pack when asked for; one whose
// views the pack could not take is rendered again. The caller holds x.mu.
func (x *index) boundLocked() {
	if len(x.entries) <= x.max {
		return
	}
	for id := range x.entries {
		delete(x.entries, id)
		if len(x.entries) <= x.max*7/8 {
			return
		}
	}
}

// write renders a view of a session that reads, at revision rev, into the index (render writes the
// bytes), and records it in the entry. A view shorter than blobMin is kept inside the entry (in the pack)
// and comes back in memory; a longer one is written to its own file as it is rendered and comes back as a Blob over
// that file. ok is false when the index directory could not take the view (disabled, full, unwritable):
// then nothing was recorded and the caller renders in memory. err is render's own failure.
func (x *index) write(id string, rev artifactRev, view views.View, mtime time.Time, render func(io.Writer) error) (r Rendered, ok bool, err error) {
	if x.dir == "" || rev.artifact == "" || !indexed[view] {
		return r, false, nil
	}
	path := x.viewPath(id, view)
	sink := newViewSink(func() (*os.File, error) { return os.CreateTemp(x.dir, filepath.Base(path)+".tmp-*") })
	keep, renamed := false, false
	defer func() {
		sink.release()
		if sink.file != nil && !keep {
			sink.file.Close()
		}
		if sink.file != nil && !renamed {
			os.Remove(sink.file.Name())
		}
	}()
	if err := render(sink); err != nil {
		if sink.failed != nil {
			return r, false, nil
		}
		return r, true, err
	}
	sum := sink.checksum()
	r = Rendered{ModTime: mtime, Sum: sum}
	if sink.file == nil { // shorter than blobMin
		r.Data = bytes.Clone(sink.buf)
		x.keepInEntry(id, rev, view, mtime, r.Data, sum)
		return r, true, nil
	}
	if sink.flush() != nil {
		return Rendered{}, false, nil
	}

	x.files.Lock()
	defer x.files.Unlock()
	tmp := sink.file
	if os.Rename(tmp.Name(), path) != nil {
		return Rendered{}, false, nil
	}
	renamed = true
	info, err := tmp.Stat() // after the rename, which changes the ctime
	if err != nil {
		os.Remove(path)
		return Rendered{}, false, nil
	}
	x.mu.Lock()
	e := x.current(id, rev, mtime)
	e.views.set(viewRec{view: view, size: sink.n, sum: sum, place: inFile, stamp: fileStamp(info)})
	x.mu.Unlock()
	x.persistLocked(id, e, view, nil)

	keep = true // the Blob reads the file through tmp, closed when the Blob is collected
	r.Blob = io.NewSectionReader(tmp, 0, sink.n)
	return r, true, nil
}

// keepInEntry records a view shorter than blobMin in session id's entry and appends the entry, with its
// bytes inside, to the pack. When the pack cannot take it, the entry knows the view's size, in memory only.
func (x *index) keepInEntry(id string, rev artifactRev, view views.View, mtime time.Time, data []byte, sum string) {
	x.files.Lock()
	defer x.files.Unlock()
	x.mu.Lock()
	stale := false // the view had a file of its own (a large rendering of another revision): now unnamed
	if old := x.entries[id]; old != nil {
		r, _ := old.views.get(view)
		stale = r.place == inFile
	}
	e := x.current(id, rev, mtime)
	e.views.set(viewRec{view: view, size: int64(len(data)), sum: sum, place: inEntry})
	x.mu.Unlock()
	if !x.persistLocked(id, e, view, data) {
		x.mu.Lock()
		if r, ok := e.views.get(view); ok && r.sum == sum {
			r.place = inMemory
			e.views.set(r)
		}
		x.mu.Unlock()
		return
	}
	if stale {
		os.Remove(x.viewPath(id, view)) // a Blob open on it keeps its bytes
	}
}

// persistLocked appends session id's entry to the pack: its text, then the bytes of the views kept inside
// it — fresh's from data, the others' carried over from its record as it is (each checked against its
// checksum; one that no longer matches is dropped from the entry). The caller holds x.files.
func (x *index) persistLocked(id string, e *indexEntry, fresh views.View, data []byte) bool {
	key := x.key(id)
	x.mu.Lock()
	carry := false
	for _, r := range e.views {
		carry = carry || (r.place == inEntry && (r.view != fresh || data == nil))
	}
	x.mu.Unlock()
	var old []byte
	if carry {
		old = x.pack.body(key) // what this process last wrote there (x.files), unless someone else did
	}
	x.mu.Lock()
	inside := map[views.View][]byte{}
	e.views = slices.DeleteFunc(e.views, func(r viewRec) bool {
		switch {
		case r.place != inEntry:
		case r.view == fresh && data != nil:
			inside[r.view] = data
		case r.off >= 0 && r.off+r.size <= int64(len(old)) && hexSum(old[r.off:r.off+r.size]) == r.sum:
			inside[r.view] = old[r.off : r.off+r.size]
		default:
			return true
		}
		return false
	})
	text := e.encode(getScratch(), id, inside)
	x.mu.Unlock()
	ok := x.pack.queueRec(key, text)
	putScratch(text)
	return ok
}

// flush appends the entries written since the last batch to the pack (pack.queueRec).
func (x *index) flush() {
	if x.pack != nil {
		x.pack.flush()
	}
}

// hexSum is data's SHA-256 as the index writes it.
func hexSum(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
