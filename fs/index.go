package fs

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/internal/atomicfile"
	"github.com/dshfs/dshfs/nodes"
	"github.com/dshfs/dshfs/views"
)

// The persistent per-revision index (issue: read path at scale). Getting the exact size of a session's
// view means rendering it, and rendering means decoding and validating the whole session; a stat of every
// events.jsonl of a large store (ls -l, rsync, find -size) would decode every session again after the
// caches evicted it, or after a remount. So the mount remembers, per session and per artifact revision,
// that the session reads (is not refused) and the size and time of each whole view it rendered — in
// memory, and in one small file per session under the cache directory ([cache] dir, default
// $XDG_CACHE_HOME/dshfs), so a remount or an evicted session is warm.
//
// The rendered bytes of those views are kept too, one file per view beside the entry, each named in the
// entry with its SHA-256: with the small default memory budgets a 10k-session store's views do not fit in
// memory, and a repeated grep would otherwise decode every session again. A view is rendered straight into
// its file (a temporary one, renamed into place), and one of blobMin bytes or more is then served from that
// file rather than from memory: the events view of a 500k-event session is 80 MB, which would otherwise sit
// on the heap beside the decoded session. The kernel's page cache, not the mount's heap, keeps the hot
// ones. The cache directory can be deleted at any time (it is rebuilt as sessions are read).
//
// A view file is served only while it is the file the entry names: the entry keeps its checksum and the
// stamp (device, inode, size, mtime, ctime) the file had when it was written or last verified. A file whose
// stamp differs — rewritten in place, replaced, copied — is hashed again and served only if the checksum
// still matches; no one can set a file's ctime, so an unchanged stamp means unchanged bytes.
//
// An entry is trusted only for the revision it was written at: the artifact's token (JSONL:
// dev:ino:size:mtime:ctime, so an artifact replaced by one of the same size and mtime is a new revision
// through its inode and ctime; SQLite: the session's incarnation and revision) and its storage identity.
// A file that does not parse, whose checksum does not match or that names another session is ignored and
// rewritten by the next rendering: a corrupt or stale entry is never served. Sizes are only served when
// no rendering is cached; reading a file always renders it, so the index can make a stat wrong only if
// the checksum is forged — and even then a read returns the true bytes.

// indexed views: whole views whose bytes depend only on the stored log (not status.json, whose results
// change without a new revision, and not the spill index, whose truth lives outside the store).
var indexed = map[views.View]bool{views.Events: true, views.Raw: true, views.Header: true,
	views.Surface: true, views.Messages: true, views.Shadowed: true}

const indexMagic = "dshfs-index 2"

// blobMin is the size from which a view is served from its index file instead of from memory: below it a
// copy on the heap is cheaper than a file read per request, above it the copy is what breaks the mount's
// memory bound.
const blobMin = 1 << 20

// viewWriteBuffer is the buffer between a rendering (two writes per event line) and its file.
const viewWriteBuffer = 256 << 10

// index is the in-memory copy of the entries and the directory they persist in ("" when disabled).
type index struct {
	dir  string
	salt string // the store and the limits (indexSalt), part of each file's name: one directory, many stores

	mu      sync.Mutex
	entries map[string]*indexEntry // by session id
	// files orders the renames of view files and the writes of entries naming them, so that an entry never
	// names the stamp of a file another writer has since renamed over it
	files sync.Mutex

	hits atomic.Int64 // stats served from the index (status.json "index")
}

// indexEntry is one session at one revision.
type indexEntry struct {
	rev    string // artifact token + identity
	mtime  time.Time
	sizes  map[views.View]int64
	sums   map[views.View]string // SHA-256 (hex) of each view's bytes, kept in its file
	stamps map[views.View]string // the view file's stamp (fileStamp) when written or last verified
}

func newEntry(rev string, mtime time.Time) *indexEntry {
	return &indexEntry{rev: rev, mtime: mtime, sizes: map[views.View]int64{}, sums: map[views.View]string{},
		stamps: map[views.View]string{}}
}

func newIndex(dir, salt string) *index {
	return &index{dir: dir, salt: salt, entries: map[string]*indexEntry{}}
}

