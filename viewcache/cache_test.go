package viewcache

import (
	"context"
	"sync"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/internal/storetest"
	"github.com/dshfs/dshfs/views"
)

// testStore holds n one-event sessions a, b, c, ...
func testStore(t *testing.T, n int) *eventstore.Store {
	st := storetest.Raw(t)
	for i := 0; i < n; i++ {
		storetest.Add(t, st, string(rune('a'+i)), `{"type":"feedback/record","seq":0,"time":1000,"data":{"text":"hello"}}`)
	}
	return st
}

// testCache is a cache over st, its index on or off, in a directory of the test's own.
func testCache(t *testing.T, st *eventstore.Store, index bool) *Cache {
	c := New(Config{SessionsBytes: 32 << 20, ViewsBytes: 16 << 20, Index: index, IndexDir: t.TempDir(),
		Store: Store{Backend: st.Backend().Name(), Root: "test"},
		Load: func(ctx context.Context, id string) (*views.Session, error) {
			return views.Load(ctx, st, id, views.Options{})
		}})
	t.Cleanup(c.Close) // the last batch appended before the directory is removed (testIndex)
	return c
}

// keyNow is the key of a view of session id at its artifact's revision now.
func keyNow(t *testing.T, st *eventstore.Store, id string, view views.View) Key {
	t.Helper()
	art, err := st.Stat(context.Background(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	return Key{Session: id, View: view, Revision: eventstore.Revision{Artifact: art.Token, Identity: art.Identity}}
}

// TestRenderOnce: askers of one view at once render it once — the others wait and take the first's
// rendering — and all of them get the same bytes.
func TestRenderOnce(t *testing.T) {
	var fl flights
	k := flightKey{session: "k"}
	done, first := fl.join(k)
	if !first || done != nil {
		t.Fatal("the first to join is not first")
	}
	wait, first := fl.join(k)
	if first {
		t.Fatal("a second asker is first too")
	}
	if _, other := fl.join(flightKey{session: "k", rev: ar("r")}); !other {
		t.Fatal("another key waits on this one")
	}
	select {
	case <-wait:
		t.Fatal("done before the first left")
	default:
	}
	fl.leave(k)
	<-wait
	if _, first := fl.join(k); !first {
		t.Fatal("after the first left, the next is not first")
	}

	ctx := context.Background()
	st := testStore(t, 2)
	for _, index := range []bool{true, false} {
		c := testCache(t, st, index)
		k := keyNow(t, st, "a", views.Events)
		got := make([][]byte, 8)
		var wg sync.WaitGroup
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := c.Get(ctx, k)
				if err != nil {
					t.Error(err)
					return
				}
				got[i] = r.Data
			}()
		}
		wg.Wait()
		want, err := views.Load(ctx, st, "a", views.Options{})
		if err != nil {
			t.Fatal(err)
		}
		w, _ := want.Render(ctx, views.Events)
		for i, b := range got {
			if string(b) != string(w) {
				t.Fatalf("index %v, asker %d: %d bytes, want the %d of a fresh rendering", index, i, len(b), len(w))
			}
		}
		if len(c.renders.m) != 0 {
			t.Fatalf("renderings left under way: %v", c.renders.m)
		}
		if n := c.Decodes(); n != 1 {
			t.Fatalf("index %v: %d decodes for one view asked at once, want 1", index, n)
		}
	}
}

// TestIndexLayerOptional: with the index on, a fresh cache over the same directory serves a view's size
// and bytes without decoding; with it off, the same keys get the same bytes by decoding.
func TestIndexLayerOptional(t *testing.T) {
	ctx := context.Background()
	st := testStore(t, 1)
	dir := t.TempDir()
	mk := func(index bool) *Cache {
		c := New(Config{SessionsBytes: 32 << 20, ViewsBytes: 16 << 20, Index: index, IndexDir: dir,
			Store: Store{Backend: st.Backend().Name(), Root: "test"},
			Load: func(ctx context.Context, id string) (*views.Session, error) {
				return views.Load(ctx, st, id, views.Options{})
			}})
		t.Cleanup(c.Close)
		return c
	}
	k := keyNow(t, st, "a", views.Events)
	cold := mk(true)
	want, err := cold.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	cold.Close() // its index entry appended for the next cache over the directory
	warm := mk(true)
	if _, n, err := warm.Stat(ctx, k); err != nil || n != want.Size() || warm.Decodes() != 0 || warm.IndexHits() != 1 {
		t.Fatalf("indexed stat: %d bytes (want %d), %v, %d decodes, %d hits", n, want.Size(), err, warm.Decodes(), warm.IndexHits())
	}
	if r, ok := warm.Kept(k); !ok || string(r.Data) != string(want.Data) {
		t.Fatal("the index does not keep the view's bytes")
	}
	off := mk(false)
	if _, ok := off.Kept(k); ok || off.Known(k) {
		t.Fatal("a cache without the index knows a view it never rendered")
	}
	r, n, err := off.Stat(ctx, k)
	if err != nil || n != want.Size() || string(r.Data) != string(want.Data) || off.Decodes() != 1 || off.IndexHits() != 0 {
		t.Fatalf("stat without the index: %d bytes, %v, %d decodes", n, err, off.Decodes())
	}
	// a live session's key never reaches the index
	live := k
	live.Live = true
	if _, ok := mk(true).Kept(live); ok {
		t.Fatal("the index served a live session")
	}
}
