package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/storewatch"
)

// Options configure a backend.
type Options struct {
	// ReadOnly opens the database with mode=ro: nothing is initialized, no journal mode is changed, and
	// every write is refused. A file never initialized reads as an empty store.
	ReadOnly bool
	// JournalMode is what every read-write connection selects: "wal" (the default), "delete", "truncate"
	// or "persist" — the same in every process sharing the file.
	JournalMode string
	// BusyTimeout is how long a statement waits for another connection's lock (default 5 s, the harness's).
	BusyTimeout time.Duration
	// MaxData bounds a scalar row's decompressed data (config writer.max_line_bytes; 0: no bound). Packed
	// rows are bounded by the format (1 MiB).
	MaxData int64
	// MaxSession is the load budget of one session's decoded events (config writer.max_session_bytes;
	// 0: none): rows are small on disk and many, and a session past it is refused (eventstore.TooLargeError).
	MaxSession int64
	// Tuning is how parallel a large batch's encoding and a large load's decoding run.
	Tuning eventstore.Tuning
}

// Backend is one SQLite session database. It is safe for concurrent use.
type Backend struct {
	path     string
	opts     Options
	db       *sql.DB // the read-write pool; a read-only backend reads through reads (quiet.go)
	reads    readPool
	identity string // file:<dev>:<ino>:<birthtimeNs>:store:<store_id>
	pristine bool   // read-only over a file never initialized: no sessions

	mu     sync.Mutex
	mtimes map[string]lastTime // per session: its last event's time at a revision

	snapMu  sync.Mutex
	snap    *snapshot // the latest consistent copy, for store/ and backups
	snapDir string    // where copies are made; removed by Close
	snapSeq int

	// watch is the running change feed's inotify watcher (watch.go), nil when none runs
	watch atomic.Pointer[storewatch.Watcher]
}

type lastTime struct {
	token string
	at    time.Time
}

var _ eventstore.Backend = (*Backend)(nil)

// IsDatabase reports whether the file at path starts with the SQLite 3 file header ("SQLite format 3\0").
// A STORE is recognised as SQLite this way, never by trying to open it.
func IsDatabase(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var hdr [16]byte
	n, _ := f.Read(hdr[:])
	return n == 16 && string(hdr[:]) == "SQLite format 3\x00"
}

// Open opens (read-write: creating when missing) the database at path.
func Open(path string, opts Options) (*Backend, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if opts.JournalMode == "" {
		opts.JournalMode = "wal"
	}
	opts.JournalMode = strings.ToLower(opts.JournalMode)
	switch opts.JournalMode {
	case "wal", "delete", "truncate", "persist":
	default:
		return nil, fmt.Errorf("journal mode %q: must be wal, delete, truncate or persist", opts.JournalMode)
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 5 * time.Second
	}
	b := &Backend{path: abs, opts: opts, mtimes: map[string]lastTime{}}
	if opts.ReadOnly {
		err = b.openReadOnly()
	} else {
		err = b.openReadWrite()
	}
	if err != nil {
		b.closePools()
		return nil, err
	}
	return b, nil
}

// dsn builds the connection URI: the path escaped for a file: URI, the busy timeout, and the given
// parameters (mode=ro, a journal mode).
func (b *Backend) dsn(params ...string) string {
	u := url.URL{Scheme: "file", Path: b.path}
	q := append([]string{"_busy_timeout=" + strconv.FormatInt(b.opts.BusyTimeout.Milliseconds(), 10)}, params...)
	return "file:" + u.EscapedPath() + "?" + strings.Join(q, "&")
}

