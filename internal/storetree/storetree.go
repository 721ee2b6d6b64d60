// Package storetree builds whole JSONL store trees from fuzz input, for the fuzz targets that check what
// no store may break (eventstore/jsonl: no hang, bounded memory; fs: the mount and check agree).
package storetree

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Project is the one project directory Build creates under the root.
const Project = "--home-dev-proj--"

// TempDir is a temp dir in memory where there is one: deleting thousands of trees from a disk that
// discards freed blocks stalls a fuzzer for seconds at a time.
func TempDir(t testing.TB) string {
	dir, err := os.MkdirTemp("/dev/shm", "dshfs-fuzz-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Build writes the tree data describes into root: records of a kind byte, a NUL-terminated session
// directory name, then (for files) content bytes up to the next byte below 8. Kinds: 0 raw transcript,
// 1 zstd transcript, 2 FIFO, 3 symlink to the content as a path, 4 directory where the transcript
// belongs, 5 symlink to another session's transcript, 6 flat-layout file, 7 symlink to /dev/zero.
// Names that are not one path component are skipped.
func Build(t testing.TB, root string, data []byte) {
	project := filepath.Join(root, Project)
	if err := os.MkdirAll(project, 0o700); err != nil {
		t.Fatal(err)
	}
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
