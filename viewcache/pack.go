package viewcache

import (
	"bufio"
	"bytes"
	"cmp"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The pack: the index's entries, every session's in one append-only file per store (index.go says what an
// entry holds). It used to be a file per session: a first walk over a cold 10k-session store created 10k
// files (0.7 s of the mount's CPU in the latest profile on this project's VM, 2.2 s in an earlier one),
// where appending the same entries to one file costs 0.36 s, and the cache directory kept a file per
// session ever read.
//
// A record is a header line — packMagic, the session's key (index.key: a hash of the store and the id, 32
// hex digits) and the length of the body — and the body, the entry's bytes as encode writes them. The last
// record of a key is its entry; earlier ones are garbage until the pack is compacted. A record with an empty
// body is a tombstone: its key has no entry any more (a session removed from the store). The records' framing
// is all the pack checks: the entry's own checksums decide whether its text and the views kept inside it
// are served, as they did for an entry file.
//
// More than one process may use one index directory (two mounts of a store, a remount while the old mount
// drains). Writers take an exclusive flock(2) on the pack for each append (of a batch of records:
// queueRec), so records never interleave. Before appending, a writer frames what others appended since it
// last looked; whatever does not frame (a header that does not parse, a body cut short) can only be what a
// writer that died mid-append left, because no live writer appends without the lock, and the writer cuts
// it off. Readers frame without the lock, stop at what does not frame and look again later: a record being
// appended frames once it is whole.
// Framing never searches past a bad record for the next header, so bytes inside a body (session text) can
// never be taken for a record.
//
// When garbage outgrows the live records (and the pack is past packCompactMin), the writer that notices
// starts a compaction in the background: it copies the live records into a new file without holding any
// lock (records never change once framed), then, under the mutex and the old file's flock, copies the
// records appended meanwhile and renames the new file over the pack. Another process notices at its next
// append that the path names another file and switches to it; until then it reads the old file, whose
// records stay valid (unlinked files keep their bytes while open).

// packMagic starts every record's header line.
const packMagic = "dshfs-pack 1 "

// packKeyLen is the length of a record's key (16 bytes of a SHA-256, in hex).
const packKeyLen = 32

// packBodyMax bounds a body: an entry's text (headerMax) and the views kept inside it (each under blobMin;
// six kinds of view are indexed, and eight leaves room). A header claiming more is not a record.
const packBodyMax = headerMax + 8*blobMin

// packHeaderMax is the longest header line: magic, key, space, a length of at most packBodyMax, LF.
var packHeaderMax = len(packMagic) + packKeyLen + 1 + len(strconv.FormatInt(packBodyMax, 10)) + 1

// packFrameRead is the buffer frame reads the pack through.
const packFrameRead = 1 << 20

// packCompactMin is the size below which a pack is never compacted, however much of it is garbage.
const packCompactMin = 32 << 20

// packRec is where a record's body is: at off, n bytes, in the file of generation gen; or, for a record
// this process has queued and not yet appended, in mem, the batch buffer's bytes while batch batch waits.
type packRec struct {
	off, n int64
	gen    int
	mem    []byte
	batch  uint64
}

// Records are appended in batches (queue): a first walk appends a record a session, and each append takes
// the pack's flock twice, a stat of its path and an fstat besides its write. A batch is appended once it
// holds packBatchRecs records or packBatchBytes, once packBatchDelay has passed since its first record, at
// a synchronous put (a tombstone, which must follow the records queued before it) and at flush (the
// mount's end). Until then this process reads its queued records from memory. A batch that cannot be
// appended is dropped: its entries are a cache, and a view whose record is missing is rendered again.
const (
	packBatchRecs  = 64
	packBatchBytes = 1 << 20
	packBatchDelay = 50 * time.Millisecond
)

// queued is a record waiting for its batch's append: its key, and the length of its header and body.
type queued struct {
	key   string
	hl, n int64
}

// pack is one index directory's pack file for one store, as this process has framed it.
type pack struct {
	path       string
	compactMin int64 // packCompactMin (tests lower it)

	// mu guards the fields below. Reads of record bodies hold it shared, so the file they read is not
	// closed under them; framing, appending and switching files hold it exclusively.
	mu   sync.RWMutex
	f    *os.File // nil until first used, or after it could not be opened
	dev  uint64   // f's device and inode: the path names another file after a compaction elsewhere
	ino  uint64
	gen  int   // bumped whenever f is replaced: offsets of records read from an older file are not used
	end  int64 // how far f has been framed into records
	recs map[string]packRec
	live int64 // the bytes of the records in recs, headers included

	// queue is the batch of records not yet appended, in order, framed in batchBuf as they will be in the
	// file, and queuedRecs each key's latest of them (an empty one a tombstone). batch counts the batches:
	// a queued record's bytes are read from batchBuf only while its batch is the one waiting, since the
	// buffer is reused once the batch is appended. timer is the append due packBatchDelay after a batch's
	// first record (nil: none due).
	queue      []queued
	queuedRecs map[string]packRec
	batchBuf   []byte
	batch      uint64
	timer      *time.Timer

	compacting  bool           // a compaction is running (compact)
	retryAt     int64          // after a failed compaction, the size from which to try again
	compactions sync.WaitGroup // the running compaction (tests wait for it)
	copied      func()         // tests: called by a compaction between its copy and its switch
}

func newPack(path string) *pack { return &pack{path: path, compactMin: packCompactMin} }

// identity is a file's device and inode.
func identity(info os.FileInfo) (dev, ino uint64, ok bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(st.Dev), st.Ino, true
}

// openLocked (re)opens the file the path names and frames it from the start; the caller holds mu.
func (p *pack) openLocked() bool {
	if p.f != nil {
		p.f.Close()
		p.f = nil
	}
	p.gen++
	p.recs, p.end, p.live = map[string]packRec{}, 0, 0
	f, err := os.OpenFile(p.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		// a cache directory this process may only read (another user's, a read-only copy) is still read;
		// appends to it fail, and the views are then kept in memory
		if f, err = os.Open(p.path); err != nil {
			return false
		}
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return false
	}
	dev, ino, ok := identity(info)
	if !ok {
		f.Close()
		return false
	}
	p.f, p.dev, p.ino = f, dev, ino
	p.frame(info.Size())
	return true
}

// refreshLocked frames what was appended to the pack's file since this process last looked, and returns
// the file's size; the caller holds mu. It opens the file first if it is not open, and again if the file
// is shorter than what was framed (cut behind this process's back: writers cut only what does not frame).
// It does not look at the path: whether the path still names this file (after a compaction elsewhere) is
// for put to ask, under the lock. A lookup would pay a stat for it, on every session a walk meets, and
// until this process appends it reads the old file, whose records stay what they were.
func (p *pack) refreshLocked() (int64, bool) {
	if p.f == nil && !p.openLocked() {
		return 0, false
	}
	info, err := p.f.Stat()
	if err == nil && info.Size() < p.end {
		if !p.openLocked() {
			return 0, false
		}
		info, err = p.f.Stat()
	}
	if err != nil {
		return 0, false
	}
	p.frame(info.Size())
	return info.Size(), true
}

// isPath reports whether the pack's path names the file of that device and inode.
func (p *pack) isPath(dev, ino uint64) bool {
	info, err := os.Stat(p.path)
	if err != nil {
		return false
	}
	d, i, ok := identity(info)
	return ok && d == dev && i == ino
}

// frame reads records from p.end up to size, noting each, and stops at the first one that does not frame
// (or is not whole yet). The caller holds mu exclusively.
//
// It reads the file through, rather than a header at a time: after a remount with the page cache dropped,
// reading the 10k headers of a 146 MB pack one by one took 1.3 s, and reading the whole file 0.39 s — and
// the walk that follows reads those entries anyway, now from the page cache.
func (p *pack) frame(size int64) {
	if p.end >= size {
		return
	}
	r := bufio.NewReaderSize(io.NewSectionReader(p.f, p.end, size-p.end), int(min(packFrameRead, size-p.end)))
	for p.end < size {
		hdr, _ := r.Peek(int(min(int64(packHeaderMax), size-p.end)))
		key, bodyLen, hl, ok := parsePackHeader(hdr)
		if !ok || p.end+int64(hl)+bodyLen > size {
			return
		}
		if _, err := r.Discard(hl + int(bodyLen)); err != nil {
			return
		}
		p.note(key, packRec{off: p.end + int64(hl), n: bodyLen, gen: p.gen}, int64(hl))
		p.end += int64(hl) + bodyLen
	}
}

// note makes r key's record, keeping the count of live bytes. A record with an empty body is a tombstone
// (drop): the key has no entry any more, and the tombstone itself is garbage.
func (p *pack) note(key string, r packRec, hl int64) {
	if old, ok := p.recs[key]; ok {
		p.live -= old.n + packHeaderLen(old.n)
	}
	if r.n == 0 {
		delete(p.recs, key)
		return
	}
	p.recs[key] = r
	p.live += r.n + hl
}

// packHeader appends a record's header line to dst.
func packHeader(dst []byte, key string, n int64) []byte {
	dst = append(dst, packMagic...)
	dst = append(dst, key...)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, n, 10)
	return append(dst, '\n')
}

// packHeaderLen is the length of the header of a body of n bytes.
func packHeaderLen(n int64) int64 {
	return int64(len(packMagic) + packKeyLen + 1 + len(strconv.FormatInt(n, 10)) + 1)
}

// parsePackHeader reads a header line at the start of b: the key, the body's length and the header's.
// Only the form packHeader writes parses (no sign, no leading zero, lowercase hex).
func parsePackHeader(b []byte) (key string, n int64, hl int, ok bool) {
	rest, found := bytes.CutPrefix(b, []byte(packMagic))
	if !found || len(rest) < packKeyLen+3 {
		return "", 0, 0, false
	}
	for _, c := range rest[:packKeyLen] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", 0, 0, false
		}
	}
	if rest[packKeyLen] != ' ' {
		return "", 0, 0, false
	}
	digits := rest[packKeyLen+1:]
	i := 0
	for i < len(digits) && '0' <= digits[i] && digits[i] <= '9' {
		i++
	}
	if i == 0 || i >= len(digits) || digits[i] != '\n' || (digits[0] == '0' && i > 1) {
		return "", 0, 0, false
	}
	n, err := strconv.ParseInt(string(digits[:i]), 10, 64)
	if err != nil || n > packBodyMax {
		return "", 0, 0, false
	}
	return string(rest[:packKeyLen]), n, len(packMagic) + packKeyLen + 1 + i + 1, true
}

