package jsonl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore"
)

// settledClock judges every directory settled: its changes are an hour old.
func settledClock() time.Time { return time.Now().Add(time.Hour) }

func dirStampOf(t *testing.T, dir string) dirStamp {
	t.Helper()
	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := stampOf(info)
	if !ok {
		t.Fatalf("no stamp for %s", dir)
	}
	return s
}

// awaitNewStamp changes dir (a name made and removed) until its stamp is no longer old: two changes within
// one tick of the filesystem's clock may leave the same one, and the cache relies on a later change
// carrying a later time, which is what it waits for.
func awaitNewStamp(t *testing.T, dir string, old dirStamp) {
	t.Helper()
	tick := filepath.Join(dir, ".tick")
	for i := 0; dirStampOf(t, dir) == old; i++ {
		if i > 1_000_000 {
			t.Fatalf("the stamp of %s never changed", dir)
		}
		if err := os.WriteFile(tick, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(tick); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDirCache(t *testing.T) {
	tests := []struct {
		name    string
		clock   func() time.Time
		change  func(t *testing.T, dir string) // between the second and third listings; nil: none
		listed  int                            // times the directory is read over three listings
		wantNew bool                           // the third listing has the name change made
	}{
		{name: "settled and unchanged: read once", clock: settledClock, listed: 1},
		{name: "changed recently: read every time", clock: time.Now, listed: 3},
		{name: "a name added: read again", clock: settledClock, listed: 2, wantNew: true,
			change: func(t *testing.T, dir string) {
				old := dirStampOf(t, dir)
				if err := os.WriteFile(filepath.Join(dir, "new"), nil, 0o600); err != nil {
					t.Fatal(err)
				}
				awaitNewStamp(t, dir, old)
			}},
		{name: "another directory renamed over it: read again", clock: settledClock, listed: 2, wantNew: true,
			change: func(t *testing.T, dir string) {
				other := dir + ".other"
				if err := os.Mkdir(other, 0o700); err != nil {
					t.Fatal(err)
				}
				for _, n := range []string{"a", "new"} {
					if err := os.WriteFile(filepath.Join(other, n), nil, 0o600); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(other, dir); err != nil {
					t.Fatal(err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "d")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "a"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			c := &dirCache{root: root, now: tt.clock}
			c.on.Store(true)
			listed := 0
			list := func(p string) []string { listed++; return dirNames(p) }
			var got []string
			for i := range 3 {
				if i == 2 && tt.change != nil {
					tt.change(t, dir)
				}
				got = slices.Sorted(slices.Values(c.list(dir, kindNames, list)))
			}
			if listed != tt.listed {
				t.Errorf("read %d times, want %d", listed, tt.listed)
			}
			want := []string{"a"}
			if tt.wantNew {
				want = []string{"a", "new"}
			}
			if !slices.Equal(got, want) {
				t.Errorf("names %q, want %q", got, want)
			}
		})
	}
}

func TestDirCacheKeepsNothingOffTheRoot(t *testing.T) {
	root := filepath.Join(t.TempDir(), "gone") // a root that cannot be stat'ed: nothing is known of its filesystem
	dir := t.TempDir()
	c := &dirCache{root: root, now: settledClock}
	c.on.Store(true)
	listed := 0
	for range 2 {
		c.list(dir, kindNames, func(p string) []string { listed++; return dirNames(p) })
	}
	if listed != 2 {
		t.Fatalf("read %d times, want 2", listed)
	}
}

// TestKeptListingsKeepTheLookupRules loads a session through kept listings, then changes what the harness's
// lookup reads — a file in the other encoding beside the artifact, the same id in a second project — and
// expects each refusal as a backend without kept listings gives it.
func TestKeptListingsKeepTheLookupRules(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		change func(t *testing.T, root, path string)
		want   string
	}{
		{"a generation file in the other encoding", func(t *testing.T, root, path string) {
			dir := filepath.Dir(path)
			old := dirStampOf(t, dir)
			if err := os.WriteFile(filepath.Join(dir, "session.v2.jsonl.zstd"), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			awaitNewStamp(t, dir, old)
		}, "uses .jsonl.zstd, but this backend is configured for compression"},
		{"the same id in another project", func(t *testing.T, root, path string) {
			old := dirStampOf(t, root)
			other := filepath.Join(root, "another-project", filepath.Base(filepath.Dir(path)))
			if err := os.MkdirAll(other, 0o700); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(other, filepath.Base(path)), data, 0o600); err != nil {
				t.Fatal(err)
			}
			awaitNewStamp(t, root, old)
		}, `duplicate JSONL session id "s" appears in multiple project directories`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			path := writeRawSession(t, root, "s", lines([]string{headerLine("s")}, turn(1, 0)))
			b, err := Open(root, None)
			if err != nil {
				t.Fatal(err)
			}
			b.dirs.now = settledClock
			b.KeepListings()
			for range 2 { // the second load is served by the kept listings
				if _, err := b.LoadStored(ctx, "s"); err != nil {
					t.Fatal(err)
				}
			}
			if n := len(b.dirs.m); n != 2 {
				t.Fatalf("%d listings kept, want the root's and the session directory's", n)
			}
			tt.change(t, root, path)
			_, err = b.LoadStored(ctx, "s")
			fresh, ferr := Open(root, None)
			if ferr != nil {
				t.Fatal(ferr)
			}
			_, want := fresh.LoadStored(ctx, "s")
			if err == nil || want == nil || err.Error() != want.Error() || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v\nwant %v (%s)", err, want, tt.want)
			}
			var nf *eventstore.NotFoundError
			if errors.As(err, &nf) {
				t.Fatalf("not found: %v", err)
			}
		})
	}
}

func TestListingsKeptOnlyWhenAsked(t *testing.T) {
	root := t.TempDir()
	writeRawSession(t, root, "s", lines([]string{headerLine("s")}, turn(1, 0)))
	b, err := Open(root, None)
	if err != nil {
		t.Fatal(err)
	}
	b.dirs.now = settledClock
	if _, err := b.LoadStored(context.Background(), "s"); err != nil {
		t.Fatal(err)
	}
	if n := len(b.dirs.m); n != 0 || b.KeepsListings() {
		t.Fatalf("%d listings kept by a backend not asked to keep any", n)
	}
}
