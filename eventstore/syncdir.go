package eventstore

import (
	"os"
	"path/filepath"
)

// SyncDir fsyncs directory dir, so that a file created, renamed or removed in it survives a crash; a
// failure is an *IOError. Both backends' durable writes (sidecars, replaced artifacts) end with it.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return &IOError{Err: err}
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return &IOError{Err: err}
	}
	return nil
}

// WriteNewFile creates path — never replacing a file — with content, mode 0600, and makes it and its
// directory entry durable; on any failure nothing is left at path and the error is an *IOError. Backends
// keep what they could not store in their own format (pending events, a torn tail) in such files.
func WriteNewFile(path string, content []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return &IOError{Err: err}
	}
	_, err = f.Write(content)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return &IOError{Err: err}
	}
	return SyncDir(filepath.Dir(path))
}