// lookup returns key's record as the pack holds it now.
func (p *pack) lookup(key string) (packRec, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.refreshLocked(); !ok {
		return packRec{}, false
	}
	return p.recLocked(key)
}

// recLocked is key's latest record, queued or appended; the caller holds mu.
func (p *pack) recLocked(key string) (packRec, bool) {
	if r, ok := p.queuedRecs[key]; ok {
		return r, r.n > 0
	}
	r, ok := p.recs[key]
	return r, ok
}

// known returns key's record as this process last framed the pack, without looking at the file again: for
// reading the views kept inside an entry already loaded from that record (a newer record of the key, if
// another process appended one, has other checksums, and its views are not served from the old entry).
func (p *pack) known(key string) (packRec, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.recLocked(key)
}

// readAt fills buf from offset off of record r's body; false when r is of a file the pack has since left,
// or buf reaches past the body.
func (p *pack) readAt(r packRec, buf []byte, off int64) bool {
	if off < 0 || off+int64(len(buf)) > r.n {
		return false
	}
	p.mu.RLock()
	if r.mem != nil { // queued: its bytes are in the batch buffer while its batch waits
		ok := r.batch == p.batch
		if ok {
			copy(buf, r.mem[off:])
		}
		p.mu.RUnlock()
		return ok
	}
	defer p.mu.RUnlock()
	if p.f == nil || r.gen != p.gen {
		return false
	}
	n, err := p.f.ReadAt(buf, r.off+off)
	return n == len(buf) && (err == nil || err == io.EOF)
}