// checkFile applies the harness's file rules (§1.6): a regular file, not a symbolic link; for writing, also
// owned by this user and accessible by no one else.
func (b *Backend) checkFile(write bool) error {
	fi, err := os.Lstat(b.path)
	if err != nil {
		return &eventstore.IOError{Err: err}
	}
	if !fi.Mode().IsRegular() {
		return &FormatError{Message: "session database " + quote(b.path) + " must be a regular file, not a symbolic link"}
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	if write && st != nil && (int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o077 != 0) {
		return &FormatError{Message: "session database " + quote(b.path) + " must be owned by the current user and accessible only by that user"}
	}
	return nil
}

func (b *Backend) openReadOnly() error {
	if err := b.checkFile(false); err != nil {
		return err
	}
	db, err := b.openReadPool()
	if err != nil {
		return err
	}
	ctx := context.Background()
	pristine, err := b.identify(ctx, db)
	if err != nil {
		return err
	}
	if pristine {
		b.pristine = true
		return nil
	}
	return b.readIdentity(ctx)
}

func (b *Backend) openReadWrite() error {
	parent := filepath.Dir(b.path)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return &eventstore.IOError{Err: err}
	}
	fi, err := os.Lstat(parent)
	if err != nil {
		return &eventstore.IOError{Err: err}
	}
	if fi.Mode()&os.ModeSymlink != 0 || !fi.IsDir() {
		return &FormatError{Message: "session database parent " + quote(parent) + " must be a real directory"}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && (int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0) {
		return &FormatError{Message: "session database parent " + quote(parent) + " must be owned by the current user and not group/world-writable"}
	}
	if f, err := os.OpenFile(b.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, os.ErrExist) {
		return &eventstore.IOError{Err: err}
	}
	if err := b.checkFile(true); err != nil {
		return err
	}
	var params []string
	if b.opts.JournalMode != "wal" { // WAL is a property of the file; the rollback modes are per connection
		params = append(params, "_journal_mode="+strings.ToUpper(b.opts.JournalMode))
	}
	db, err := sql.Open(driverName, b.dsn(append(params, "_sync=FULL")...))
	if err != nil {
		return err
	}
	b.db = db
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Ownership check and first-time initialization in one BEGIN IMMEDIATE: a partly initialized file
	// cannot exist, and two processes creating the file at once initialize it once.
	err = immediate(ctx, conn, func() error {
		pristine, err := b.identify(ctx, conn)
		if err != nil || !pristine {
			return err
		}
		return b.initialize(ctx, conn)
	})
	if err != nil {
		return err
	}
	if err := b.selectJournal(ctx, conn); err != nil {
		return err
	}
	if v, err := pragma(ctx, conn, "synchronous"); err != nil {
		return err
	} else if v != 2 {
		return fmt.Errorf("session database at %s retained synchronous=%d, expected FULL (2)", quote(b.path), v)
	}
	return b.readIdentity(ctx)
}

// initialize writes the schema, the store identity and the header fields, as the harness does.
func (b *Backend) initialize(ctx context.Context, conn *sql.Conn) error {
	id := eventstore.NewUUID()
	for _, stmt := range []struct {
		q    string
		args []any
	}{
		{DDL, nil},
		{`INSERT INTO persistence_state (singleton, store_id) VALUES (1, ?)`, []any{id}},
		{`PRAGMA application_id = ` + strconv.Itoa(ApplicationID), nil},
		{`PRAGMA user_version = ` + strconv.Itoa(SchemaVersion), nil},
	} {
		if _, err := conn.ExecContext(ctx, stmt.q, stmt.args...); err != nil {
			return err
		}
	}
	return nil
}

// selectJournal switches the journal mode after initialization (a new file is created under the rollback
// journal first, as the harness does), retrying SQLITE_BUSY every 10 ms until the busy timeout.
func (b *Backend) selectJournal(ctx context.Context, conn *sql.Conn) error {
	deadline := time.Now().Add(b.opts.BusyTimeout)
	for {
		var mode string
		err := conn.QueryRowContext(ctx, "PRAGMA journal_mode = "+strings.ToUpper(b.opts.JournalMode)).Scan(&mode)
		if err == nil {
			if strings.ToLower(mode) != b.opts.JournalMode {
				return fmt.Errorf("session database at %s selected journal mode %s, expected %s", quote(b.path), strings.ToLower(mode), b.opts.JournalMode)
			}
			return nil
		}
		if !isBusy(err) || !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(min(10*time.Millisecond, time.Until(deadline)))
	}
}

func (b *Backend) readIdentity(ctx context.Context) error {
	db, _, err := b.reader()
	if err != nil {
		return err
	}
	var id string
	if err := db.QueryRowContext(ctx, `SELECT store_id FROM persistence_state WHERE singleton = 1`).Scan(&id); err != nil || !uuidPattern.MatchString(id) {
		return &FormatError{Message: "session database at " + quote(b.path) + " has no valid store identity"}
	}
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, b.path, 0, unix.STATX_INO|unix.STATX_BTIME, &stx); err != nil {
		return &eventstore.IOError{Err: err}
	}
	var birth int64
	if stx.Mask&unix.STATX_BTIME != 0 {
		birth = stx.Btime.Sec*1e9 + int64(stx.Btime.Nsec)
	}
	dev := unix.Mkdev(stx.Dev_major, stx.Dev_minor)
	b.identity = "file:" + strconv.FormatUint(dev, 10) + ":" + strconv.FormatUint(stx.Ino, 10) + ":" + strconv.FormatInt(birth, 10) + ":store:" + id
	return nil
}

