package nodes

import (
	"context"
	"testing"
)

// TestDirIndex: a directory with a key lists once per state: lookups of its entries (READDIRPLUS makes
// one per entry) reuse the index until the key changes.
func TestDirIndex(t *testing.T) {
	lists := 0
	state := 1
	d := &dir{
		list: func(context.Context) ([]child, error) {
			lists++
			kids := make([]child, 1000)
			for i := range kids {
				kids[i] = child{name: string(rune('a'+i%26)) + string(rune(i)), ino: uint64(i + state)}
			}
			return kids, nil
		},
		key: func(context.Context) (any, error) { return state, nil },
	}
	ctx := context.Background()
	for i := 0; i < 1000; i++ {
		idx, err := d.indexed(ctx)
		if err != nil || len(idx) != 1000 {
			t.Fatalf("index: %d entries, %v", len(idx), err)
		}
	}
	if lists != 1 {
		t.Fatalf("1000 lookups listed the directory %d times, want once", lists)
	}
	state = 2
	idx, _ := d.indexed(ctx)
	if lists != 2 || idx[string(rune('a'))+string(rune(0))].ino != 2 {
		t.Fatalf("after the state changed: %d listings", lists)
	}
}
