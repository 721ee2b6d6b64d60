package viewcache

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dshfs/dshfs/views"
)

// forget drops a session's entry (its artifact changed or vanished).
func (x *index) forget(id string) {
	x.mu.Lock()
	delete(x.entries, id)
	x.mu.Unlock()
}

// purge forgets sessions that are gone from the store, on disk too: a tombstone in the pack for each entry
// and the removal of its view files. Without it the pack, which compaction keeps down to one record per
// key, and the directory, which holds a file per large view, would keep every session ever read.
func (x *index) purge(ids []string) {
	keys := make([]string, len(ids))
	for i, id := range ids {
		x.forget(id)
		keys[i] = x.key(id)
	}
	x.purgeKeys(keys)
}

// purgeAbsent purges every entry of the pack whose session is not among ids (the store's listing): what
// was removed while no mount watched the store.
func (x *index) purgeAbsent(ids []string) {
	if x.pack == nil {
		return
	}
	listed := make(map[string]bool, len(ids))
	for _, id := range ids {
		listed[x.key(id)] = true
	}
	var gone []string
	for _, k := range x.pack.keys() {
		if !listed[k] {
			gone = append(gone, k)
		}
	}
	x.purgeKeys(gone)
}

// purgeKeys drops the entries and view files of keys; under files, so that no entry being written names a
// file removed here.
func (x *index) purgeKeys(keys []string) {
	if x.pack == nil || len(keys) == 0 {
		return
	}
	x.files.Lock()
	defer x.files.Unlock()
	for _, k := range keys {
		if _, ok := x.pack.lookup(k); ok {
			x.pack.drop(k)
		}
		x.removeViewFiles(k)
	}
}

// removeViewFiles removes the view files of the session whose key is key, those there are.
func (x *index) removeViewFiles(key string) {
	for _, v := range entryOrder {
		os.Remove(x.keyPath(key, v))
	}
}

// encode appends an entry to dst: its text in a fixed line order and a checksum of that text, then
// the bytes of the views kept inside it (inside holds them), in the order of their lines, each at the
// offset it records in the entry. A view kept inside whose bytes are not at hand is left out of the entry.
func (e *indexEntry) encode(dst []byte, id string, inside map[views.View][]byte) []byte {
	start := len(dst)
	b := append(dst, indexMagic+"\n"...)
	b = append(b, "session "+strconv.Quote(id)+"\n"...)
	b = append(b, "artifact "+strconv.Quote(e.rev.artifact)+"\n"...)
	b = append(b, "identity "+strconv.Quote(e.rev.identity)+"\n"...)
	b = append(b, "mtime "+strconv.FormatInt(e.mtime.UnixNano(), 10)+"\n"...)
	var kept []views.View
	for _, v := range entryOrder {
		r, ok := e.views.get(v)
		if !ok || r.place == inMemory {
			continue
		}
		where := r.stamp
		switch {
		case r.place == inEntry && int64(len(inside[v])) != r.size:
			e.views.del(v)
			continue
		case r.place == inEntry:
			where = "inline"
			kept = append(kept, v)
		case where == "":
			where = "-"
		}
		b = append(b, "view "+v.String()+" "+strconv.FormatInt(r.size, 10)+" "+r.sum+" "+where+"\n"...)
	}
	b = append(b, "sha256 "+hexSum(b[start:])+"\n"...)
	for _, v := range kept {
		r, _ := e.views.get(v)
		r.off = int64(len(b) - start)
		e.views.set(r)
		b = append(b, inside[v]...)
	}
	return b
}