// body is the whole body of key's record, if there is one.
func (p *pack) body(key string) []byte {
	r, ok := p.lookup(key)
	if !ok {
		return nil
	}
	buf := make([]byte, r.n)
	if !p.readAt(r, buf, 0) {
		return nil
	}
	return buf
}

// drop appends a tombstone for key, whose session is gone: a record with an empty body, after which key has
// no entry (note), in this process and in every other that frames the pack.
func (p *pack) drop(key string) bool { return p.put(key, nil) }

// keys are the keys with an entry, as the pack is now.
func (p *pack) keys() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.refreshLocked(); !ok {
		return nil
	}
	keys := make([]string, 0, len(p.recs)+len(p.queuedRecs))
	for k := range p.recs {
		if _, ok := p.queuedRecs[k]; !ok {
			keys = append(keys, k)
		}
	}
	for k, r := range p.queuedRecs {
		if r.n > 0 {
			keys = append(keys, k)
		}
	}
	return keys
}

// put appends body as key's record now, after the records queued before it; an empty body is a tombstone
// (drop). It returns false when the pack could not take it; nothing half-written is left behind then.
func (p *pack) put(key string, body []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.enqueueLocked(key, body)
	return p.flushLocked()
}

// queueRec queues body as key's record, appended with its batch; false when the pack cannot be opened at all.
func (p *pack) queueRec(key string, body []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.f == nil && !p.openLocked() {
		return false
	}
	p.enqueueLocked(key, body)
	if len(p.queue) >= packBatchRecs || len(p.batchBuf) >= packBatchBytes {
		p.flushLocked()
	} else if p.timer == nil {
		p.timer = time.AfterFunc(packBatchDelay, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.timer = nil
			p.flushLocked()
		})
	}
	return true
}

