package nodes

import (
	"context"
	"strconv"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/internal/storetest"
	"github.com/dshfs/dshfs/views"
)

// snapshotSource serves one loaded session; what the item directories do not ask for is left unset.
type snapshotSource struct {
	Source
	s *views.Session
}

func (f snapshotSource) Session(context.Context, string) (*views.Session, error) { return f.s, nil }

// An item directory's Readdir and Lookup give every entry the same inode number, of the session, the
// directory, the item's key and the artifact; trace/ answers a seq it does not list with the same number a
// listing would give it.
func TestItemDirInodes(t *testing.T) {
	st := storetest.Raw(t)
	storetest.Add(t, st, "s",
		`{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}`,
		`{"type":"turn/end","seq":1,"time":6,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
	)
	s, err := views.Load(context.Background(), st, "s", views.Options{})
	if err != nil || s.Refusal != nil {
		t.Fatal(err, s.Refusal)
	}
	src := snapshotSource{s: s}
	tr := &tree{src: src}
	sess := &sessionDir{dirNode: dirNode{src: src, sess: "s"}, t: tr, e: eventstore.Entry{ID: "s"}, name: "s"}
	ctx := context.Background()
	for _, dir := range views.Dirs {
		d := sess.itemDir(dir)
		kids, err := d.list(ctx)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, c := range kids {
			if c.name == "" || c.ino <= 1 {
				t.Errorf("%s/%s: inode %d", dir, c.name, c.ino)
			}
			var found child
			if dir.Addressable() {
				it, ok, err := s.Find(dir, c.name)
				if !ok || err != nil {
					t.Fatalf("%s/%s: not found (%v)", dir, c.name, err)
				}
				found = itemEntry{d: d, item: it, gen: s.Identity}.child()
			} else if found, _, err = d.find(ctx, s, d, c.name); err != nil {
				t.Fatal(err)
			}
			if found.ino != c.ino {
				t.Errorf("%s/%s: listed as inode %d, looked up as %d", dir, c.name, c.ino, found.ino)
			}
		}
	}
	it, ok, _ := s.Find(views.DirTrace, "0000000001.json")
	got := itemEntry{d: sess.itemDir(views.DirTrace), item: it, gen: s.Identity}.child().ino
	if want := fileIno(ino("s", "trace", strconv.Itoa(1)), s.Identity); !ok || got != want {
		t.Fatalf("trace/0000000001.json: inode %d, want %d", got, want)
	}
}