// load reads and validates session id's entry; nil when it is missing, malformed, tampered with, cut
// short or written for another session. It reads the entry's text, not the views kept after it.
func (x *index) load(id string) *indexEntry {
	key := x.key(id)
	rec, ok := x.pack.lookup(key)
	if !ok {
		x.dropEntryFile(id)
		return nil
	}
	text, ok := readEntryText(x.pack, rec)
	if !ok {
		return nil
	}
	size := rec.n
	body, sumLine, ok := cutLastLine(text)
	if !ok || hexSum(body) != strings.TrimPrefix(sumLine, "sha256 ") {
		return nil
	}
	e := newEntry(artifactRev{}, time.Time{})
	end := int64(len(text)) // where the bytes of the views kept inside begin
	for i, line := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
		key, val, _ := strings.Cut(line, " ")
		switch {
		case i == 0:
			if line != indexMagic {
				return nil
			}
		case key == "session":
			if s, err := strconv.Unquote(val); err != nil || s != id {
				return nil
			}
		case key == "artifact":
			s, err := strconv.Unquote(val)
			if err != nil {
				return nil
			}
			e.rev.artifact = s
		case key == "identity":
			s, err := strconv.Unquote(val)
			if err != nil {
				return nil
			}
			e.rev.identity = s
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
			n, err := strconv.ParseInt(f[1], 10, 64)
			if _, dup := e.views.get(v); !ok || !indexed[v] || err != nil || n < 0 || dup {
				return nil
			}
			r := viewRec{view: v, size: n, sum: f[2], place: inFile}
			switch f[3] {
			case "inline":
				r.place, r.off = inEntry, end
				end += n
			case "-":
			default:
				r.stamp = f[3]
			}
			e.views.set(r)
		default:
			return nil
		}
	}
	if e.rev.artifact == "" || end != size { // cut short, or grown
		return nil
	}
	return e
}

// readEntryText reads the text of the entry in record rec: up to and including its checksum line, which
// must come within headerMax bytes.
func readEntryText(p *pack, rec packRec) (text []byte, ok bool) {
	buf := make([]byte, min(rec.n, headerRead))
	for {
		if !p.readAt(rec, buf, 0) {
			return nil, false
		}
		if i := bytes.Index(buf, []byte("\nsha256 ")); i >= 0 {
			if j := bytes.IndexByte(buf[i+1:], '\n'); j >= 0 {
				return buf[:i+1+j+1], true
			}
		}
		if int64(len(buf)) == rec.n || len(buf) >= headerMax {
			return nil, false
		}
		buf = make([]byte, min(rec.n, headerMax))
	}
}

// staleTemp is the age from which a temporary file in the index directory (a view file or a compacted pack
// being written: *.tmp-*) is a crashed writer's, not a live one's: writing one takes seconds.
const staleTemp = time.Hour

// removeStaleTemp removes entry n of the index directory if it is a temporary file older than staleTemp:
// a process that died while writing a view file or compacting the pack leaves one, and nothing else would
// ever remove it.
func removeStaleTemp(dir string, n os.DirEntry) {
	if !strings.Contains(n.Name(), ".tmp-") {
		return
	}
	if info, err := n.Info(); err == nil && info.Mode().IsRegular() && time.Since(info.ModTime()) > staleTemp {
		os.Remove(filepath.Join(dir, n.Name()))
	}
}

// dropEntryFile removes what an earlier version kept of session id outside the pack — its entry file, and
// the view files that only that file named — once the pack has no entry for it (x.files orders this after
// any rename of a view file whose entry is being appended). Without it, a cache directory would keep a
// file per session an earlier version read, forever. The directory is listed once (and stale temporary
// files removed then): a miss then costs no system call.
func (x *index) dropEntryFile(id string) {
	x.files.Lock()
	defer x.files.Unlock()
	if x.entryFiles == nil {
		x.entryFiles = map[string]bool{}
		names, _ := os.ReadDir(x.dir)
		for _, n := range names {
			if key, ok := strings.CutSuffix(n.Name(), ".idx"); ok {
				x.entryFiles[key] = true
			}
			removeStaleTemp(x.dir, n)
		}
	}
	key := x.key(id)
	if !x.entryFiles[key] {
		return
	}
	if _, ok := x.pack.lookup(key); ok {
		return
	}
	delete(x.entryFiles, key)
	os.Remove(filepath.Join(x.dir, key+".idx"))
	x.removeViewFiles(key)
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