// Path is the database file.
func (b *Backend) Path() string { return b.path }

// SchemaVersion is the physical schema version status.json reports.
func (b *Backend) SchemaVersion() int { return SchemaVersion }

// Stored is the package's Stored over a whole log (on every core): the events as this database will give
// them back, or why one cannot be stored (convert compares by it).
func (b *Backend) Stored(events []event.Event) ([]event.Event, error) {
	out := make([]event.Event, len(events))
	err := b.opts.Tuning.Parallel(len(events), 1024, func(lo, hi int) error {
		for i := lo; i < hi; i++ {
			se, err := Stored(events[i])
			if err != nil {
				e := events[i]
				return fmt.Errorf("event seq %s (%s) cannot be stored there: %w", e.SeqText(), e.Type, err)
			}
			out[i] = se
		}
		return nil
	})
	return out, err
}

// Close closes the connection pool and removes the consistent copies made for store/.
func (b *Backend) Close() error {
	b.snapMu.Lock()
	if b.snapDir != "" {
		os.RemoveAll(b.snapDir)
		b.snapDir, b.snap = "", nil
	}
	b.snapMu.Unlock()
	return b.closePools()
}

func (b *Backend) closePools() error {
	if b.db != nil {
		return b.db.Close()
	}
	return b.reads.close()
}

// Name is the backend name status.json reports.
func (b *Backend) Name() string { return "sqlite" }

func isBusy(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "database is locked") || strings.Contains(err.Error(), "SQLITE_BUSY"))
}

// immediate runs fn inside BEGIN IMMEDIATE on conn: committed when fn succeeds, rolled back otherwise.
func immediate(ctx context.Context, conn *sql.Conn, fn func() error) error {
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	if err := fn(); err != nil {
		if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
			return fmt.Errorf("session-persistence-sqlite write failed and rollback also failed: %w (rollback: %v)", err, rerr)
		}
		return err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		return err
	}
	return nil
}

var _ eventstore.ProgressiveBackend = (*Backend)(nil)

// Locate: sessions have no artifact path of their own (the harness's locate() returns undefined).
func (b *Backend) Locate(h event.Header) (string, error) {
	if _, _, err := jsonl.Place(h); err != nil {
		return "", fmt.Errorf("%w (the harness's limit on every store)", err)
	}
	return "", nil
}

// Lock takes the session's single-writer lock: an flock on `<database>.locks/<sha256(id)>` (one file
// holds every session, so the database file itself cannot carry a per-session lock).
func (b *Backend) Lock(ctx context.Context, id string) (eventstore.WriterLock, error) {
	if b.opts.ReadOnly {
		return nil, b.readOnlyError()
	}
	dir := b.path + ".locks"
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, &eventstore.IOError{Err: err}
	}
	sum := sha256.Sum256([]byte(id))
	f, err := os.OpenFile(filepath.Join(dir, hex.EncodeToString(sum[:16])), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, &eventstore.IOError{Err: err}
	}
	return eventstore.Flock(f, id)
}

func (b *Backend) readOnlyError() error {
	return &eventstore.CommandError{Failure: eventstore.Refused, Code: eventstore.CodeRefused,
		Message: "session database " + quote(b.path) + " was opened read-only; nothing was written"}
}
