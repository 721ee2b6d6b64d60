package fs

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/views"
)

// TestIndexFile: an entry round-trips through its file; a file with a changed byte, a truncated one, or
// one written for another session or revision is not served.
func TestIndexFile(t *testing.T) {
	dir := t.TempDir()
	x := newIndex(dir, "salt")
	at := time.Unix(1778573701, 279000000)
	events := []byte(strings.Repeat("{\"type\":\"x\"}\n", 1000))
	x.record("s", "rev1", views.Events, events, at)
	x.record("s", "rev1", views.Surface, make([]byte, 900), at)
	x.record("s", "rev1", views.Status, []byte("{}"), at) // not indexed: status changes without a new revision

	fresh := func() *index { return newIndex(dir, "salt") }
	want := sha256.Sum256(events)
	if n, mt, sum, ok := fresh().size("s", "rev1", views.Events); !ok || n != int64(len(events)) || !mt.Equal(at) || sum != hex.EncodeToString(want[:]) {
		t.Fatalf("round trip: %d %v %s %v", n, mt, sum, ok)
	}
	if data, _, ok := fresh().content("s", "rev1", views.Events); !ok || string(data) != string(events) {
		t.Fatalf("the view's bytes do not come back")
	}
	// a view file changed behind the entry's back is not served
	vp := x.viewPath("s", views.Events)
	os.WriteFile(vp, []byte(strings.Replace(string(events), "x", "y", 1)), 0o600)
	if _, _, ok := fresh().content("s", "rev1", views.Events); ok {
		t.Fatal("a changed view file was served")
	}
	os.WriteFile(vp, events, 0o600)
	if _, _, _, ok := fresh().size("s", "rev1", views.Status); ok {
		t.Fatal("status.json was indexed")
	}
	if _, _, _, ok := fresh().size("s", "rev2", views.Events); ok {
		t.Fatal("served at another revision")
	}
	if _, _, _, ok := newIndex(dir, "other store").size("s", "rev1", views.Events); ok {
		t.Fatal("served for another store")
	}
	good, err := os.ReadFile(x.path("s"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"truncated": good[:len(good)-10],
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
	y.record("t", "rev1", views.Events, []byte("x"), at)
	other, _ := os.ReadFile(y.path("t"))
	os.WriteFile(x.path("s"), other, 0o600)
	if _, _, _, ok := fresh().size("s", "rev1", views.Events); ok {
		t.Error("another session's entry was served")
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