// path is the file of session id: its name hashes the salt and the id (ids may hold any character).
func (x *index) path(id string) string {
	sum := sha256.Sum256([]byte(x.salt + "\x00" + id))
	return filepath.Join(x.dir, hex.EncodeToString(sum[:16])+".idx")
}

// size returns a view's size, time and checksum (SHA-256, hex) at revision rev, if the index holds it,
// and counts the hit.
func (x *index) size(id, rev string, view views.View) (int64, time.Time, string, bool) {
	n, mtime, sum, ok := x.lookup(id, rev, view)
	if ok {
		x.hits.Add(1)
	}
	return n, mtime, sum, ok
}

// lookup is size without counting a hit (readahead asks whether there is work to do).
func (x *index) lookup(id, rev string, view views.View) (int64, time.Time, string, bool) {
	e := x.entry(id, rev)
	if e == nil {
		return 0, time.Time{}, "", false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	n, ok := e.sizes[view]
	return n, e.mtime, e.sums[view], ok
}

// reads reports whether the index knows that session id reads (is not refused) at revision rev.
func (x *index) reads(id, rev string) bool {
	if x.entry(id, rev) != nil {
		x.hits.Add(1)
		return true
	}
	return false
}

// entry is session id's entry at rev, from memory or from its file.
func (x *index) entry(id, rev string) *indexEntry {
	if rev == "" {
		return nil
	}
	x.mu.Lock()
	e := x.entries[id]
	x.mu.Unlock()
	if e != nil && e.rev == rev {
		return e
	}
	if x.dir == "" {
		return nil
	}
	e = x.load(id)
	if e == nil || e.rev != rev {
		return nil
	}
	x.mu.Lock()
	x.entries[id] = e
	x.mu.Unlock()
	return e
}

// remember records in memory a view rendered in memory, of a session that reads, at revision rev: the
// index directory is disabled, or could not take the view (write said so), so no file holds its bytes.
func (x *index) remember(id, rev string, view views.View, data []byte, mtime time.Time) {
	if rev == "" || !indexed[view] {
		return
	}
	sum := sha256.Sum256(data)
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.current(id, rev, mtime)
	e.sizes[view], e.sums[view] = int64(len(data)), hex.EncodeToString(sum[:])
	delete(e.stamps, view)
}

// current is session id's in-memory entry at rev, replaced by an empty one when it is of another
// revision; the caller holds x.mu.
func (x *index) current(id, rev string, mtime time.Time) *indexEntry {
	e := x.entries[id]
	if e == nil || e.rev != rev {
		e = newEntry(rev, mtime)
		x.entries[id] = e
	}
	return e
}

// write renders a view of a session that reads, at revision rev, into its file (render writes the bytes),
// and records it in the entry. The result holds the bytes in memory below blobMin and in the file (a Blob)
// from there. ok is false when the index directory could not take the view (disabled, full, unwritable):
// then nothing was recorded and the caller renders in memory. err is render's own failure.
func (x *index) write(id, rev string, view views.View, mtime time.Time, render func(io.Writer) error) (r nodes.Rendered, ok bool, err error) {
	if x.dir == "" || rev == "" || !indexed[view] {
		return r, false, nil
	}
	path := x.viewPath(id, view)
	tmp, err := os.CreateTemp(x.dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return r, false, nil
	}
	sink := &viewSink{file: tmp, sum: sha256.New()}
	keep, renamed := false, false
	defer func() {
		if !keep {
			tmp.Close()
		}
		if !renamed {
			os.Remove(tmp.Name())
		}
	}()
	if err := render(sink); err != nil {
		if sink.failed != nil {
			return r, false, nil
		}
		return r, true, err
	}
	if sink.flush() != nil {
		return r, false, nil
	}
	sum := hex.EncodeToString(sink.sum.Sum(nil))

	x.files.Lock()
	defer x.files.Unlock()
	if os.Rename(tmp.Name(), path) != nil {
		return r, false, nil
	}
	renamed = true
	info, err := tmp.Stat() // after the rename, which changes the ctime
	if err != nil {
		os.Remove(path)
		return r, false, nil
	}
	x.mu.Lock()
	e := x.current(id, rev, mtime)
	e.sizes[view], e.sums[view], e.stamps[view] = sink.n, sum, fileStamp(info)
	text := e.encode(id)
	x.mu.Unlock()
	x.writeFile(x.path(id), text)

	r = nodes.Rendered{ModTime: mtime, Sum: sum}
	if sink.n < blobMin {
		r.Data = sink.buf
		return r, true, nil
	}
	keep = true // the Blob reads the file through tmp, closed when the Blob is collected
	r.Blob = io.NewSectionReader(tmp, 0, sink.n)
	return r, true, nil
}

// viewSink takes a rendering on its way to its file: it checksums it, keeps it in memory while it is
// shorter than blobMin (most views: one write at the end, and the bytes are served from memory), and from
// there writes it out in viewWriteBuffer pieces.
type viewSink struct {
	file   *os.File
	sum    hash.Hash
	buf    []byte // the whole view while n < blobMin, then what is not yet written
	n      int64
	failed error // the file's write error
}

func (s *viewSink) Write(p []byte) (int, error) {
	if s.failed != nil {
		return 0, s.failed
	}
	s.sum.Write(p)
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
	} else if _, err := s.file.Write(p); err != nil { // a view rendered whole arrives in one piece: no copy
		s.failed = err
		return 0, err
	}
	return len(p), nil
}