// enqueueLocked frames key's record into the batch; the caller holds mu.
func (p *pack) enqueueLocked(key string, body []byte) {
	if p.batchBuf == nil { // room for a full batch at once: growing to it copies it over and over
		p.batchBuf = make([]byte, 0, packBatchBytes+headerMax)
	}
	start := len(p.batchBuf)
	p.batchBuf = append(packHeader(p.batchBuf, key, int64(len(body))), body...)
	hl := int64(len(p.batchBuf) - start - len(body))
	if p.queuedRecs == nil {
		p.queuedRecs = map[string]packRec{}
	}
	p.queue = append(p.queue, queued{key: key, hl: hl, n: int64(len(body))})
	p.queuedRecs[key] = packRec{n: int64(len(body)), mem: p.batchBuf[start+int(hl) : len(p.batchBuf) : len(p.batchBuf)], batch: p.batch}
}

// flush appends the queued records; false when the pack could not take them (they are dropped then).
func (p *pack) flush() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.flushLocked()
}

// flushLocked is flush; the caller holds mu.
func (p *pack) flushLocked() bool {
	if len(p.queue) == 0 {
		return true
	}
	defer p.dropQueueLocked() // appended, or given up
	return p.exclusiveLocked(func(size int64) bool {
		if size != p.end { // what does not frame, under the lock, is a dead writer's: cut it off
			if p.f.Truncate(p.end) != nil {
				return false
			}
		}
		if n, err := p.f.WriteAt(p.batchBuf, p.end); err != nil || n != len(p.batchBuf) {
			p.f.Truncate(p.end)
			return false
		}
		for _, r := range p.queue {
			p.note(r.key, packRec{off: p.end + r.hl, n: r.n, gen: p.gen}, r.hl)
			p.end += r.hl + r.n
		}
		if p.end > p.compactMin && p.end > 2*p.live && p.end > p.retryAt && !p.compacting {
			p.startCompactionLocked()
		}
		return true
	})
}

// dropQueueLocked forgets the queued records and reuses their buffer (a new batch: readers of the old
// one's bytes are refused); the caller holds mu.
func (p *pack) dropQueueLocked() {
	p.queue = p.queue[:0]
	clear(p.queuedRecs)
	p.batch++
	if cap(p.batchBuf) > 2*packBatchBytes { // one huge record's buffer is not kept
		p.batchBuf = nil
	}
	p.batchBuf = p.batchBuf[:0]
}

// exclusive runs fn holding mu and the pack's flock on the file the path names, framed up to its size
// (fn's argument), and returns what fn returns; false without running fn when the lock cannot be had.
func (p *pack) exclusive(fn func(size int64) bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exclusiveLocked(fn)
}

// exclusiveLocked is exclusive for a caller that holds mu.
func (p *pack) exclusiveLocked(fn func(size int64) bool) bool {
	locked, ok := p.lockLocked()
	if !ok {
		return false
	}
	defer p.unlockLocked(locked)
	size, ok := p.refreshLocked()
	if !ok || p.f != locked {
		return false
	}
	return fn(size)
}

// lockLocked takes the pack's flock on the file the path names (switching to that file first if the path
// names another one: compacted elsewhere, or the cache directory emptied). The caller holds mu, and
// unlocks the file it returns.
func (p *pack) lockLocked() (*os.File, bool) {
	for range 3 {
		if p.f == nil && !p.openLocked() {
			return nil, false
		}
		f := p.f
		if unix.Flock(int(f.Fd()), unix.LOCK_EX) != nil {
			return nil, false
		}
		if p.isPath(p.dev, p.ino) {
			return f, true
		}
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		if !p.openLocked() {
			return nil, false
		}
	}
	return nil, false
}

// unlockLocked releases the flock lockLocked took on f: by closing f when the pack has switched to another
// file since (compacted, or reopened: f is done with), else by unlocking it. The caller holds mu.
func (p *pack) unlockLocked(f *os.File) {
	if f != p.f {
		f.Close()
		return
	}
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
}

// compactJob is what a compaction copies without the lock: the records of the file of generation gen
// (device dev, inode ino) as they were when it started, all of them before end.
type compactJob struct {
	gen      int
	dev, ino uint64
	end      int64
	recs     map[string]packRec
}

