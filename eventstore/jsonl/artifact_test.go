package jsonl

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore"
)

// TestReadDirect: a regular file below real directories is read without resolving links, with the bytes
// and the artifact the careful read gives; anything else — a link to a file inside the root, a link on
// the way, a FIFO, a directory, a path outside the root, a missing file — is left to the careful read,
// which reads it or refuses it exactly as it did (readArtifact), and nothing blocks.
func TestReadDirect(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	body := append(EncodeFrame(nil, []byte(headerLine("s")+"\n")), EncodeFrame(nil, []byte("{}\n"))...)
	proj := filepath.Join(root, "--home-dev-proj--")
	write := func(path string, data []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	plain := filepath.Join(proj, "plain", "session.jsonl.zstd")
	write(plain, body)
	write(filepath.Join(proj, "real", "session.jsonl.zstd"), body)
	os.MkdirAll(filepath.Join(proj, "filelink"), 0o700)
	os.Symlink(filepath.Join(proj, "real", "session.jsonl.zstd"), filepath.Join(proj, "filelink", "session.jsonl.zstd"))
	os.Symlink(filepath.Join(proj, "real"), filepath.Join(proj, "dirlink"))
	os.MkdirAll(filepath.Join(proj, "fifo"), 0o700)
	syscall.Mkfifo(filepath.Join(proj, "fifo", "session.jsonl.zstd"), 0o600)
	os.MkdirAll(filepath.Join(proj, "dir", "session.jsonl.zstd"), 0o700)
	write(filepath.Join(outside, "session.jsonl.zstd"), body)
	empty := filepath.Join(proj, "empty", "session.jsonl.zstd")
	write(empty, nil)

	b, err := Open(root, Zstd)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path   string
		direct bool
	}{
		{plain, true},
		{empty, true},
		{filepath.Join(proj, "filelink", "session.jsonl.zstd"), false},
		{filepath.Join(proj, "dirlink", "session.jsonl.zstd"), false},
		{filepath.Join(proj, "fifo", "session.jsonl.zstd"), false},
		{filepath.Join(proj, "dir", "session.jsonl.zstd"), false},
		{filepath.Join(proj, "missing", "session.jsonl.zstd"), false},
		{filepath.Join(outside, "session.jsonl.zstd"), false},
		{root, false},
	} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			got, art, ok := b.readDirect(c.path)
			if ok != c.direct {
				t.Errorf("%s: read directly %v, want %v", c.path, ok, c.direct)
			}
			if !ok {
				return
			}
			want, err := os.ReadFile(c.path)
			fi, serr := os.Stat(c.path)
			if err != nil || serr != nil || !bytes.Equal(got, want) || !sameArtifact(art, artifactOf(fi)) {
				t.Errorf("%s: read %d bytes as %+v, want %d bytes as %+v", c.path, len(got), art, len(want), artifactOf(fi))
			}
			// what the careful read alone gives
			var careful []byte
			cart, cerr := b.stableRead(c.path, func(f *os.File, fi os.FileInfo) (err error) {
				careful, err = readAll(f, make([]byte, 0, fi.Size()+512))
				return err
			})
			if cerr != nil || !bytes.Equal(careful, got) || !sameArtifact(cart, art) {
				t.Errorf("%s: the careful read gives %d bytes as %+v (%v)", c.path, len(careful), cart, cerr)
			}
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the read blocked", c.path)
		}
	}
	// the link to a file inside the root is still read, through the careful path
	if got, _, err := b.readArtifact(filepath.Join(proj, "filelink", "session.jsonl.zstd")); err != nil || !bytes.Equal(got, body) {
		t.Errorf("a link inside the root: %d bytes, %v", len(got), err)
	}
}

// TestReadDirectChanged: a file that changes between readDirect's lstat and its read — appended to,
// truncated, replaced by another file or by a FIFO — is left to the careful read, which reads what is there.
func TestReadDirectChanged(t *testing.T) {
	defer func() { afterDirectLstat = nil }()
	for _, c := range []struct {
		name   string
		change func(path string)
	}{
		{"none", func(string) {}},
		{"appended", func(p string) {
			f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			f.Write([]byte("more"))
			f.Close()
		}},
		{"truncated", func(p string) { os.Truncate(p, 3) }},
		{"replaced", func(p string) {
			os.WriteFile(p+".new", []byte("0123456789"), 0o600)
			os.Rename(p+".new", p)
		}},
		{"fifo", func(p string) { os.Remove(p); syscall.Mkfifo(p, 0o600) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			path := filepath.Join(root, "p", "s", "session.jsonl.zstd")
			os.MkdirAll(filepath.Dir(path), 0o700)
			if err := os.WriteFile(path, []byte("0123456789"), 0o600); err != nil {
				t.Fatal(err)
			}
			b, err := Open(root, Zstd)
			if err != nil {
				t.Fatal(err)
			}
			afterDirectLstat = c.change
			_, _, ok := b.readDirect(path)
			afterDirectLstat = nil
			if ok != (c.name == "none") {
				t.Fatalf("read directly: %v", ok)
			}
		})
	}
}

func sameArtifact(a, b eventstore.Artifact) bool {
	return a.Token == b.Token && a.Identity == b.Identity && a.Size == b.Size && a.ModTime.Equal(b.ModTime) &&
		(a.Owner == nil) == (b.Owner == nil) && (a.Owner == nil || *a.Owner == *b.Owner)
}
