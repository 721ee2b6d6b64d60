package nodes

import (
	"context"
	"testing"
)

// thousand lists 1000 entries per state, counting its listings.
type thousand struct {
	lists, state int
}

func (l *thousand) list(context.Context) ([]child, error) {
	l.lists++
	kids := make([]child, 1000)
	for i := range kids {
		kids[i] = child{name: string(rune('a'+i%26)) + string(rune(i)), ino: uint64(i + l.state)}
	}
	return kids, nil
}

// TestListingIndex: a directory with an index lists once per state: lookups of its entries (READDIRPLUS
// makes one per entry) reuse the index until the state changes.
func TestListingIndex(t *testing.T) {
	l := &thousand{state: 1}
	var x listingIndex
	ctx := context.Background()
	for i := 0; i < 1000; i++ {
		name := string(rune('a'+i%26)) + string(rune(i))
		c, ok, err := x.find(ctx, l.state, l, name)
		if err != nil || !ok || c.ino != uint64(i+1) {
			t.Fatalf("lookup %q: %+v %v %v", name, c, ok, err)
		}
	}
	if l.lists != 1 {
		t.Fatalf("1000 lookups listed the directory %d times, want once", l.lists)
	}
	l.state = 2
	c, _, _ := x.find(ctx, l.state, l, string(rune('a'))+string(rune(0)))
	if l.lists != 2 || c.ino != 2 {
		t.Fatalf("after the state changed: %d listings", l.lists)
	}
	x.dropListing()
	x.find(ctx, l.state, l, "x")
	if l.lists != 3 {
		t.Fatalf("after dropListing: %d listings, want a new one", l.lists)
	}
}
