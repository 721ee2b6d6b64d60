package sqlite

import (
	"context"
	"testing"
	"time"
)

// TestWatch: the database's change feed announces a commit as "" (a listing finds which sessions moved),
// vouches for no session's stat, and ends with its context.
func TestWatch(t *testing.T) {
	b, _ := newDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	feed, mode, err := b.Watch(ctx)
	if err != nil || mode != WatchInotify {
		t.Fatalf("watch: %q, %v", mode, err)
	}
	if b.Gap() != nil || b.Vouches("") || b.Vouches(b.path) {
		t.Fatalf("gap %v, vouches %v", b.Gap(), b.Vouches(""))
	}
	if _, err := b.Materialize(ctx, hdr("s"), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-feed:
		if got != "" {
			t.Fatalf("announced %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a commit was not announced")
	}
	cancel()
	for range feed {
	}
	if b.watch.Load() != nil {
		t.Fatal("the ended feed is still followed")
	}
}
