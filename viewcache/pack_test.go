package viewcache

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshfs/dshfs/views"
	"golang.org/x/sys/unix"
)

// TestPackHeader: only the header form packHeader writes parses.
func TestPackHeader(t *testing.T) {
	key := strings.Repeat("0123456789abcdef", 2)
	for _, c := range []struct {
		line string
		n    int64
		ok   bool
	}{
		{packMagic + key + " 0\n", 0, true},
		{packMagic + key + " 12345\n", 12345, true},
		{packMagic + key + " 12345\nbody", 12345, true},
		{packMagic + key + " 012\n", 0, false},      // a leading zero
		{packMagic + key + " -1\n", 0, false},       // a sign
		{packMagic + key + " 12\r\n", 0, false},     // not LF
		{packMagic + key + " 12", 0, false},         // no LF yet
		{packMagic + key + "  12\n", 0, false},      // two spaces
		{packMagic + key[:31] + "A 12\n", 0, false}, // uppercase
		{packMagic + key[:31] + " 12\n", 0, false},  // a short key
		{packMagic + key + " " + fmt.Sprint(packBodyMax+1) + "\n", 0, false},
		{packMagic + key + " 99999999999999999999\n", 0, false},
		{"dshfs-pack 2 " + key + " 12\n", 0, false},
		{"", 0, false},
	} {
		k, n, hl, ok := parsePackHeader([]byte(c.line))
		if ok != c.ok || (ok && (k != key || n != c.n || hl != int(packHeaderLen(n)) || string(packHeader(nil, k, n)) != c.line[:hl])) {
			t.Errorf("%q: key %q, n %d, header %d bytes, ok %v", c.line, k, n, hl, ok)
		}
	}
	if got := len(packHeader(nil, key, packBodyMax)); got != packHeaderMax {
		t.Errorf("the longest header is %d bytes, packHeaderMax %d", got, packHeaderMax)
	}
}

// served reports whether a fresh index over dir serves the events view of session id at rev with data.
func served(t *testing.T, dir, id string, rev artifactRev, data []byte) bool {
	t.Helper()
	r, ok := testIndex(t, dir, "salt").content(id, rev, views.Events)
	return ok && bytes.Equal(r.Data, data)
}

// framesWhole fails the test unless the pack file at path frames to its end, into records records (-1:
// any number); it returns the pack as framed.
func framesWhole(t *testing.T, path string, records int) *pack {
	t.Helper()
	p := newPack(path)
	if size, ok := p.refreshLocked(); !ok || size != p.end || (records >= 0 && len(p.recs) != records) {
		t.Fatalf("the pack does not frame whole: %d of %d bytes, %d records", p.end, size, len(p.recs))
	}
	return p
}

