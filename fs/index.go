package fs

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dshfs/dshfs/internal/atomicfile"
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
// memory, and a repeated grep would otherwise decode every session again. A view file is read whole and
// checked against its checksum before it is served; the kernel's page cache, not the mount's heap, keeps
// the hot ones. The cache directory can be deleted at any time (it is rebuilt as sessions are read).
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

const indexMagic = "dshfs-index 1"

// index is the in-memory copy of the entries and the directory they persist in ("" when disabled).
type index struct {
	dir  string
	salt string // the store and the limits (indexSalt), part of each file's name: one directory, many stores

	mu      sync.Mutex
	entries map[string]*indexEntry // by session id

	hits atomic.Int64 // stats served from the index (status.json "index")
}

// indexEntry is one session at one revision.
type indexEntry struct {
	rev   string // artifact token + identity
	mtime time.Time
	sizes map[views.View]int64
	sums  map[views.View]string // SHA-256 (hex) of each view's bytes, kept in its file
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

// record remembers a rendered view of a session that reads, at revision rev, and persists it: the view's
// bytes first, then the entry naming them.
func (x *index) record(id, rev string, view views.View, data []byte, mtime time.Time) {
	if rev == "" || !indexed[view] {
		return
	}
	sum := sha256.Sum256(data)
	hexSum := hex.EncodeToString(sum[:])
	x.mu.Lock()
	e := x.entries[id]
	if e == nil || e.rev != rev {
		e = &indexEntry{rev: rev, mtime: mtime, sizes: map[views.View]int64{}, sums: map[views.View]string{}}
		x.entries[id] = e
	}
	if old, ok := e.sizes[view]; ok && old == int64(len(data)) && e.sums[view] == hexSum {
		x.mu.Unlock()
		return
	}
	e.sizes[view], e.sums[view] = int64(len(data)), hexSum
	text := e.encode(id)
	x.mu.Unlock()
	if x.dir != "" && x.writeFile(x.viewPath(id, view), data) {
		x.writeFile(x.path(id), text)
	}
}

// viewPath is the file holding a view's bytes.
func (x *index) viewPath(id string, view views.View) string {
	return strings.TrimSuffix(x.path(id), ".idx") + "." + view.String()
}

// content returns a view's bytes at revision rev from its file, when the entry names it and the file's
// checksum matches.
func (x *index) content(id, rev string, view views.View) ([]byte, time.Time, bool) {
	e := x.entry(id, rev)
	if e == nil || x.dir == "" {
		return nil, time.Time{}, false
	}
	x.mu.Lock()
	size, sum := e.sizes[view], e.sums[view]
	x.mu.Unlock()
	if sum == "" {
		return nil, time.Time{}, false
	}
	data, err := os.ReadFile(x.viewPath(id, view))
	if err != nil || int64(len(data)) != size {
		return nil, time.Time{}, false
	}
	got := sha256.Sum256(data)
	if hex.EncodeToString(got[:]) != sum {
		return nil, time.Time{}, false
	}
	x.hits.Add(1)
	return data, e.mtime, true
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
			b.WriteString("view " + v.String() + " " + strconv.FormatInt(n, 10) + " " + e.sums[v] + "\n")
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
	e := &indexEntry{sizes: map[views.View]int64{}, sums: map[views.View]string{}}
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
			if len(f) != 3 || len(f[2]) != 64 {
				return nil
			}
			v, ok := views.ParseView(f[0])
			size, err := strconv.ParseInt(f[1], 10, 64)
			if !ok || !indexed[v] || err != nil || size < 0 {
				return nil
			}
			e.sizes[v], e.sums[v] = size, f[2]
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
