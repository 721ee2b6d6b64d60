package mount

import (
	"errors"
	"testing"

	"context"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/internal/storetest"
)

// TestListingSharedName: when a stray directory's raw name decodes to a sibling's id, the mount shows
// the session the harness would open: the one it lists, else the one in the directory inspect(id) opens.
func TestListingSharedName(t *testing.T) {
	stray := eventstore.Entry{ID: "a\nb", Path: "/r/p/a\nb/session.jsonl"}
	canonical := eventstore.Entry{ID: "a\nb", Path: "/r/p/a~000Ab/session.jsonl"}
	refused := func(e eventstore.Entry) eventstore.Entry { e.Refusal = errors.New("refused"); return e }
	for _, tc := range []struct {
		name    string
		entries []eventstore.Entry
		want    string
	}{
		{"both listed, stray first", []eventstore.Entry{stray, canonical}, canonical.Path},
		{"both listed, canonical first", []eventstore.Entry{canonical, stray}, canonical.Path},
		{"only the stray listed", []eventstore.Entry{stray, refused(canonical)}, stray.Path},
		{"both refused", []eventstore.Entry{refused(stray), refused(canonical)}, canonical.Path},
	} {
		l := buildListing(eventstore.Listing{Entries: tc.entries}, "jsonl", "/r")
		if len(l.Entries) != 1 || l.Names[0] != "a~000Ab" || l.Entries[0].Path != tc.want {
			t.Errorf("%s: %d entries, first %q", tc.name, len(l.Entries), l.Entries[0].Path)
		}
	}
}

// testStore holds n one-event sessions a, b, c, ...
func testStore(t *testing.T, n int) *eventstore.Store {
	st := storetest.Raw(t)
	for i := 0; i < n; i++ {
		storetest.Add(t, st, string(rune('a'+i)), `{"type":"feedback/record","seq":0,"time":1000,"data":{"text":"hello"}}`)
	}
	return st
}

func TestDiffReportsChanges(t *testing.T) {
	st := testStore(t, 3)
	l, err := st.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	prev := buildListing(l, "jsonl+raw", "/r")
	next := buildListing(eventstore.Listing{Entries: []eventstore.Entry{l.Entries[0], l.Entries[1]}}, "jsonl+raw", "/r")
	next.Entries[0].Revision = "changed"
	c := diff(prev, next)
	if len(c.removed) != 1 || c.removed[0] != "c" || len(c.changed) != 2 || len(c.added) != 0 || len(c.gone) != 1 || c.gone[0] != "c" {
		t.Fatalf("diff %+v", c)
	}
	c = diff(next, prev)
	if len(c.added) != 1 || c.added[0] != "c" || len(c.gone) != 0 {
		t.Fatalf("diff %+v", c)
	}
	// a listing that failed in part names a session it missed as removed, but not as gone: the index keeps it
	next.RootErrors = []eventstore.RootError{{Path: "/r/x", Message: "permission denied"}}
	if c = diff(prev, next); len(c.removed) != 1 || len(c.gone) != 0 {
		t.Fatalf("diff over a failed listing %+v", c)
	}
}