// noTemporaries fails the test if a temporary file is left in the index directory dir.
func noTemporaries(t *testing.T, dir string) {
	t.Helper()
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp-*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// TestPackTornTail: a record a writer died in the middle of is not read, the records before it are, and
// the next append cuts it off before writing.
func TestPackTornTail(t *testing.T) {
	dir := t.TempDir()
	x := testIndex(t, dir, "salt")
	at := time.Unix(1778573701, 0)
	record(t, x, "a", ar("rev1"), views.Events, []byte("a\n"), at)
	record(t, x, "b", ar("rev1"), views.Events, []byte("b\n"), at)
	whole, err := os.ReadFile(x.pack.path)
	if err != nil {
		t.Fatal(err)
	}
	// the dead writer's record: its header and part of its body, longer than the record appended next
	torn := append(packHeader(nil, x.key("c"), 5000), "dshfs-index 3\n"+strings.Repeat("x", 2000)...)
	f, err := os.OpenFile(x.pack.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(torn)
	f.Close()
	if !served(t, dir, "a", ar("rev1"), []byte("a\n")) || !served(t, dir, "b", ar("rev1"), []byte("b\n")) {
		t.Fatal("the records before a torn one are not served")
	}
	if served(t, dir, "c", ar("rev1"), nil) {
		t.Fatal("a torn record was served")
	}
	y := testIndex(t, dir, "salt") // another process, which frames the pack first
	record(t, y, "c", ar("rev1"), views.Events, []byte("c\n"), at)
	got, _ := os.ReadFile(x.pack.path)
	if !bytes.HasPrefix(got, whole) || bytes.Contains(got, torn) {
		t.Fatal("the torn record was not cut off, or what was before it changed")
	}
	framesWhole(t, x.pack.path, 3)
	for _, id := range []string{"a", "b", "c"} {
		if !served(t, dir, id, ar("rev1"), []byte(id+"\n")) {
			t.Errorf("%s is not served after the cut", id)
		}
	}
	// x, which framed the pack before the torn record, appends after the cut too
	record(t, x, "d", ar("rev1"), views.Events, []byte("d\n"), at)
	for _, id := range []string{"a", "b", "c", "d"} {
		if !served(t, dir, id, ar("rev1"), []byte(id+"\n")) {
			t.Errorf("%s is not served after another writer's append", id)
		}
	}
}

// TestPackCompaction: a pack mostly garbage is rewritten with its live records, which stay served; another
// process still on the old file reads it until it appends, and then appends to the new one.
func TestPackCompaction(t *testing.T) {
	dir := t.TempDir()
	at := time.Unix(1778573701, 0)
	x := testIndex(t, dir, "salt")
	x.pack.compactMin = 64 << 10
	y := testIndex(t, dir, "salt")
	record(t, y, "other", ar("rev1"), views.Events, []byte("other\n"), at)
	if !served(t, dir, "other", ar("rev1"), []byte("other\n")) {
		t.Fatal("not served before the compaction")
	}
	oldInfo, _ := os.Stat(x.pack.path)
	view := func(rev int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("rev %d\n", rev)), 2000) }
	maxSize := int64(0)
	for rev := range 100 {
		record(t, x, "s", ar(fmt.Sprint(rev)), views.Events, view(rev), at)
		x.pack.compactions.Wait() // compactions run in the background: the size after each one
		info, err := os.Stat(x.pack.path)
		if err != nil {
			t.Fatal(err)
		}
		maxSize = max(maxSize, info.Size())
	}
	if newInfo, _ := os.Stat(x.pack.path); os.SameFile(oldInfo, newInfo) {
		t.Fatal("never compacted")
	}
	// live: two records; the pack is compacted once it passes 64 KiB and twice the live bytes
	if limit := int64(64<<10) + 2*int64(len(view(99))+500); maxSize > limit {
		t.Errorf("the pack grew to %d bytes (limit %d)", maxSize, limit)
	}
	if !served(t, dir, "s", ar("99"), view(99)) || !served(t, dir, "other", ar("rev1"), []byte("other\n")) {
		t.Fatal("a live record was lost in the compaction")
	}
	if served(t, dir, "s", ar("98"), view(98)) {
		t.Fatal("a replaced entry was served")
	}
	// y framed the old file: it still reads it (its entry is in memory), then appends to the new one
	if r, ok := y.content("other", ar("rev1"), views.Events); !ok || string(r.Data) != "other\n" {
		t.Fatal("the process on the old file lost its entry")
	}
	record(t, y, "late", ar("rev1"), views.Events, []byte("late\n"), at)
	for id, data := range map[string]string{"s": string(view(99)), "other": "other\n", "late": "late\n"} {
		rev := ar("rev1")
		if id == "s" {
			rev = ar("99")
		}
		if !served(t, dir, id, rev, []byte(data)) {
			t.Errorf("%s not served after the other process's append", id)
		}
	}
	noTemporaries(t, dir)
}

