package jsonl

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore"
)

// memTempDir is a temp dir in memory where there is one: deleting thousands of trees from a disk that
// discards freed blocks stalls the fuzzer for seconds at a time.
func memTempDir(t *testing.T) string {
	dir, err := os.MkdirTemp("/dev/shm", "dshfs-fuzz-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// create makes a new file only: never through a symlink an earlier record planted (its target is fuzzed),
// never blocking on a FIFO.
func create(path string, content []byte) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return
	}
	f.Write(content)
	f.Close()
}

// FuzzStoreTree builds a whole store tree from the input — project and session directories with arbitrary
// names, transcripts with arbitrary bytes in either encoding, FIFOs, symlinks in and out of the root,
// directories where files belong — and asserts what no store may break: listing and inspecting every
// session finishes within a deadline, without a panic, and every session is either readable or refused
// with a reason. The caps keep memory bounded (a tiny max_frame_bytes and max_line_bytes).
func FuzzStoreTree(f *testing.F) {
	header := headerLine("s") + "\n"
	f.Add([]byte("\x00s\x00" + header + lines(turn(1, 0))))
	f.Add([]byte("\x01s\x00" + string(EncodeFrame(nil, []byte(header)))))
	f.Add([]byte("\x02s\x00\x03t\x00/dev/zero\x04u\x00\x05v\x00" + header))
	f.Add(append([]byte("\x01bomb\x00"), append(EncodeFrame(nil, []byte(headerLine("bomb")+"\n")), Bomb(64)...)...))
	f.Add([]byte("\x00a\nb\x00" + header + "\x00a~000Ab\x00" + header))
	f.Fuzz(func(t *testing.T, data []byte) {
		root := memTempDir(t)
		project := filepath.Join(root, "--home-dev-proj--")
		if err := os.MkdirAll(project, 0o700); err != nil {
			t.Fatal(err)
		}
		// records: kind byte, a NUL-terminated name, then (for files) bytes up to the next kind byte < 8
		for len(data) > 1 {
			kind := data[0] % 8
			data = data[1:]
			end := 0
			for end < len(data) && data[end] != 0 {
				end++
			}
			name := string(data[:end])
			if end < len(data) {
				end++
			}
			data = data[end:]
			body := 0
			for body < len(data) && data[body] >= 8 {
				body++
			}
			content := data[:body]
			data = data[body:]
			if name == "" || name == "." || name == ".." || len(name) > 200 || filepath.Base(name) != name {
				continue
			}
			dir := filepath.Join(project, name)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				continue
			}
			switch kind {
			case 0:
				create(filepath.Join(dir, "session.jsonl"), content)
			case 1:
				create(filepath.Join(dir, "session.jsonl.zstd"), content)
			case 2:
				syscall.Mkfifo(filepath.Join(dir, "session.jsonl"), 0o600)
			case 3:
				os.Symlink(string(content), filepath.Join(dir, "session.jsonl"))
			case 4:
				os.Mkdir(filepath.Join(dir, "session.jsonl"), 0o700)
			case 5:
				os.Symlink(filepath.Join(project, "s", "session.jsonl"), filepath.Join(dir, "session.jsonl"))
			case 6:
				create(filepath.Join(project, name+".jsonl"), content) // flat layout
			case 7:
				os.Symlink("/dev/zero", filepath.Join(dir, "session.jsonl.zstd"))
			}
		}
		for _, mode := range []Compression{None, Zstd} {
			b, err := Open(root, mode)
			if err != nil {
				t.Fatal(err)
			}
			b.SetLimits(1<<16, 1<<20)
			st := eventstore.New(b)
			done := make(chan struct{})
			go func() {
				defer close(done)
				l, err := st.List(context.Background())
				if err != nil {
					t.Errorf("list: %v", err)
					return
				}
				for _, e := range l.Entries {
					if e.Refusal != nil {
						if e.Refusal.Error() == "" {
							t.Errorf("%q refused without a reason", e.ID)
						}
						continue
					}
					if _, err := st.Inspect(context.Background(), e.ID); err != nil && err.Error() == "" {
						t.Errorf("%q refused without a reason", e.ID)
					}
					st.ReadRaw(context.Background(), e.ID)
				}
			}()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("%s: listing and inspecting the tree did not finish", mode)
			}
		}
	})
}