// flush writes out what is buffered; for a view shorter than blobMin the buffer stays its bytes.
func (s *viewSink) flush() error {
	if _, err := s.file.Write(s.buf); err != nil {
		s.failed = err
		return err
	}
	if s.n >= blobMin {
		s.buf = s.buf[:0]
	}
	return nil
}

// fileStamp is a view file's stamp (eventstore.FileToken); "" where there is none, so the file is always
// hashed.
func fileStamp(info os.FileInfo) string {
	token, _ := eventstore.FileToken(info)
	return token
}

// viewPath is the file holding a view's bytes.
func (x *index) viewPath(id string, view views.View) string {
	return strings.TrimSuffix(x.path(id), ".idx") + "." + view.String()
}

// content returns a view's bytes at revision rev from its file, when the entry names it and the file holds
// the bytes it names: the same stamp, or the same checksum (then the new stamp is remembered). A view of
// blobMin bytes or more comes back as a Blob over the open file.
func (x *index) content(id, rev string, view views.View) (nodes.Rendered, bool) {
	e := x.entry(id, rev)
	if e == nil || x.dir == "" {
		return nodes.Rendered{}, false
	}
	x.mu.Lock()
	size, sum, stamp := e.sizes[view], e.sums[view], e.stamps[view]
	x.mu.Unlock()
	if sum == "" {
		return nodes.Rendered{}, false
	}
	f, err := os.Open(x.viewPath(id, view))
	if err != nil {
		return nodes.Rendered{}, false
	}
	r, ok := x.verified(f, e, view, size, sum, stamp)
	if !ok || r.Blob == nil {
		f.Close()
	}
	if ok {
		x.hits.Add(1)
	}
	return r, ok
}

// verified reads an open view file that should hold size bytes with checksum sum, as its entry last saw it
// (stamp).
func (x *index) verified(f *os.File, e *indexEntry, view views.View, size int64, sum, stamp string) (nodes.Rendered, bool) {
	info, err := f.Stat()
	if err != nil || info.Size() != size {
		return nodes.Rendered{}, false
	}
	r := nodes.Rendered{ModTime: e.mtime, Sum: sum}
	var data []byte
	if size < blobMin {
		data = make([]byte, size)
		if _, err := io.ReadFull(f, data); err != nil {
			return nodes.Rendered{}, false
		}
	}
	if now := fileStamp(info); now == "" || now != stamp {
		h := sha256.New()
		if data != nil {
			h.Write(data)
		} else if _, err := io.Copy(h, io.NewSectionReader(f, 0, size)); err != nil {
			return nodes.Rendered{}, false
		}
		if hex.EncodeToString(h.Sum(nil)) != sum {
			return nodes.Rendered{}, false
		}
		x.mu.Lock()
		if e.sums[view] == sum {
			e.stamps[view] = now // verified: the next use need not hash it again
		}
		x.mu.Unlock()
	}
	if data != nil {
		r.Data = data
	} else {
		r.Blob = io.NewSectionReader(f, 0, size)
	}
	return r, true
}

