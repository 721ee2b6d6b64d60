package eventstore

import "os"

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