// TestPackConcurrentWriters: writers in two processes (two descriptors: flock(2) locks are per open file)
// appending at once leave a pack of whole records, every one served.
func TestPackConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	at := time.Unix(1778573701, 0)
	writers := []*index{testIndex(t, dir, "salt"), testIndex(t, dir, "salt")}
	var wg sync.WaitGroup
	for w, x := range writers {
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 25 {
					id := fmt.Sprintf("w%d-g%d-%d", w, g, i)
					if _, ok, err := x.write(id, ar("rev1"), views.Events, at, func(wr io.Writer) error {
						_, err := wr.Write(bytes.Repeat([]byte(id+"\n"), 100))
						return err
					}); !ok || err != nil {
						t.Errorf("%s: ok %v, err %v", id, ok, err)
					}
				}
			}()
		}
	}
	wg.Wait()
	for _, x := range writers {
		x.flush()
	}
	framesWhole(t, writers[0].pack.path, 200)
	for w := range writers {
		for g := range 4 {
			for i := range 25 {
				id := fmt.Sprintf("w%d-g%d-%d", w, g, i)
				if !served(t, dir, id, ar("rev1"), bytes.Repeat([]byte(id+"\n"), 100)) {
					t.Errorf("%s not served", id)
				}
			}
		}
	}
}

// TestPackReadOnly: a pack this process may only read (a read-only bind mount of the cache directory as
// root, which opens any file for writing otherwise; modes as another user) is served, and an append to it
// fails without changing it.
func TestPackReadOnly(t *testing.T) {
	dir := t.TempDir()
	at := time.Unix(1778573701, 0)
	record(t, testIndex(t, dir, "salt"), "s", ar("rev1"), views.Events, []byte("s\n"), at)
	ro := dir
	if os.Geteuid() == 0 {
		ro = t.TempDir()
		if err := unix.Mount(dir, ro, "", unix.MS_BIND, ""); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Unmount(ro, unix.MNT_DETACH) })
		if err := unix.Mount("", ro, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			t.Fatal(err)
		}
	} else {
		if err := os.Chmod(testIndex(t, dir, "salt").pack.path, 0o400); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
	}
	x := testIndex(t, ro, "salt")
	before, _ := os.ReadFile(x.pack.path)
	if r, ok := x.content("s", ar("rev1"), views.Events); !ok || string(r.Data) != "s\n" {
		t.Fatal("a read-only pack was not served")
	}
	if x.pack.put(x.key("t"), []byte("x")) {
		t.Fatal("an append to a read-only pack succeeded")
	}
	if after, _ := os.ReadFile(x.pack.path); !bytes.Equal(before, after) || len(after) == 0 {
		t.Fatal("a read-only pack changed")
	}
}

