package viewcache

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/views"
)

// rev is a revision of an artifact whose token is token.
func rev(token string) eventstore.Revision { return eventstore.Revision{Artifact: token} }

func TestCacheSharesLoadsAndHonoursBudgets(t *testing.T) {
	st := testStore(t, 4)
	ctx := context.Background()
	var loads atomic.Int32
	load := func(id string) func() (*views.Session, error) {
		return func() (*views.Session, error) {
			loads.Add(1)
			return views.Load(ctx, st, id, views.Options{})
		}
	}
	c := newLRU(9000, 100) // room for two one-event sessions
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.get(ctx, "a", rev("r1"), load("a")); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if loads.Load() != 1 {
		t.Fatalf("%d loads for one revision, want 1 shared load", loads.Load())
	}
	e, _ := c.get(ctx, "a", rev("r2"), load("a"))
	if loads.Load() != 2 {
		t.Fatal("a new revision must reload")
	}
	if _, err := c.render(ctx, e, views.Events, false); err != nil {
		t.Fatal(err)
	}
	if c.viewBytes > c.maxViews {
		t.Fatalf("view bytes %d over budget %d", c.viewBytes, c.maxViews)
	}
	for _, id := range []string{"b", "c", "d"} {
		if _, err := c.get(ctx, id, rev("r1"), load(id)); err != nil {
			t.Fatal(err)
		}
	}
	if c.sessionBytes > c.maxSessions {
		t.Fatalf("session bytes %d over budget %d", c.sessionBytes, c.maxSessions)
	}
	if _, ok := c.sessions["a"]; ok {
		t.Fatal("least recently used session not evicted")
	}
	if _, ok := c.view("a", rev("r2"), views.Events); ok && c.viewBytes > c.maxViews {
		t.Fatal("a view over the budget was kept")
	}
	c.drop("d")
	if _, ok := c.sessions["d"]; ok {
		t.Fatal("drop kept the session")
	}
}

func TestRenderedViewOutlivesItsSnapshot(t *testing.T) {
	st := testStore(t, 3)
	ctx := context.Background()
	c := newLRU(5000, 1<<20) // one snapshot at a time, plenty of room for views
	load := func(id string) func() (*views.Session, error) {
		return func() (*views.Session, error) { return views.Load(ctx, st, id, views.Options{}) }
	}
	e, err := c.get(ctx, "a", rev("r1"), load("a"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := c.render(ctx, e, views.Events, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.get(ctx, "b", rev("r1"), load("b")); err != nil {
		t.Fatal(err)
	}
	if c.has("a") {
		t.Fatal("snapshot a should have been evicted by b")
	}
	got, ok := c.view("a", rev("r1"), views.Events)
	if !ok || string(got.Data) != string(want.Data) {
		t.Fatal("rendered view lost with its snapshot")
	}
	if _, ok := c.view("a", rev("r2"), views.Events); ok {
		t.Fatal("a view must not serve another revision")
	}
	c.drop("a")
	if _, ok := c.view("a", rev("r1"), views.Events); ok {
		t.Fatal("drop kept the session's views")
	}
}
