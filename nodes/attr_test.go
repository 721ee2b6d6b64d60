package nodes

import "testing"

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
