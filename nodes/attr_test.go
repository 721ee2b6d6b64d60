package nodes

import (
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore"
)

func TestInoIsStableAndDistinct(t *testing.T) {
	a, b := ino("s1", "events.jsonl"), ino("s1", "events.jsonl")
	if a != b {
		t.Fatal("same identity, different inode")
	}
	seen := map[uint64]string{}
	for _, parts := range [][]string{{"s1", "events.jsonl"}, {"s1events.jsonl"}, {"s1", "events", "jsonl"}, {"s2", "events.jsonl"}, {"/sessions"}, {""}} {
		n := ino(parts...)
		if n <= 1 || n == ^uint64(0) {
			t.Fatalf("reserved inode %d for %v", n, parts)
		}
		if prev, dup := seen[n]; dup {
			t.Fatalf("%v and %s share inode %d", parts, prev, n)
		}
		seen[n] = parts[0]
	}
}

func TestEntryModTime(t *testing.T) {
	for rev, want := range map[string]time.Time{
		"65024:5308443:3163:1796030261315999226:1796030261339610442": time.Unix(0, 1796030261315999226),
		"1:2:3:-5:6": time.Unix(0, -5),
		"":           time.Unix(0, 0),
		"1:2":        time.Unix(0, 0),
	} {
		if got := EntryModTime(eventstore.Entry{Revision: rev}); !got.Equal(want) {
			t.Errorf("%q: %v, want %v", rev, got, want)
		}
	}
}