// TestPackCompactionKeepsAppendsMeanwhile: records appended while a compaction copies (it holds no lock
// then) — by this process and by another — are in the compacted pack, and a key rewritten meanwhile is
// served with its newer entry.
func TestPackCompactionKeepsAppendsMeanwhile(t *testing.T) {
	dir := t.TempDir()
	at := time.Unix(1778573701, 0)
	x := testIndex(t, dir, "salt")
	x.pack.compactMin = 32 << 10
	y := testIndex(t, dir, "salt") // another process
	view := func(id string, rev int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("%s rev %d\n", id, rev)), 100) }
	during := false
	var failed []string // the hook runs on the compaction's goroutine, where t.Fatal may not
	x.pack.copied = func() {
		if during {
			return
		}
		during = true
		for _, w := range []struct {
			x   *index
			id  string
			rev int
		}{{x, "k0", 9}, {x, "new-x", 1}, {y, "new-y", 1}} { // k0 rewritten meanwhile
			data := view(w.id, w.rev)
			if _, ok, err := w.x.write(w.id, ar(fmt.Sprint(w.rev)), views.Events, at, func(wr io.Writer) error { _, err := wr.Write(data); return err }); !ok || err != nil {
				failed = append(failed, fmt.Sprintf("%s: ok %v, err %v", w.id, ok, err))
			}
		}
		x.flush() // appended while the compaction copies
		y.flush()
	}
	before, _ := os.Stat(x.pack.path)
	for rev := range 3 {
		for k := range 40 {
			id := fmt.Sprintf("k%d", k)
			record(t, x, id, ar(fmt.Sprint(rev)), views.Events, view(id, rev), at)
		}
	}
	x.pack.compactions.Wait()
	if !during || len(failed) > 0 {
		t.Fatalf("compaction ran: %v; appends during it: %v", during, failed)
	}
	if after, _ := os.Stat(x.pack.path); os.SameFile(before, after) {
		t.Fatal("the pack was not replaced")
	}
	for k := 1; k < 40; k++ {
		id := fmt.Sprintf("k%d", k)
		if !served(t, dir, id, ar("2"), view(id, 2)) {
			t.Errorf("%s lost", id)
		}
	}
	for id, rev := range map[string]int{"k0": 9, "new-x": 1, "new-y": 1} {
		if !served(t, dir, id, ar(fmt.Sprint(rev)), view(id, rev)) {
			t.Errorf("%s, appended during the compaction, is not served", id)
		}
	}
	if r, ok := x.content("new-y", ar("1"), views.Events); !ok || !bytes.Equal(r.Data, view("new-y", 1)) {
		t.Error("the compacting process does not serve the other process's append")
	}
	if p := framesWhole(t, x.pack.path, -1); x.pack.end != p.end {
		t.Fatalf("this process framed %d bytes of the compacted pack's %d", x.pack.end, p.end)
	}
	noTemporaries(t, dir)
}

// TestPackCompactionBacksOff: a compaction that another process's compaction overtakes (the path names
// another file when it would switch) is abandoned, leaves no temporary file, and is not tried again at
// every append, only once the pack has grown by packCompactMin more.
func TestPackCompactionBacksOff(t *testing.T) {
	dir := t.TempDir()
	at := time.Unix(1778573701, 0)
	x := testIndex(t, dir, "salt")
	x.pack.compactMin = 16 << 10
	attempts := 0
	x.pack.copied = func() {
		attempts++
		// another process's compaction: a copy of the pack renamed over it
		data, err := os.ReadFile(x.pack.path)
		if err == nil && os.WriteFile(x.pack.path+".other", data, 0o600) == nil {
			os.Rename(x.pack.path+".other", x.pack.path)
		}
	}
	view := func(rev int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("rev %d\n", rev)), 200) }
	for rev := range 40 {
		record(t, x, "s", ar(fmt.Sprint(rev)), views.Events, view(rev), at)
		x.pack.compactions.Wait()
	}
	x.pack.mu.Lock()
	retryAt, end := x.pack.retryAt, x.pack.end
	x.pack.mu.Unlock()
	// each abandoned attempt defers the next by compactMin bytes of appends: far fewer attempts than appends
	if attempts == 0 || attempts > 40*int(len(view(0)))/(16<<10)+2 || retryAt == 0 || retryAt <= end-(16<<10) {
		t.Fatalf("%d compactions attempted over 40 appends; retry at %d, pack %d bytes", attempts, retryAt, end)
	}
	if !served(t, dir, "s", ar("39"), view(39)) {
		t.Fatal("the latest entry is not served")
	}
	noTemporaries(t, dir)
}

