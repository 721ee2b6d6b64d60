package jsonl

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// await reads the feed until want arrives (a write raises several events, a created file a structural
// one first), failing after a generous deadline.
func await(t *testing.T, feed <-chan string, want, what string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got, ok := <-feed:
			if !ok {
				t.Fatalf("%s: the feed ended", what)
			}
			if got == want {
				return
			}
		case <-deadline:
			t.Fatalf("%s: no announcement %q", what, want)
		}
	}
}

func appendTo(t *testing.T, path, line string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line); err != nil {
		t.Fatal(err)
	}
}

// TestWatch: the JSONL store's change feed announces a session's transcript written by its id and a
// session created as "", vouches for the artifacts of its watched directories while it runs, follows the
// sessions each listing finds, and ends with its context.
func TestWatch(t *testing.T) {
	root := t.TempDir()
	a := writeRawSession(t, root, "a", lines([]string{headerLine("a")}, turn(0, 0)))
	b, err := Open(root, None)
	if err != nil {
		t.Fatal(err)
	}
	if b.Vouches(a) || b.Gap() != nil {
		t.Fatal("a store with no feed running vouches for its artifacts, or has a gap")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	feed, mode, err := b.Watch(ctx)
	if err != nil || mode != WatchInotify {
		t.Fatalf("watch: %q, %v", mode, err)
	}
	if !b.Vouches(a) || !b.Vouches("") || b.Gap() != nil {
		t.Fatalf("a watched local store: vouches for a %v, for all %v, gap %v", b.Vouches(a), b.Vouches(""), b.Gap())
	}
	appendTo(t, a, "\n")
	await(t, feed, "a", "the transcript written")

	// a session created beside it: structural, and listed, its own writes are announced by its id
	s := writeRawSession(t, root, "b/c", lines([]string{headerLine("b/c")}, turn(0, 0)))
	await(t, feed, "", "a session created")
	if _, err := b.List(ctx); err != nil {
		t.Fatal(err)
	}
	if !b.Vouches(s) {
		t.Fatal("a listed session's artifact is not vouched for")
	}
	appendTo(t, s, "\n")
	await(t, feed, "b/c", "the new session's transcript written")

	// the lease is opened for writing around every write: it says nothing
	for quiet := false; !quiet; { // the write's other events (IN_CLOSE_WRITE) first
		select {
		case <-feed:
		case <-time.After(200 * time.Millisecond):
			quiet = true
		}
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(a), LeaseName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	appendTo(t, a, "\n")
	select {
	case got := <-feed:
		if got != "a" {
			t.Fatalf("announced %q before the transcript's write", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing announced")
	}

	cancel()
	for range feed {
	}
	if b.Vouches(a) {
		t.Fatal("a store whose feed ended still vouches for its artifacts")
	}
}
