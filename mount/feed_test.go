package mount

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/internal/eventtest"
	"github.com/dshfs/dshfs/internal/storetest"
)

// announcing is a JSONL backend that announces changes through a channel the test feeds, as a fleet
// store's LISTEN does, and names a source host per session ("h-" + id), as a fleet store's listing does.
type announcing struct {
	eventstore.Backend
	feed chan string
	mode string
	err  error
	// failLists fails that many listings to come, as an unreachable server does
	failLists atomic.Int32
}

func (a *announcing) Watch(ctx context.Context) (<-chan string, string, error) {
	return a.feed, a.mode, a.err
}

func (a *announcing) List(ctx context.Context) (eventstore.Listing, error) {
	if a.failLists.Add(-1) >= 0 {
		return eventstore.Listing{}, syscall.ECONNREFUSED
	}
	l, err := a.Backend.List(ctx)
	for i := range l.Entries {
		l.Entries[i].Host = "h-" + l.Entries[i].ID
	}
	return l, err
}

func feedFS(t *testing.T, b *announcing) (*FS, *eventstore.Store) {
	t.Helper()
	b.Backend = storetest.Raw(t).Backend()
	st := eventstore.New(b)
	storetest.Add(t, st, "a", `{"type":"feedback/record","seq":0,"time":1000,"data":{"text":"hello"}}`)
	storetest.Add(t, st, "b", `{"type":"feedback/record","seq":0,"time":1000,"data":{"text":"hello"}}`)
	f, err := New(Options{Store: st, Config: testConfig(t), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return f, st
}

// A store's change feed drives the mount as inotify does: an announced session's kept stat is dropped
// (its next revision is the new one), a session the listing does not know and a "" start a listing pass,
// the mode is in stats.json, and when the feed ends the mount says so and polls.
func TestFeedInvalidates(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := &announcing{feed: make(chan string), mode: "listen"}
	f, st := feedFS(t, b)
	go f.StartWatch(ctx)()
	if m := f.WatchMode(); m != "listen" {
		t.Fatalf("watch mode %q, want listen", m)
	}
	if s := string(f.StoreStats(context.Background())); !strings.Contains(s, `"watch":"listen"`) {
		t.Errorf("stats.json does not name the feed's mode: %s", s)
	}
	if e, _ := f.StableTimeouts(); e != stableTimeout {
		t.Errorf("entry timeout %v under a live feed, want %v", e, stableTimeout)
	}
	l := f.Listing()
	if got := l.Hosts["h-a"]; len(got) != 1 || l.Entries[got[0]].ID != "a" {
		t.Fatalf("hosts %v", l.Hosts)
	}
	path := l.Entries[l.ByID["a"]].Path
	token := func() string {
		art, err := st.Stat(ctx, "a", path)
		if err != nil {
			t.Fatal(err)
		}
		return art.Token
	}
	before := f.revisionOf(ctx, "a").Artifact
	if _, ok := f.stats.get("a", path); !ok || before != token() {
		t.Fatal("the stat of a session the feed vouches for was not kept")
	}

	// another writer appends: the kept stat stands until the feed announces the session
	h := *l.Entries[l.ByID["a"]].Header
	art, err := st.Stat(ctx, "a", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AppendBatch(ctx, h, art, eventtest.Events(t, `{"type":"feedback/record","seq":1,"time":1001,"data":{"text":"more"}}`), nil); err != nil {
		t.Fatal(err)
	}
	if f.revisionOf(ctx, "a").Artifact != before {
		t.Fatal("the kept stat was dropped with nothing announced: the test proves nothing")
	}
	b.feed <- "a"
	waitUntil(t, "the announced append's revision", func() bool { return f.revisionOf(ctx, "a").Artifact == token() })

	// a session created elsewhere: a listing pass adds it, under its host
	storetest.Add(t, st, "c", `{"type":"feedback/record","seq":0,"time":1000,"data":{"text":"hello"}}`)
	b.feed <- "c"
	waitUntil(t, "the announced session listed", func() bool {
		l := f.Listing()
		_, ok := l.ByID["c"]
		return ok && len(l.Hosts["h-c"]) == 1
	})
	// changes the feed may have missed: "" lists the store again
	storetest.Add(t, st, "d", `{"type":"feedback/record","seq":0,"time":1000,"data":{"text":"hello"}}`)
	b.feed <- ""
	waitUntil(t, "the store listed again after a rescan announcement", func() bool { _, ok := f.Listing().ByID["d"]; return ok })

	close(b.feed)
	waitUntil(t, "the ended feed to fall back to polling", func() bool { return f.WatchMode() == "refresh" && !f.feedLive.Load() })
	if _, ok := f.stats.get("a", path); ok {
		t.Error("a stat is still trusted after the feed ended")
	}
}

// A listing pass the feed asked for that fails (the server is still coming back) is tried again within
// refresh_interval, not left to the safety net's minute.
func TestFeedRetriesFailedPass(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := &announcing{feed: make(chan string), mode: "listen"}
	f, st := feedFS(t, b)
	f.opts.Config.FUSE.RefreshInterval = 50 * time.Millisecond
	go f.StartWatch(ctx)()
	storetest.Add(t, st, "c", `{"type":"feedback/record","seq":0,"time":1000,"data":{"text":"hello"}}`)
	b.failLists.Store(2)
	b.feed <- ""
	waitUntil(t, "the session listed after two failed passes", func() bool { _, ok := f.Listing().ByID["c"]; return ok })
	if n := b.failLists.Load(); n >= 0 {
		t.Errorf("%d failures left: the passes did not run", n+1)
	}
}

// A burst of announcements larger than feedBurst becomes one listing pass, not a stat per session.
func TestFeedBurst(t *testing.T) {
	ch := make(chan string, 2*feedBurst)
	for i := range 2 * feedBurst {
		ch <- string(rune('a' + i%26))
	}
	ids := drain(<-ch, ch)
	if len(ids) != 26 {
		t.Errorf("drained %d distinct ids of 26", len(ids))
	}
	for i := range 2 * feedBurst {
		ch <- strings.Repeat("x", i+1)
	}
	if ids := drain(<-ch, ch); len(ids) != feedBurst+1 {
		t.Errorf("drained %d ids, want feedBurst+1 = %d", len(ids), feedBurst+1)
	}
}

// A backend whose feed cannot start: the mount polls every refresh_interval and says so.
func TestFeedUnavailable(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f, _ := feedFS(t, &announcing{err: syscall.ECONNREFUSED})
	f.StartWatch(ctx)
	if m := f.WatchMode(); m != "refresh" || f.feedLive.Load() {
		t.Errorf("watch mode %q (live %v), want refresh", m, f.feedLive.Load())
	}
}

// A session whose backend names no owner is the mounting user's, mode 0600: under allow_other another
// user is refused, the mounting user is not.
func TestOwnerlessSession(t *testing.T) {
	b := &announcing{feed: make(chan string), mode: "listen"}
	f, _ := feedFS(t, b)
	f.opts.Config.FUSE.AllowOther = true
	l := f.Listing()
	next := *l
	next.Entries = append([]eventstore.Entry(nil), l.Entries...)
	next.Entries[l.ByID["a"]].Owner = nil
	next.Entries[l.ByID["a"]].Path = "postgres://db.example/fleet"
	f.listing.Store(&next)
	other := fuse.NewContext(context.Background(), &fuse.Caller{Owner: fuse.Owner{Uid: uint32(os.Geteuid()) + 4242, Gid: 4242}})
	o := f.Owner("a")
	if o == nil || o.UID != uint32(os.Getuid()) || o.GID != uint32(os.Getgid()) || o.Perm != 0o600 {
		t.Fatalf("owner %+v, want the mounting user's, 0600", o)
	}
	// a backend that names the owner itself, with a location that is no path: that mode, not narrowed
	// by directories it has none of
	next.Entries[l.ByID["b"]].Owner = &eventstore.Owner{UID: 7, GID: 8, Perm: 0o640}
	next.Entries[l.ByID["b"]].Path = "postgres://db.example/fleet"
	if o := f.Owner("b"); o == nil || *o != (eventstore.Owner{UID: 7, GID: 8, Perm: 0o640}) {
		t.Errorf("owner %+v, want the backend's", o)
	}
	group := fuse.NewContext(context.Background(), &fuse.Caller{Owner: fuse.Owner{Uid: 4243, Gid: 8}})
	if errno := f.PermitSession(group, "b"); errno != 0 {
		t.Errorf("a member of the group: %v", errno)
	}
	if errno := f.PermitSession(other, "b"); errno != syscall.EACCES {
		t.Errorf("another user: %v, want EACCES", errno)
	}
	if errno := f.PermitSession(other, "a"); errno != syscall.EACCES {
		t.Errorf("another user: %v, want EACCES", errno)
	}
	self := fuse.NewContext(context.Background(), &fuse.Caller{Owner: fuse.Owner{Uid: uint32(os.Geteuid()), Gid: uint32(os.Getegid())}})
	if errno := f.PermitSession(self, "a"); errno != 0 {
		t.Errorf("the mounting user: %v", errno)
	}
}
