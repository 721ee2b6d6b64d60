package sqlite

import (
	"database/sql"
	"errors"
	"os"
	"sync"
	"syscall"

	"github.com/dshfs/dshfs/eventstore"
)

// A WAL database read with mode=ro still gets a -shm and a -wal file beside it (SQLite needs the
// wal-index to read, and a read-only connection cannot remove them when it closes), so `dshfs ls` of a
// user's sessions.db would change the store's directory. When no -wal exists, no connection has the
// database open in WAL mode and every committed page is in the main file: reading it as immutable then
// needs neither file. The moment that stops being true — a -wal appears (a writer opened it) or the main
// file changes (a checkpoint) — reads go through an ordinary mode=ro pool, whose side files then belong
// to the writer's session anyway.

// fileStamp identifies the main file's content cheaply: a checkpoint changes its size or mtime.
type fileStamp struct {
	dev, ino   uint64
	size       int64
	mtimeNanos int64
}

func stampOf(path string) (fileStamp, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStamp{}, false
	}
	return fileStamp{dev: uint64(st.Dev), ino: st.Ino, size: fi.Size(), mtimeNanos: fi.ModTime().UnixNano()}, true
}

// walFile reports whether the database's header says WAL mode (file format bytes 18 and 19 are 2).
func walFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var hdr [20]byte
	if n, _ := f.ReadAt(hdr[:], 0); n < len(hdr) {
		return false
	}
	return hdr[18] == 2 && hdr[19] == 2
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// readPool is a read-only backend's connection pool, immutable while the database is quiet.
type readPool struct {
	mu        sync.Mutex
	db        *sql.DB
	immutable bool
	stamp     fileStamp // the main file when the immutable pool was opened
	// retired pools may still run a query another goroutine started; they are closed with the backend.
	retired []*sql.DB
}

// errChangedWhileRead refuses a read whose immutable snapshot a checkpoint overwrote: its rows may mix
// two states. A repeated read goes through the mode=ro pool.
var errChangedWhileRead = &eventstore.IOError{Err: errors.New("the database changed while it was read without locks (a writer checkpointed); read it again")}

// openReadPool opens the pool for b, immutable when the database is a quiet WAL file.
func (b *Backend) openReadPool() (*sql.DB, error) {
	p := &b.reads
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reopenLocked(b)
}

func (p *readPool) reopenLocked(b *Backend) (*sql.DB, error) {
	params := []string{"mode=ro"}
	stamp, ok := stampOf(b.path)
	quiet := ok && walFile(b.path) && !exists(b.path+"-wal")
	if quiet {
		params = append(params, "immutable=1")
	}
	db, err := sql.Open(driverName, b.dsn(params...))
	if err != nil {
		return nil, err
	}
	if p.db != nil {
		p.retired = append(p.retired, p.db)
	}
	p.db, p.immutable, p.stamp = db, quiet, stamp
	return db, nil
}

// reader is the pool a read goes through now, and a check to call when the read is done: false when an
// immutable read may have overlapped a checkpoint.
func (b *Backend) reader() (*sql.DB, func() bool, error) {
	if !b.opts.ReadOnly {
		return b.db, func() bool { return true }, nil
	}
	p := &b.reads
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.immutable && !stillQuiet(b.path, p.stamp) {
		if _, err := p.reopenLocked(b); err != nil {
			return nil, nil, err
		}
	}
	db, immutable, stamp := p.db, p.immutable, p.stamp
	return db, func() bool {
		return !immutable || stillQuiet(b.path, stamp)
	}, nil
}

// again runs a read through reader, and once more when an immutable read overlapped a checkpoint.
func (b *Backend) again(read func(db *sql.DB) error) error {
	for try := 0; ; try++ {
		db, done, err := b.reader()
		if err != nil {
			return err
		}
		err = read(db)
		if done() {
			return err
		}
		if try == 1 {
			return errChangedWhileRead
		}
	}
}

// stillQuiet reports whether the database at path is as it was when stamped and no writer has opened it
// in WAL mode since (no -wal file): an immutable read of it then saw committed pages only.
func stillQuiet(path string, since fileStamp) bool {
	now, ok := stampOf(path)
	return ok && now == since && !exists(path+"-wal")
}

func (p *readPool) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var first error
	for _, db := range append(p.retired, p.db) {
		if db == nil {
			continue
		}
		if err := db.Close(); err != nil && first == nil {
			first = err
		}
	}
	p.db, p.retired = nil, nil
	return first
}