// TestIndexPurge: a purged session is served by no index over the directory — this process's, another
// process's, or one opened later — and its view files are removed; purgeAbsent purges exactly the sessions
// a listing lacks; a compaction drops purged records, tombstones included, also when the purge comes while
// the compaction copies.
func TestIndexPurge(t *testing.T) {
	dir := t.TempDir()
	at := time.Unix(1778573701, 0)
	x := testIndex(t, dir, "salt")
	x.pack.compactMin = 32 << 10
	y := testIndex(t, dir, "salt") // another process
	view := func(id string) []byte { return bytes.Repeat([]byte(id+" line\n"), 200) }
	big := bytes.Repeat([]byte("{\"pad\":\""+strings.Repeat("p", 100)+"\"}\n"), blobMin/100+1) // a view in a file of its own
	for k := range 8 {
		id := fmt.Sprintf("s%d", k)
		record(t, x, id, ar("1"), views.Events, view(id), at)
	}
	record(t, x, "s0", ar("1"), views.Raw, big, at)
	if _, err := os.Stat(x.viewPath("s0", views.Raw)); err != nil {
		t.Fatalf("no view file for the large view: %v", err)
	}
	if !served(t, dir, "s1", ar("1"), view("s1")) || y.entry("s0", ar("1")) == nil {
		t.Fatal("not served before the purge")
	}

	x.purge([]string{"s0", "s1"})
	x.purgeAbsent([]string{"s2", "s3", "s4", "s5", "s6"}) // s7 is not listed
	for id, want := range map[string]bool{"s0": false, "s1": false, "s7": false, "s2": true, "s6": true} {
		if got := served(t, dir, id, ar("1"), view(id)); got != want {
			t.Errorf("%s served by a new index: %v, want %v", id, got, want)
		}
		y.forget(id) // the other process's memory; its pack must not name the entry either
		if got := y.entry(id, ar("1")) != nil; got != want {
			t.Errorf("%s served by the other process: %v, want %v", id, got, want)
		}
	}
	if _, err := os.Stat(x.viewPath("s0", views.Raw)); !os.IsNotExist(err) {
		t.Fatalf("the purged session's view file is still there: %v", err)
	}
	if keys := x.pack.keys(); len(keys) != 5 {
		t.Fatalf("%d keys with an entry, want 5", len(keys))
	}

	// a compaction leaves only live records; s2 purged while it copies is not found again in the new file
	during := false
	x.pack.copied = func() {
		if !during {
			during = true
			y.purge([]string{"s2"})
		}
	}
	for rev := range 12 {
		for _, id := range []string{"s3", "s4", "s5", "s6"} {
			record(t, x, id, ar(fmt.Sprint(rev+2)), views.Events, view(id+fmt.Sprint(rev)), at)
		}
	}
	x.pack.compactions.Wait()
	if !during {
		t.Fatal("no compaction ran")
	}
	record(t, x, "s3", ar("99"), views.Events, view("s3"), at) // x switches to the new file
	x.pack.compactions.Wait()                                  // (and may start another compaction)
	p := framesWhole(t, x.pack.path, 4)
	for _, id := range []string{"s0", "s1", "s2", "s7"} {
		if _, ok := p.recs[x.key(id)]; ok {
			t.Errorf("%s has a record after the compaction", id)
		}
	}
	if served(t, dir, "s2", ar("1"), view("s2")) {
		t.Error("s2, purged during the compaction, is served from the compacted pack")
	}
	noTemporaries(t, dir)
}

