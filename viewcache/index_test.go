package viewcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshfs/dshfs/views"
)

// TestIndexFile: an entry round-trips through the pack; an entry with a changed byte, a pack cut short or
// changed in a header, or an entry written for another session or revision is not served.
func TestIndexFile(t *testing.T) {
	dir := t.TempDir()
	x := testIndex(t, dir, "salt")
	at := time.Unix(1778573701, 279000000)
	events := []byte(strings.Repeat("{\"type\":\"x\"}\n", 1000))
	record(t, x, "s", ar("rev1"), views.Events, events, at)
	record(t, x, "s", ar("rev1"), views.Surface, make([]byte, 900), at)
	record(t, x, "s", ar("rev1"), views.Status, []byte("{}"), at) // not indexed: status changes without a new revision

	fresh := func() *index { return testIndex(t, dir, "salt") }
	want := sha256.Sum256(events)
	if n, mt, sum, ok := fresh().size("s", ar("rev1"), views.Events); !ok || n != int64(len(events)) || !mt.Equal(at) || sum != hex.EncodeToString(want[:]) {
		t.Fatalf("round trip: %d %v %s %v", n, mt, sum, ok)
	}
	if r, ok := fresh().content("s", ar("rev1"), views.Events); !ok || string(r.Data) != string(events) || r.Blob != nil {
		t.Fatalf("the view's bytes do not come back")
	}
	// small views are kept inside the entry, and entries in the pack: one file for the store
	if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) != 1 || files[0] != x.pack.path {
		t.Fatalf("files in the index directory: %v", files)
	}
	good, err := os.ReadFile(x.pack.path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(good, append(append([]byte(nil), events...), make([]byte, 900)...)) {
		t.Fatal("the views' bytes do not follow the entry's text in the order of its lines")
	}
	// the bytes of a view changed behind the entry's back are not served (the sizes, which the entry's
	// own checksum covers, still are)
	i := bytes.LastIndex(good, []byte(`{"type":"x"}`))
	changed := append(append(append([]byte(nil), good[:i]...), `{"type":"y"}`...), good[i+len(`{"type":"y"}`):]...)
	if err := os.WriteFile(x.pack.path, changed, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := fresh().content("s", ar("rev1"), views.Events); ok {
		t.Fatal("changed bytes kept inside the entry were served")
	}
	if r, ok := fresh().content("s", ar("rev1"), views.Surface); !ok || !bytes.Equal(r.Data, make([]byte, 900)) {
		t.Fatal("an unchanged view of the same entry was not served")
	}
	if err := os.WriteFile(x.pack.path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok := fresh().size("s", ar("rev1"), views.Status); ok {
		t.Fatal("status.json was indexed")
	}
	if _, _, _, ok := fresh().size("s", ar("rev2"), views.Events); ok {
		t.Fatal("served at another revision")
	}
	if _, _, _, ok := testIndex(t, dir, "other store").size("s", ar("rev1"), views.Events); ok {
		t.Fatal("served for another store")
	}
	// the pack holds two records of s: the first with the events view, the last with both views. Cut into
	// the last, s is its first record again; cut into a header or the entry's text, nothing of s.
	last := bytes.LastIndex(good, []byte(packMagic))
	otherKey := bytes.Clone(good) // the first record is another session's: still a record
	if otherKey[len(packMagic)] == 'a' {
		otherKey[len(packMagic)] = 'b'
	} else {
		otherKey[len(packMagic)] = 'a'
	}
	for _, c := range []struct {
		name            string
		data            []byte
		events, surface bool
	}{
		{"last record cut short", good[:len(good)-10], true, false},
		{"a torn record after the last", append(append([]byte(nil), good...), packMagic+x.key("s")+" 9999\n{"...), true, true},
		{"first header's magic changed", flip(good, 3), false, false},
		{"first record's key changed", otherKey, true, true},
		{"last entry's text changed", flip(good, last+120), false, false},
		{"empty", nil, false, false},
	} {
		if err := os.WriteFile(x.pack.path, c.data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, _, events := fresh().size("s", ar("rev1"), views.Events)
		_, _, _, surface := fresh().size("s", ar("rev1"), views.Surface)
		if events != c.events || surface != c.surface {
			t.Errorf("%s: events served %v, surface %v; want %v, %v", c.name, events, surface, c.events, c.surface)
		}
	}
	// another session's entry in a record of this one's key
	os.WriteFile(x.pack.path, nil, 0o600)
	y := testIndex(t, dir, "salt")
	record(t, y, "t", ar("rev1"), views.Events, []byte("x"), at)
	other := y.pack.body(y.key("t"))
	if other == nil || !y.pack.put(y.key("s"), other) {
		t.Fatal("could not forge the record")
	}
	if _, _, _, ok := fresh().size("s", ar("rev1"), views.Events); ok {
		t.Error("another session's entry was served")
	}
	if _, _, _, ok := fresh().size("t", ar("rev1"), views.Events); !ok {
		t.Error("the session's own entry was not served")
	}
}

// ar is the index's revision of an artifact whose token is token.
func ar(token string) artifactRev { return artifactRev{artifact: token} }

// flip is data with the bits of byte i inverted.
func flip(data []byte, i int) []byte {
	b := bytes.Clone(data)
	b[i] ^= 0xff
	return b
}

// record writes a view rendered in memory to the index, as Cache.Get does with a rendering.
func record(t *testing.T, x *index, id string, rev artifactRev, view views.View, data []byte, mtime time.Time) {
	t.Helper()
	if _, _, err := x.write(id, rev, view, mtime, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
		t.Fatal(err)
	}
	x.flush() // the batch appended, for the other indexes over the directory that read it
}

// TestIndexBlob: a view of blobMin bytes or more is written to its file as it is rendered and served from
// there, never whole in memory; the file is served again only while it holds the bytes the entry names.
func TestIndexBlob(t *testing.T) {
	dir := t.TempDir()
	x := testIndex(t, dir, "salt")
	at := time.Unix(1778573701, 279000000)
	line := []byte("{\"type\":\"x\",\"pad\":\"" + strings.Repeat("p", 100) + "\"}\n")
	n := blobMin/len(line) + 1
	render := func(w io.Writer) error {
		for i := 0; i < n; i++ {
			if _, err := w.Write(line); err != nil {
				return err
			}
		}
		return nil
	}
	want := bytes.Repeat(line, n)
	r, ok, err := x.write("s", ar("rev1"), views.Events, at, render)
	if !ok || err != nil || r.Blob == nil || r.Data != nil || r.Size() != int64(len(want)) {
		t.Fatalf("write: ok %v, err %v, blob %v, data %d bytes", ok, err, r.Blob != nil, len(r.Data))
	}
	x.flush()
	readBlob := func(r Rendered) []byte {
		t.Helper()
		got := make([]byte, r.Size())
		if _, err := r.Blob.ReadAt(got, 0); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		return got
	}
	if !bytes.Equal(readBlob(r), want) {
		t.Fatal("the blob is not the rendering")
	}
	sum := sha256.Sum256(want)
	if r.Sum != hex.EncodeToString(sum[:]) {
		t.Fatalf("sum %s", r.Sum)
	}
	fresh := func() *index { x.flush(); return testIndex(t, dir, "salt") } // another process, after x's batch
	got, ok := fresh().content("s", ar("rev1"), views.Events)
	if !ok || got.Blob == nil || !bytes.Equal(readBlob(got), want) {
		t.Fatal("the blob does not come back from the file")
	}
	// the blob read from before a replacement keeps its bytes: view files are renamed over, never rewritten
	if _, _, err := x.write("s", ar("rev2"), views.Events, at, func(w io.Writer) error { _, err := w.Write([]byte("short\n")); return err }); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readBlob(got), want) {
		t.Fatal("an open blob changed under its reader")
	}
	if _, err := os.Stat(x.viewPath("s", views.Events)); !os.IsNotExist(err) {
		t.Fatalf("the file of a view now kept inside the entry is still there: %v", err)
	}
	if _, ok := fresh().content("s", ar("rev1"), views.Events); ok {
		t.Fatal("served the old revision")
	}

	// a copy of the bytes (a new stamp) is hashed and served; a change in place is not
	if _, _, err := x.write("s", ar("rev3"), views.Events, at, render); err != nil {
		t.Fatal(err)
	}
	vp := x.viewPath("s", views.Events)
	if err := os.WriteFile(vp+".copy", want, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(vp+".copy", vp); err != nil {
		t.Fatal(err)
	}
	y := fresh()
	if got, ok := y.content("s", ar("rev3"), views.Events); !ok || !bytes.Equal(readBlob(got), want) {
		t.Fatal("a copy with the same bytes was not served")
	}
	if e := y.entry("s", ar("rev3")); e == nil {
		t.Fatal("no entry")
	} else if r, _ := e.views.get(views.Events); r.stamp == "" {
		t.Fatal("the verified copy's stamp was not remembered")
	} else if info, err := os.Stat(vp); err != nil || fileStamp(info) != r.stamp {
		t.Fatalf("remembered stamp %q, file %v", r.stamp, err)
	}
	f, err := os.OpenFile(vp, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("X"), 100)
	f.Close()
	if _, ok := y.content("s", ar("rev3"), views.Events); ok {
		t.Fatal("a view file changed in place was served")
	}

	// a view rendered whole arrives in one write (messages.jsonl), after a small one or not
	for _, pieces := range [][]int{{blobMin * 2}, {100, blobMin * 2}, {100, viewWriteBuffer - 1, blobMin, 7}} {
		var whole []byte
		r, ok, err := x.write("s", ar("rev5"), views.Messages, at, func(w io.Writer) error {
			for i, n := range pieces {
				p := bytes.Repeat([]byte{byte('a' + i)}, n)
				whole = append(whole, p...)
				if _, err := w.Write(p); err != nil {
					return err
				}
			}
			return nil
		})
		if !ok || err != nil || r.Blob == nil || !bytes.Equal(readBlob(r), whole) {
			t.Fatalf("pieces %v: ok %v, err %v, blob %v", pieces, ok, err, r.Blob != nil)
		}
	}

	// a rendering that fails records nothing and leaves no file behind
	boom := errors.New("boom")
	if _, ok, err := x.write("s", ar("rev4"), views.Surface, at, func(w io.Writer) error { w.Write(line); return boom }); !ok || err != boom {
		t.Fatalf("failed rendering: ok %v, err %v", ok, err)
	}
	if _, _, _, ok := fresh().size("s", ar("rev4"), views.Surface); ok {
		t.Fatal("a failed rendering was recorded")
	}
	noTemporaries(t, dir)
	// what an earlier version kept outside the pack (an entry file per session, and view files it named)
	// is removed when the pack has no entry for the session
	oldEntry := filepath.Join(dir, x.key("old")+".idx")
	for _, name := range []string{oldEntry, x.viewPath("old", views.Events)} {
		if err := os.WriteFile(name, []byte("dshfs-index 3\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if fresh().load("old") != nil {
		t.Fatal("read an entry the pack does not have")
	}
	for _, name := range []string{oldEntry, x.viewPath("old", views.Events)} {
		if _, err := os.Stat(name); !os.IsNotExist(err) {
			t.Errorf("an earlier version's file is still there: %v", err)
		}
	}
	if _, err := os.Stat(x.viewPath("s", views.Messages)); err != nil {
		t.Fatalf("a view file the pack names was removed: %v", err)
	}
}

// TestIndexConcurrentViews: views of one session written at once (the readahead workers and requests do)
// all end up in the entry, each served with its own bytes, whichever write carried which over.
func TestIndexConcurrentViews(t *testing.T) {
	dir := t.TempDir()
	x := testIndex(t, dir, "salt")
	at := time.Unix(1778573701, 279000000)
	want := map[views.View][]byte{}
	for i, v := range entryOrder {
		want[v] = bytes.Repeat([]byte{byte('a' + i)}, 1000*(i+1))
	}
	want[views.Raw] = bytes.Repeat([]byte("r"), blobMin+10) // one of its own file among them
	var wg sync.WaitGroup
	for _, v := range entryOrder {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok, err := x.write("s", ar("rev1"), v, at, func(w io.Writer) error { _, err := w.Write(want[v]); return err }); !ok || err != nil {
				t.Errorf("%v: ok %v, err %v", v, ok, err)
			}
		}()
	}
	wg.Wait()
	x.flush()
	y := testIndex(t, dir, "salt")
	for _, v := range entryOrder {
		r, ok := y.content("s", ar("rev1"), v)
		if !ok {
			t.Errorf("%v: not served after concurrent writes", v)
			continue
		}
		got := r.Data
		if r.Blob != nil {
			got = make([]byte, r.Size())
			r.Blob.ReadAt(got, 0)
		}
		if !bytes.Equal(got, want[v]) {
			t.Errorf("%v: %d bytes served, want %d", v, len(got), len(want[v]))
		}
	}
}

// TestIndexBound: the entries kept in memory stay within the bound, and a dropped one is served from the
// pack again.
func TestIndexBound(t *testing.T) {
	dir := t.TempDir()
	x := testIndex(t, dir, "salt")
	x.max = 16
	at := time.Unix(1778573701, 0)
	for i := range 100 {
		id := strconv.Itoa(i)
		record(t, x, id, ar("rev1"), views.Events, []byte(id+"\n"), at)
		if len(x.entries) > x.max {
			t.Fatalf("%d entries in memory after %d sessions", len(x.entries), i+1)
		}
	}
	for i := range 100 {
		id := strconv.Itoa(i)
		if r, ok := x.content(id, ar("rev1"), views.Events); !ok || string(r.Data) != id+"\n" {
			t.Fatalf("session %s not served", id)
		}
	}
	if len(x.entries) > x.max {
		t.Fatalf("%d entries in memory after reading them back", len(x.entries))
	}
}

// TestIndexStaleTemporaries: a temporary file a crashed writer left in the index directory is removed once
// it is older than staleTemp; a recent one (a live writer's) is left alone.
func TestIndexStaleTemporaries(t *testing.T) {
	dir := t.TempDir()
	x := testIndex(t, dir, "salt")
	stale := filepath.Join(dir, x.key("s")+".events.tmp-123")
	fresh := filepath.Join(filepath.Dir(x.pack.path), filepath.Base(x.pack.path)+".tmp-456")
	for _, name := range []string{stale, fresh} {
		if err := os.WriteFile(name, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * staleTemp)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	if x.load("s") != nil {
		t.Fatal("an entry from nowhere")
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("a stale temporary file is still there: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a recent temporary file was removed: %v", err)
	}
}

// TestIndexContentHeld: what this process rendered into the index is served from the entry it holds in
// memory; an entry only the pack holds (another process's, or one dropped from memory) is left to content,
// which reads the pack.
func TestIndexContentHeld(t *testing.T) {
	dir := t.TempDir()
	x := testIndex(t, dir, "salt")
	at := time.Unix(1778573701, 279000000)
	events := []byte("{\"type\":\"x\"}\n")
	record(t, x, "s", ar("rev1"), views.Events, events, at)
	tests := []struct {
		name      string
		x         *index
		rev       string
		held, all bool
	}{
		{"rendered here", x, "rev1", true, true},
		{"another revision", x, "rev2", false, false},
		{"only in the pack", testIndex(t, dir, "salt"), "rev1", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ok := tt.x.contentHeld("s", ar(tt.rev), views.Events)
			if ok != tt.held || ok && !bytes.Equal(r.Data, events) {
				t.Fatalf("held: %v %q, want %v", ok, r.Data, tt.held)
			}
			r, ok = tt.x.content("s", ar(tt.rev), views.Events)
			if ok != tt.all || ok && !bytes.Equal(r.Data, events) {
				t.Fatalf("content: %v %q, want %v", ok, r.Data, tt.all)
			}
		})
	}
}

// testIndex is newIndex whose last batch is appended before the test's directories are removed: a batch
// appended by its timer while t.TempDir's cleanup empties the directory would make the pack again there.
func testIndex(t *testing.T, dir, salt string) *index {
	x := newIndex(dir, salt)
	t.Cleanup(x.flush)
	return x
}
