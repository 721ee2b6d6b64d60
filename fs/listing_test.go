package fs

import (
	"errors"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
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