// startCompactionLocked starts a compaction in the background; the caller holds mu.
func (p *pack) startCompactionLocked() {
	job := compactJob{gen: p.gen, dev: p.dev, ino: p.ino, end: p.end, recs: maps.Clone(p.recs)}
	p.compacting = true
	p.compactions.Add(1)
	go func() {
		defer p.compactions.Done()
		ok := p.compact(job)
		p.mu.Lock()
		p.compacting = false
		if !ok { // (a full disk, or another process's compaction first): not again at every append
			p.retryAt = p.end + p.compactMin
		}
		p.mu.Unlock()
	}()
}

// compact writes the live records into a new file and renames it over the pack; on any failure the pack
// stays as it was. The copy of the records the job names runs without the lock, so the mount's lookups,
// reads and appends go on meanwhile (holding it, a 140 MB pack stalled them for 0.2 s, longer with a cold
// page cache): records before job.end never change, and this reads them through a descriptor of its own.
// Then, under mu and the pack's flock, it copies what was appended since (by this process or another),
// and switches. Another writer's compaction in between (the path names another file) abandons this one.
// It reports whether the pack was compacted.
func (p *pack) compact(job compactJob) bool {
	src, err := os.Open(p.path)
	if err != nil {
		return false
	}
	defer src.Close()
	if info, err := src.Stat(); err != nil {
		return false
	} else if dev, ino, ok := identity(info); !ok || dev != job.dev || ino != job.ino {
		return false
	}
	tmp, err := os.CreateTemp(filepath.Dir(p.path), filepath.Base(p.path)+".tmp-*")
	if err != nil {
		return false
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriterSize(tmp, 1<<20)
	recs, off, ok := copyRecords(w, src, job.recs, 0)
	if !ok {
		return false
	}
	if p.copied != nil {
		p.copied()
	}
	return p.exclusive(func(int64) bool {
		if p.gen != job.gen { // another process compacted (this one switched to its file)
			return false
		}
		newer := map[string]packRec{} // the latest records of keys appended to since the job began
		for k, r := range p.recs {
			if r.off >= job.end {
				newer[k] = r
			}
		}
		more, end, ok := copyRecords(w, p.f, newer, off)
		if !ok {
			return false
		}
		// a key dropped since the job began has its copied record undone by a tombstone, or other
		// processes framing the new file would find the entry again
		var gone []string
		for k := range job.recs {
			if _, ok := p.recs[k]; !ok {
				gone = append(gone, k)
			}
		}
		slices.Sort(gone)
		for _, k := range gone {
			hdr := packHeader(nil, k, 0)
			if _, err := w.Write(hdr); err != nil {
				return false
			}
			end += int64(len(hdr))
			delete(recs, k)
		}
		if w.Flush() != nil {
			return false
		}
		info, err := tmp.Stat()
		if err != nil {
			return false
		}
		dev, ino, ok := identity(info)
		if !ok || os.Rename(tmp.Name(), p.path) != nil {
			return false
		}
		done = true
		maps.Copy(recs, more) // a key appended to meanwhile: its older copy stays behind as garbage
		p.gen++
		live := int64(0)
		for k, r := range recs {
			r.gen = p.gen
			recs[k] = r
			live += r.n + packHeaderLen(r.n)
		}
		// the old file stays open, and locked, until exclusive's unlock closes it; records read of it
		// carry the old generation, and readAt refuses them
		p.f, p.dev, p.ino = tmp, dev, ino
		p.recs, p.end, p.live = recs, end, live
		return true
	})
}

// copyRecords writes the records recs names, read from src, to w in the order they are in src, as if w
// began at offset off; it returns where each landed (generation unset) and the offset after them.
func copyRecords(w io.Writer, src io.ReaderAt, recs map[string]packRec, off int64) (map[string]packRec, int64, bool) {
	keys := make([]string, 0, len(recs))
	for k := range recs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(recs[a].off, recs[b].off) })
	out := make(map[string]packRec, len(keys))
	hdr := make([]byte, 0, packHeaderMax)
	for _, k := range keys {
		r := recs[k]
		hdr = packHeader(hdr[:0], k, r.n)
		if _, err := w.Write(hdr); err != nil {
			return nil, 0, false
		}
		if _, err := io.Copy(w, io.NewSectionReader(src, r.off, r.n)); err != nil {
			return nil, 0, false
		}
		out[k] = packRec{off: off + int64(len(hdr)), n: r.n}
		off += int64(len(hdr)) + r.n
	}
	return out, off, true
}
