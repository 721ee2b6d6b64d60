package fs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshfs/dshfs/nodes"
	"github.com/dshfs/dshfs/views"
)

// TestIndexFile: an entry round-trips through its file; a file with a changed byte, a truncated one, or
// one written for another session or revision is not served.
func TestIndexFile(t *testing.T) {
	dir := t.TempDir()
	x := newIndex(dir, "salt")
	at := time.Unix(1778573701, 279000000)
	events := []byte(strings.Repeat("{\"type\":\"x\"}\n", 1000))
	record(t, x, "s", "rev1", views.Events, events, at)
	record(t, x, "s", "rev1", views.Surface, make([]byte, 900), at)
	record(t, x, "s", "rev1", views.Status, []byte("{}"), at) // not indexed: status changes without a new revision

	fresh := func() *index { return newIndex(dir, "salt") }
	want := sha256.Sum256(events)
	if n, mt, sum, ok := fresh().size("s", "rev1", views.Events); !ok || n != int64(len(events)) || !mt.Equal(at) || sum != hex.EncodeToString(want[:]) {
		t.Fatalf("round trip: %d %v %s %v", n, mt, sum, ok)
	}
	if r, ok := fresh().content("s", "rev1", views.Events); !ok || string(r.Data) != string(events) || r.Blob != nil {
		t.Fatalf("the view's bytes do not come back")
	}
	// a small view is kept inside the entry: one file per session
	if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) != 1 || files[0] != x.path("s") {
		t.Fatalf("files in the index directory: %v", files)
	}
	good, err := os.ReadFile(x.path("s"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(good, append(append([]byte(nil), events...), make([]byte, 900)...)) {
		t.Fatal("the views' bytes do not follow the entry's text in the order of its lines")
	}
	// the bytes of a view changed behind the entry's back are not served (the sizes, which the entry's
	// own checksum covers, still are)
	if err := os.WriteFile(x.path("s"), bytes.Replace(good, []byte(`{"type":"x"}`), []byte(`{"type":"y"}`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := fresh().content("s", "rev1", views.Events); ok {
		t.Fatal("changed bytes kept inside the entry were served")
	}
	if r, ok := fresh().content("s", "rev1", views.Surface); !ok || !bytes.Equal(r.Data, make([]byte, 900)) {
		t.Fatal("an unchanged view of the same entry was not served")
	}
	if err := os.WriteFile(x.path("s"), good, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok := fresh().size("s", "rev1", views.Status); ok {
		t.Fatal("status.json was indexed")
	}
	if _, _, _, ok := fresh().size("s", "rev2", views.Events); ok {
		t.Fatal("served at another revision")
	}
	if _, _, _, ok := newIndex(dir, "other store").size("s", "rev1", views.Events); ok {
		t.Fatal("served for another store")
	}
	for name, data := range map[string][]byte{
		"truncated": good[:len(good)-10],
		"grown":     append(append([]byte(nil), good...), 'x'),
		"text only": good[:bytes.Index(good, []byte("\nsha256 "))+len("\nsha256 ")+65],
		"changed":   append(append([]byte(nil), good[:20]...), append([]byte{good[20] ^ 1}, good[21:]...)...),
		"empty":     nil,
	} {
		if err := os.WriteFile(x.path("s"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, _, ok := fresh().size("s", "rev1", views.Events); ok {
			t.Errorf("a %s file was served", name)
		}
	}
	// another session's file under this one's name
	y := newIndex(dir, "salt")
	record(t, y, "t", "rev1", views.Events, []byte("x"), at)
	other, _ := os.ReadFile(y.path("t"))
	os.WriteFile(x.path("s"), other, 0o600)
	if _, _, _, ok := fresh().size("s", "rev1", views.Events); ok {
		t.Error("another session's entry was served")
	}
}

// record writes a view rendered in memory to the index, as renderAt does with a rendering.
func record(t *testing.T, x *index, id, rev string, view views.View, data []byte, mtime time.Time) {
	t.Helper()
	if _, _, err := x.write(id, rev, view, mtime, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
		t.Fatal(err)
	}
}

// TestIndexBlob: a view of blobMin bytes or more is written to its file as it is rendered and served from
// there, never whole in memory; the file is served again only while it holds the bytes the entry names.
func TestIndexBlob(t *testing.T) {
	dir := t.TempDir()
	x := newIndex(dir, "salt")
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
	r, ok, err := x.write("s", "rev1", views.Events, at, render)
	if !ok || err != nil || r.Blob == nil || r.Data != nil || r.Size() != int64(len(want)) {
		t.Fatalf("write: ok %v, err %v, blob %v, data %d bytes", ok, err, r.Blob != nil, len(r.Data))
	}
	readBlob := func(r nodes.Rendered) []byte {
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
	fresh := func() *index { return newIndex(dir, "salt") }
	got, ok := fresh().content("s", "rev1", views.Events)
	if !ok || got.Blob == nil || !bytes.Equal(readBlob(got), want) {
		t.Fatal("the blob does not come back from the file")
	}
	// the blob read from before a replacement keeps its bytes: view files are renamed over, never rewritten
	if _, _, err := x.write("s", "rev2", views.Events, at, func(w io.Writer) error { _, err := w.Write([]byte("short\n")); return err }); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readBlob(got), want) {
		t.Fatal("an open blob changed under its reader")
	}
	if _, err := os.Stat(x.viewPath("s", views.Events)); !os.IsNotExist(err) {
		t.Fatalf("the file of a view now kept inside the entry is still there: %v", err)
	}
	if _, ok := fresh().content("s", "rev1", views.Events); ok {
		t.Fatal("served the old revision")
	}

	// a copy of the bytes (a new stamp) is hashed and served; a change in place is not
	if _, _, err := x.write("s", "rev3", views.Events, at, render); err != nil {
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
	if got, ok := y.content("s", "rev3", views.Events); !ok || !bytes.Equal(readBlob(got), want) {
		t.Fatal("a copy with the same bytes was not served")
	}
	if e := y.entry("s", "rev3"); e == nil || e.views[views.Events].stamp == "" {
		t.Fatal("the verified copy's stamp was not remembered")
	} else if info, err := os.Stat(vp); err != nil || fileStamp(info) != e.views[views.Events].stamp {
		t.Fatalf("remembered stamp %q, file %v", e.views[views.Events].stamp, err)
	}
	f, err := os.OpenFile(vp, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("X"), 100)
	f.Close()
	if _, ok := y.content("s", "rev3", views.Events); ok {
		t.Fatal("a view file changed in place was served")
	}

	// a view rendered whole arrives in one write (messages.jsonl), after a small one or not
	for _, pieces := range [][]int{{blobMin * 2}, {100, blobMin * 2}, {100, viewWriteBuffer - 1, blobMin, 7}} {
		var whole []byte
		r, ok, err := x.write("s", "rev5", views.Messages, at, func(w io.Writer) error {
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
	if _, ok, err := x.write("s", "rev4", views.Surface, at, func(w io.Writer) error { w.Write(line); return boom }); !ok || err != boom {
		t.Fatalf("failed rendering: ok %v, err %v", ok, err)
	}
	if _, _, _, ok := fresh().size("s", "rev4", views.Surface); ok {
		t.Fatal("a failed rendering was recorded")
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*.tmp-*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	// an entry of the previous format (every view in a file of its own), with a valid checksum, is not read,
	// and the view files it named are removed
	mp := x.viewPath("s", views.Messages)
	if _, err := os.Stat(mp); err != nil {
		t.Fatal(err)
	}
	body, _, _ := cutLastLine(x.entries["s"].encode(nil, "s", nil))
	old := strings.Replace(string(body), indexMagic, oldMagic, 1)
	if !regexp.MustCompile(`\nview messages \d+ [0-9a-f]{64} \d+:`).MatchString(old) {
		t.Fatalf("not an entry naming a view file with its stamp: %q", old)
	}
	os.WriteFile(x.path("s"), []byte(old+"sha256 "+hexSum([]byte(old))+"\n"), 0o600)
	if fresh().load("s") != nil {
		t.Fatal("read an entry of another format")
	}
	if _, err := os.Stat(mp); !os.IsNotExist(err) {
		t.Fatalf("the old format's view file is still there: %v", err)
	}
}

// TestTrees: the least recently shown sessions fall out of the bound, in order; showing one again keeps it.
func TestTrees(t *testing.T) {
	tr := newTrees(2)
	for _, c := range []struct {
		id, evicted string
	}{{"a", ""}, {"b", ""}, {"a", ""}, {"c", "b"}, {"d", "a"}, {"c", ""}, {"e", "d"}} {
		got := tr.touch(c.id)
		if (c.evicted == "" && len(got) != 0) || (c.evicted != "" && (len(got) != 1 || got[0] != c.evicted)) {
			t.Fatalf("touch %s: evicted %v, want %q", c.id, got, c.evicted)
		}
	}
}

// TestIndexConcurrentViews: views of one session written at once (the readahead workers and requests do)
// all end up in the entry file, each served with its own bytes, whichever write carried which over.
func TestIndexConcurrentViews(t *testing.T) {
	dir := t.TempDir()
	x := newIndex(dir, "salt")
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
			if _, ok, err := x.write("s", "rev1", v, at, func(w io.Writer) error { _, err := w.Write(want[v]); return err }); !ok || err != nil {
				t.Errorf("%v: ok %v, err %v", v, ok, err)
			}
		}()
	}
	wg.Wait()
	y := newIndex(dir, "salt")
	for _, v := range entryOrder {
		r, ok := y.content("s", "rev1", v)
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