// TestPackBatches: a written entry is served at once by its own process, from memory while its batch waits;
// another process reads it once the batch is appended — when full, after packBatchDelay, or at a flush — and
// a tombstone follows the records queued before it.
func TestPackBatches(t *testing.T) {
	at := time.Unix(1778573701, 0)
	write := func(t *testing.T, x *index, id string) {
		t.Helper()
		if _, ok, err := x.write(id, ar("rev1"), views.Events, at, func(w io.Writer) error { _, err := w.Write([]byte(id + "\n")); return err }); !ok || err != nil {
			t.Fatalf("%s: ok %v, err %v", id, ok, err)
		}
	}
	tests := []struct {
		name   string
		writes int
		then   func(t *testing.T, x *index) // nil: the batch is appended by itself (full)
	}{
		{"full", packBatchRecs, nil},
		{"flushed", 3, func(t *testing.T, x *index) { x.flush() }},
		{"its delay passed", 3, func(t *testing.T, x *index) {
			deadline := time.Now().Add(10 * time.Second)
			for {
				x.pack.mu.Lock()
				left := len(x.pack.queue)
				x.pack.mu.Unlock()
				if left == 0 {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d records still queued", left)
				}
				runtime.Gosched()
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			x := testIndex(t, dir, "salt")
			for i := range tt.writes {
				write(t, x, fmt.Sprint("s", i))
			}
			last := fmt.Sprint("s", tt.writes-1)
			if r, ok := x.content(last, ar("rev1"), views.Events); !ok || string(r.Data) != last+"\n" {
				t.Fatal("a queued entry is not served by its own process")
			}
			if tt.then != nil {
				if served(t, dir, last, ar("rev1"), []byte(last+"\n")) {
					t.Fatal("another process read an entry before its batch was appended")
				}
				tt.then(t, x)
			}
			for i := range tt.writes {
				id := fmt.Sprint("s", i)
				if !served(t, dir, id, ar("rev1"), []byte(id+"\n")) {
					t.Fatalf("%s not served to another process", id)
				}
			}
			framesWhole(t, x.pack.path, tt.writes)
		})
	}

	t.Run("a tombstone after a queued record", func(t *testing.T) {
		dir := t.TempDir()
		x := testIndex(t, dir, "salt")
		write(t, x, "gone")
		x.purge([]string{"gone"})
		x.flush()
		if served(t, dir, "gone", ar("rev1"), []byte("gone\n")) {
			t.Fatal("an entry queued before its tombstone came back")
		}
	})
}

// TestPackBatchDropped: a batch the pack cannot take (a pack this process may only read) is dropped, and
// its entries are no longer served from memory.
func TestPackBatchDropped(t *testing.T) {
	dir := t.TempDir()
	x := testIndex(t, dir, "salt")
	if !x.pack.queueRec(x.key("s"), []byte("body")) {
		t.Fatal("queued nothing")
	}
	if _, ok := x.pack.known(x.key("s")); !ok {
		t.Fatal("a queued record is not known")
	}
	x.pack.mu.Lock()
	ro, err := os.Open(x.pack.path)
	if err != nil {
		t.Fatal(err)
	}
	x.pack.f.Close()
	x.pack.f = ro // the descriptor of a pack opened read-only
	x.pack.mu.Unlock()
	if x.pack.flush() {
		t.Fatal("a batch was appended to a pack open for reading only")
	}
	if _, ok := x.pack.known(x.key("s")); ok {
		t.Fatal("a dropped record is still known")
	}
	if info, err := os.Stat(x.pack.path); err != nil || info.Size() != 0 {
		t.Fatalf("the pack changed: %v", err)
	}
}

// TestPackQueuedReadAfterAppend: a queued record's bytes are read from the batch buffer only while its batch
// waits; once appended, the buffer holds the next batch, and the record is read from the file.
func TestPackQueuedReadAfterAppend(t *testing.T) {
	p := newPack(filepath.Join(t.TempDir(), "p.pack"))
	if !p.queueRec(strings.Repeat("a", packKeyLen), []byte("one")) {
		t.Fatal("queued nothing")
	}
	queuedRec, ok := p.known(strings.Repeat("a", packKeyLen))
	if !ok || queuedRec.mem == nil {
		t.Fatalf("not known as queued: %+v", queuedRec)
	}
	if !p.flush() {
		t.Fatal("flush")
	}
	p.queueRec(strings.Repeat("b", packKeyLen), []byte("two")) // the next batch, in the same buffer
	buf := make([]byte, 3)
	if p.readAt(queuedRec, buf, 0) {
		t.Fatalf("read %q through a record of an appended batch", buf)
	}
	fileRec, ok := p.known(strings.Repeat("a", packKeyLen))
	if !ok || fileRec.mem != nil || !p.readAt(fileRec, buf, 0) || string(buf) != "one" {
		t.Fatalf("the appended record reads %q (%+v)", buf, fileRec)
	}
	p.flush()
}
