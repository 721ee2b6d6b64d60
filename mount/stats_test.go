package mount

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/dshfs/dshfs/config"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/jsonl"
)

// A stat is kept only when no drop of its session (or of everything) came between begin and put.
func TestStatCacheGenerations(t *testing.T) {
	c := newStatCache()
	a := eventstore.Artifact{Token: "t1"}
	since := c.begin()
	c.drop("s") // a change reported while the stat ran
	c.put("s", "/p", a, since)
	if _, ok := c.get("s", "/p"); ok {
		t.Fatal("kept a stat that raced with a change")
	}
	since = c.begin()
	c.drop("other")
	c.put("s", "/p", a, since)
	if got, ok := c.get("s", "/p"); !ok || got.Token != "t1" {
		t.Fatalf("another session's change dropped this one's stat: %v %v", got, ok)
	}
	if _, ok := c.get("s", "/elsewhere"); ok {
		t.Fatal("served a stat of another path")
	}
	since = c.begin()
	c.dropAll()
	if _, ok := c.get("s", "/p"); ok {
		t.Fatal("dropAll kept a stat")
	}
	c.put("s", "/p", a, since)
	if _, ok := c.get("s", "/p"); ok {
		t.Fatal("kept a stat that raced with dropAll")
	}
	c.put("s", "/p", a, c.begin())
	if _, ok := c.get("s", "/p"); !ok {
		t.Fatal("a stat after dropAll was not kept")
	}
}

// With inotify watching the store, a session's revision is served from the kept stat until the artifact
// changes, and an append or a replacement by another process is seen as soon as the watcher hears of it.
func TestStatCacheFollowsInotify(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := testStore(t, 2)
	root := st.Backend().(*jsonl.Backend).Root()
	f, err := New(Options{Store: st, Root: root, Config: testConfig(t), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	go f.Watch(ctx)
	path := f.Listing().Entries[f.Listing().ByID["a"]].Path
	waitUntil(t, "the session directory watched", func() bool { return f.vouched(path) })
	token := func() string { // the artifact's revision, stat'ed now
		art, err := st.Stat(ctx, "a", path)
		if err != nil {
			t.Fatal(err)
		}
		return art.Token
	}
	if got := f.revisionOf(ctx, "a").Artifact; got != token() {
		t.Fatalf("revision %s, artifact %s", got, token())
	}
	if _, ok := f.stats.get("a", path); !ok {
		t.Fatal("the stat of a watched artifact was not kept")
	}

	// another process appends: the watcher drops the stat, and the next revision is the new one
	fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteString(`{"type":"feedback/record","seq":1,"time":1001,"data":{"text":"more"}}` + "\n"); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	waitUntil(t, "the append's revision", func() bool { return f.revisionOf(ctx, "a").Artifact == token() })

	// replaced by rename (a new inode): a structural event drops every stat
	f.revisionOf(ctx, "b")
	tmp := path + ".new"
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the replacement's revision", func() bool { return f.revisionOf(ctx, "a").Artifact == token() })
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// coverage is a feed's coverage as a test sets it.
type coverage struct {
	gap   error
	local bool // every artifact vouched for
}

func (c coverage) Gap() error            { return c.gap }
func (c coverage) Vouches(p string) bool { return c.local }

// Stable names and attributes get a minute only while the change feed vouches for every artifact (inotify
// on every directory of a local store, or a database feed), and a configured timeout of 0 (no caching)
// stays 0.
func TestStableTimeouts(t *testing.T) {
	m := stableTimeout
	complete := coverage{local: true}
	full := coverage{gap: errors.New("inotify cannot watch /x: no space left on device")}
	remote := coverage{} // a network filesystem, or a database's own files
	for _, c := range []struct {
		name              string
		entry, attr       time.Duration
		live              bool
		cover             eventstore.WatchCoverage
		wantEntry, wantAt time.Duration
	}{
		{"polling", time.Second, 0, false, nil, time.Second, 0},
		{"inotify", time.Second, time.Second, true, complete, m, m},
		{"inotify out of watches", time.Second, 2 * time.Second, true, full, time.Second, 2 * time.Second},
		{"inotify on a network filesystem", time.Second, time.Second, true, remote, time.Second, time.Second},
		{"inotify ended", time.Second, time.Second, false, complete, time.Second, time.Second},
		{"a database's feed", time.Second, time.Second, true, nil, m, m},
		{"no attribute caching asked for", time.Second, 0, true, complete, m, 0},
		{"no entry caching asked for", 0, time.Second, true, complete, 0, m},
		{"longer configured", time.Hour, time.Hour, true, complete, time.Hour, time.Hour},
	} {
		cfg := config.Default()
		cfg.FUSE.EntryTimeout, cfg.FUSE.AttrTimeout = c.entry, c.attr
		f := &FS{opts: Options{Config: cfg}, cover: c.cover}
		f.feedLive.Store(c.live)
		if e, a := f.StableTimeouts(); e != c.wantEntry || a != c.wantAt {
			t.Errorf("%s: %v, %v; want %v, %v", c.name, e, a, c.wantEntry, c.wantAt)
		}
		if got, want := f.covered(), c.live && (c.cover == nil || c.cover.Gap() == nil); got != want {
			t.Errorf("%s: covered %v, want %v", c.name, got, want)
		}
	}
}