// forget drops a session's entry (its artifact changed or vanished).
func (x *index) forget(id string) {
	x.mu.Lock()
	delete(x.entries, id)
	x.mu.Unlock()
}

// encode renders an entry as its file: a fixed line order and a checksum of everything before it.
func (e *indexEntry) encode(id string) []byte {
	var b bytes.Buffer
	b.WriteString(indexMagic + "\n")
	b.WriteString("session " + strconv.Quote(id) + "\n")
	b.WriteString("revision " + strconv.Quote(e.rev) + "\n")
	b.WriteString("mtime " + strconv.FormatInt(e.mtime.UnixNano(), 10) + "\n")
	for _, v := range []views.View{views.Header, views.Raw, views.Events, views.Surface, views.Messages, views.Shadowed} {
		if n, ok := e.sizes[v]; ok {
			stamp := e.stamps[v]
			if stamp == "" {
				stamp = "-"
			}
			b.WriteString("view " + v.String() + " " + strconv.FormatInt(n, 10) + " " + e.sums[v] + " " + stamp + "\n")
		}
	}
	sum := sha256.Sum256(b.Bytes())
	b.WriteString("sha256 " + hex.EncodeToString(sum[:]) + "\n")
	return b.Bytes()
}

// writeFile persists an entry or a view (temp file, rename): a crash leaves the old file or the new one,
// and a reader that finds a torn one rejects it by its checksum anyway. false when it could not be written
// (the index is a cache: that costs a decode later, nothing else).
func (x *index) writeFile(path string, data []byte) bool {
	// each writer has a temporary name of its own: the readahead worker and a request may record one
	// session at once
	return atomicfile.Write(path, data) == nil
}

// load reads and validates session id's file; nil when it is missing, malformed, tampered with or
// written for another session.
func (x *index) load(id string) *indexEntry {
	data, err := os.ReadFile(x.path(id))
	if err != nil {
		return nil
	}
	body, sumLine, ok := cutLastLine(data)
	if !ok || !strings.HasPrefix(sumLine, "sha256 ") {
		return nil
	}
	sum := sha256.Sum256(body)
	if sumLine[len("sha256 "):] != hex.EncodeToString(sum[:]) {
		return nil
	}
	e := newEntry("", time.Time{})
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		text := sc.Text()
		line++
		key, val, _ := strings.Cut(text, " ")
		switch {
		case line == 1:
			if text != indexMagic {
				return nil
			}
		case key == "session":
			if s, err := strconv.Unquote(val); err != nil || s != id {
				return nil
			}
		case key == "revision":
			s, err := strconv.Unquote(val)
			if err != nil {
				return nil
			}
			e.rev = s
		case key == "mtime":
			ns, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				return nil
			}
			e.mtime = time.Unix(0, ns)
		case key == "view":
			f := strings.Fields(val)
			if len(f) != 4 || len(f[2]) != 64 {
				return nil
			}
			v, ok := views.ParseView(f[0])
			size, err := strconv.ParseInt(f[1], 10, 64)
			if !ok || !indexed[v] || err != nil || size < 0 {
				return nil
			}
			e.sizes[v], e.sums[v] = size, f[2]
			if f[3] != "-" {
				e.stamps[v] = f[3]
			}
		default:
			return nil
		}
	}
	if e.rev == "" {
		return nil
	}
	return e
}

// cutLastLine splits data before its last LF-terminated line.
func cutLastLine(data []byte) (body []byte, last string, ok bool) {
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return nil, "", false
	}
	i := bytes.LastIndexByte(data[:len(data)-1], '\n')
	if i < 0 {
		return nil, "", false
	}
	return data[:i+1], string(data[i+1 : len(data)-1]), true
}
