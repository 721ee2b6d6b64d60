// Package atomicfile replaces a file's content so that a reader sees the old file or the new one, never a
// half-written one: the bytes go to a temporary file of a name of its own beside it, which is then renamed
// over it. Nothing is fsync'ed: it is for caches and scratch copies, which a crash may lose but never
// tear. (The store's own files have their own durable path.)
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces path's content with data. Concurrent writers of one path each use their own temporary
// file, so the last rename wins whole. On failure the temporary file is removed and path is unchanged.
func Write(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
