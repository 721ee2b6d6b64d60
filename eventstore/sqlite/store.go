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

// session is a decoded sessions row.
type session struct {
	header      event.Header
	incarnation string
	revision    int64
}

// decodeSession validates a sessions row as the harness's decodeSessionRow does, with its texts.
func decodeSession(cols [11]any) (session, error) {
	var s session
	str := func(i int, key string, nullable bool) (*string, error) {
		switch v := cols[i].(type) {
		case nil:
			if nullable {
				return nil, nil
			}
		case string:
			return &v, nil
		}
		if nullable {
			return nil, fieldError("stored %s must be a string or null", key)
		}
		return nil, fieldError("stored %s must be a string", key)
	}
	integer := func(i int, key string, nullable, nonNegative bool) (*int64, error) {
		v, ok := cols[i].(int64)
		if cols[i] == nil && nullable {
			return nil, nil
		}
		if !ok || v > maxSafe || v < -maxSafe {
			if nullable {
				return nil, fieldError("stored %s must be a safe integer or null", key)
			}
			return nil, fieldError("stored %s must be a safe integer", key)
		}
		if nonNegative && v < 0 {
			if nullable {
				return nil, fieldError("stored %s must be non-negative or null", key)
			}
			return nil, fieldError("stored %s must be non-negative", key)
		}
		return &v, nil
	}
	id, err := str(0, "id", false)
	if err != nil {
		return s, err
	}
	if *id == "" {
		return s, fieldError("stored id must not be empty")
	}
	version, err := integer(1, "version", false, false)
	if err != nil {
		return s, err
	}
	cwd, err := str(3, "cwd", true)
	if err != nil {
		return s, err
	}
	if cwd != nil && !filepath.IsAbs(*cwd) {
		return s, fieldError("stored session cwd must be absolute")
	}
	parent, err := str(4, "parent_session", true)
	if err != nil {
		return s, err
	}
	origin, err := str(6, "origin", true)
	if err != nil {
		return s, err
	}
	if origin != nil && *origin != "subagent" {
		return s, fieldError("stored session origin must be subagent or null")
	}
	inc, err := str(9, "incarnation", false)
	if err != nil {
		return s, err
	}
	if *inc == "" {
		return s, fieldError("stored incarnation must not be empty")
	}
	if !uuidPattern.MatchString(*inc) {
		return s, fieldError("stored session incarnation must be a UUID")
	}
	created, err := integer(2, "created_at", false, true)
	if err != nil {
		return s, err
	}
	seed, err := integer(5, "seed_length", true, true)
	if err != nil {
		return s, err
	}
	depth, err := integer(7, "delegation_depth", true, true)
	if err != nil {
		return s, err
	}
	preset, err := str(8, "agent_preset", true)
	if err != nil {
		return s, err
	}
	rev, err := integer(10, "revision", false, true)
	if err != nil {
		return s, err
	}
	h := event.Header{Version: float64(*version), ID: *id, CreatedAt: *created}
	strVal := func(p *string) *event.Value {
		if p == nil {
			return nil
		}
		v := event.String(*p)
		return &v
	}
	h.Cwd, h.ParentSession, h.Origin, h.AgentPreset = strVal(cwd), strVal(parent), strVal(origin), strVal(preset)
	if seed != nil {
		v := event.Int(*seed)
		h.SeedLength = &v
	}
	if depth == nil {
		// The rc.8 provider's own top-level sessions and forks: its inspect().meta has no delegationDepth.
		h.NoDelegationDepth = true
	} else {
		h.DelegationDepth = *depth
	}
	return session{header: h, incarnation: *inc, revision: *rev}, nil
}

func scanSession(sc interface{ Scan(...any) error }) (session, error) {
	var cols [11]any
	ptrs := make([]any, len(cols))
	for i := range cols {
		ptrs[i] = &cols[i]
	}
	if err := sc.Scan(ptrs...); err != nil {
		return session{}, err
	}
	return decodeSession(cols)
}

// token is the harness's revision token of a session.
func (b *Backend) token(s session) string {
	return b.identity + ":incarnation:" + s.incarnation + ":revision:" + strconv.FormatInt(s.revision, 10)
}

// owner is who may read the sessions: the database file's owner and mode.
func (b *Backend) owner() *eventstore.Owner {
	fi, err := os.Stat(b.path)
	if err != nil {
		return nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	return &eventstore.Owner{UID: st.Uid, GID: st.Gid, Perm: uint32(fi.Mode().Perm())}
}

// artifact describes a session's state; its time is that of the session's last event (the header's
// createdAt when it has none), so a write to one session changes only that session's time.
func (b *Backend) artifact(ctx context.Context, q querier, s session, owner *eventstore.Owner) eventstore.Artifact {
	tok := b.token(s)
	return eventstore.Artifact{Token: tok, Identity: b.identity + ":incarnation:" + s.incarnation,
		ModTime: b.lastTime(ctx, q, s, tok), Owner: owner}
}

func (b *Backend) lastTime(ctx context.Context, q querier, s session, tok string) time.Time {
	b.mu.Lock()
	lt, ok := b.mtimes[s.header.ID]
	b.mu.Unlock()
	if ok && lt.token == tok {
		return lt.at
	}
	at := time.UnixMilli(s.header.CreatedAt)
	if rows, err := b.readRows(ctx, q, sqlSelectTail, s.header.ID, 1); err == nil && len(rows) == 1 {
		at = rowTime(&rows[0])
	}
	b.mu.Lock()
	b.mtimes[s.header.ID] = lastTime{tok, at}
	b.mu.Unlock()
	return at
}

// rowTime is the time of the last event a row holds (a packed row's last member's).
func rowTime(r *row) time.Time {
	at := time.UnixMilli(r.time)
	if evs, err := decodeRow(r); err == nil && len(evs) > 0 {
		if v, err := evs[len(evs)-1].Shallow(1); err == nil {
			if t, ok := v.Get("time"); ok && t.Kind == event.KindNumber {
				at = time.UnixMilli(int64(t.Num))
			}
		}
	}
	return at
}

// sqlLastRows selects every session's last row in one pass over the primary key.
const sqlLastRows = `SELECT e.session_id, e.seq, e.type, e.time, e.data, e.source_event_seqs, e.surface_op, e.ignorable FROM events e
JOIN (SELECT session_id, MAX(seq) AS last FROM events GROUP BY session_id) t ON e.session_id = t.session_id AND e.seq = t.last`

// lastTimes fills the time cache for many sessions at once (a first listing of a large store): one query
// instead of one per session.
func (b *Backend) lastTimes(ctx context.Context, sessions []session) {
	b.mu.Lock()
	stale := 0
	for _, s := range sessions {
		if lt, ok := b.mtimes[s.header.ID]; !ok || lt.token != b.token(s) {
			stale++
		}
	}
	b.mu.Unlock()
	if stale < 64 {
		return // a few changed sessions: their own tail queries are cheaper
	}
	db, _, err := b.reader()
	if err != nil {
		return
	}
	rs, err := db.QueryContext(ctx, sqlLastRows)
	if err != nil {
		return // each session then asks for its own
	}
	defer rs.Close()
	times := map[string]time.Time{}
	bad := map[string]bool{}
	var id string
	var c [7]any
	for rs.Next() {
		if rs.Scan(&id, &c[0], &c[1], &c[2], &c[3], &c[4], &c[5], &c[6]) != nil {
			return
		}
		r, err := newRow(c[0], c[1], c[2], c[3], c[4], c[5], c[6])
		if err != nil {
			bad[id] = true // that session asks for its own
			continue
		}
		r.maxData = b.opts.MaxData
		times[id] = rowTime(&r)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range sessions {
		if bad[s.header.ID] {
			continue
		}
		at, ok := times[s.header.ID]
		if !ok {
			at = time.UnixMilli(s.header.CreatedAt) // no events
		}
		b.mtimes[s.header.ID] = lastTime{b.token(s), at}
	}
}

// readRows runs an events query and validates every row; one bad row fails the read, as in the harness.
func (b *Backend) readRows(ctx context.Context, q querier, query string, args ...any) ([]row, error) {
	var out []row
	err := b.eachRow(ctx, q, func(r row, bad error) error {
		if bad != nil {
			return bad
		}
		out = append(out, r)
		return nil
	}, query, args...)
	return out, err
}

// errStop ends an eachRow early without an error.
var errStop = errors.New("stop")

// eachRow runs query and hands fn its rows one at a time, each with its validation error (newRow), until
// fn returns an error (errStop: none).
func (b *Backend) eachRow(ctx context.Context, q querier, fn func(r row, bad error) error, query string, args ...any) error {
	rs, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rs.Close()
	var c [7]any
	for rs.Next() {
		if err := rs.Scan(&c[0], &c[1], &c[2], &c[3], &c[4], &c[5], &c[6]); err != nil {
			return err
		}
		r, bad := newRow(c[0], c[1], c[2], c[3], c[4], c[5], c[6])
		r.maxData = b.opts.MaxData
		if err := fn(r, bad); err == errStop {
			return nil
		} else if err != nil {
			return err
		}
	}
	return rs.Err()
}

// loadBlock is how many rows LoadStored holds at once: enough to decode on every core, few enough that a
// long log's rows (its stored data) are never all held beside its events.
var loadBlock = 4096 // a variable so tests can make blocks tiny

// loadRows scans a session's rows block by block (rowScan), with the committed prefix proven by the last
// turn/end row that decodes, found first by a query of its own; what it returns is scanRows' prefix, and
// the size of the torn tail. Its errors are readRows' then scanRows': a row that fails validation fails
// the load wherever it is, even after a committed row that does not decode.
func (b *Backend) loadRows(ctx context.Context, q querier, id string, sink eventstore.ProgressSink) (*rowScan, int64, error) {
	committed := int64(-1)
	err := b.eachRow(ctx, q, func(r row, bad error) error {
		if bad != nil {
			return nil // the scan below reports it, in seq order
		}
		if committed = lastTurnEnd([]row{r}); committed >= 0 {
			return errStop
		}
		return nil
	}, sqlSelectTurnEnds, id)
	if err != nil {
		return nil, 0, err
	}
	var count int64 // rows in all: how far a block is into them sizes the event list
	if err := q.QueryRowContext(ctx, sqlCountEvents, id).Scan(&count); err != nil {
		return nil, 0, err
	}
	s := newRowScan(0, committed, true, b.opts.Tuning)
	var torn, given int64
	var refused error // a committed row that does not decode: reported once every row is validated
	block := make([]row, 0, loadBlock)
	budget := eventstore.Budget{Limit: b.opts.MaxSession}
	flush := func() error {
		if given += int64(len(block)); count > 0 {
			s.share = float64(given) / float64(count)
		}
		switch {
		case refused != nil:
		case s.tornFrom < 0:
			counted := len(s.events)
			if refused = s.add(block); refused != nil {
				break
			}
			if err := budget.Add(s.events[counted:]); err != nil {
				return err
			}
			if sink != nil {
				// the scan only ever appends, and a row that starts the torn tail ends the list
				sink.Events(s.events, s.rowMembers)
			}
			for i := range s.tornRows {
				torn += s.tornRows[i].size()
			}
			s.tornRows = nil
		default:
			for i := range block {
				torn += block[i].size()
			}
		}
		clear(block)
		block = block[:0]
		return nil
	}
	err = b.eachRow(ctx, q, func(r row, bad error) error {
		if bad != nil {
			return bad
		}
		if block = append(block, r); len(block) == loadBlock {
			return flush()
		}
		return nil
	}, sqlSelectEvents, id)
	if err == nil {
		err = flush()
	}
	if err == nil {
		err = refused
	}
	if err != nil {
		return nil, 0, err
	}
	s.events = eventstore.Trim(s.events) // the list lives as long as the session
	return s, torn, nil
}

// List reads the sessions rows only (the harness's listSnapshots, in its rowid order); a row the harness
// would refuse is listed with its refusal instead of failing the whole listing.
func (b *Backend) List(ctx context.Context) (eventstore.Listing, error) {
	if b.pristine {
		return eventstore.Listing{}, nil
	}
	var l eventstore.Listing
	err := b.again(func(db *sql.DB) (err error) {
		l, err = b.list(ctx, db)
		return err
	})
	return l, err
}

func (b *Backend) list(ctx context.Context, db *sql.DB) (eventstore.Listing, error) {
	rs, err := db.QueryContext(ctx, sqlSelectSessions)
	if err != nil {
		return eventstore.Listing{}, err
	}
	var sessions []session
	var l eventstore.Listing
	for rs.Next() {
		s, err := scanSession(rs)
		if err != nil {
			// The harness's list() fails as a whole on one bad row; the others are still shown here,
			// with the bad row reported beside them.
			l.RootErrors = append(l.RootErrors, eventstore.RootError{Path: b.path, Message: "a sessions row is refused: " + err.Error()})
			continue
		}
		sessions = append(sessions, s)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return eventstore.Listing{}, err
	}
	owner := b.owner()
	b.lastTimes(ctx, sessions)
	for _, s := range sessions {
		h := s.header
		art := b.artifact(ctx, db, s, owner)
		e := eventstore.Entry{ID: h.ID, Path: b.path, Header: &h, HeaderLine: h.Line(), Revision: art.Token, Identity: art.Identity,
			ModTime: art.ModTime, Owner: owner}
		if h.Version != 0 {
			e.Refusal = &eventstore.UnsupportedError{Message: event.VersionRefusal(h.ID, h.Version)}
		}
		l.Entries = append(l.Entries, e)
	}
	return l, nil
}

// Stat returns a session's state from its sessions row and its last row.
func (b *Backend) Stat(ctx context.Context, id, _ string) (eventstore.Artifact, error) {
	var art eventstore.Artifact
	err := b.again(func(db *sql.DB) error {
		s, err := b.session(ctx, db, id)
		if err == nil {
			art = b.artifact(ctx, db, s, b.owner())
		}
		return err
	})
	return art, err
}

func (b *Backend) session(ctx context.Context, q querier, id string) (session, error) {
	if b.pristine {
		return session{}, &eventstore.NotFoundError{ID: id}
	}
	s, err := scanSession(q.QueryRowContext(ctx, sqlSelectSession, id))
	if errors.Is(err, sql.ErrNoRows) {
		return s, &eventstore.NotFoundError{ID: id}
	}
	return s, err
}

// LoadStored reads a session's row and all its events rows in one read transaction (one snapshot).
func (b *Backend) LoadStored(ctx context.Context, id string) (*eventstore.Prefix, error) {
	return b.LoadStoredProgress(ctx, id, nil)
}

var _ eventstore.ProgressiveBackend = (*Backend)(nil)

// LoadStoredProgress is LoadStored reporting the session's events to sink (nil: none) block by block as
// its rows are decoded (eventstore.ProgressiveBackend).
func (b *Backend) LoadStoredProgress(ctx context.Context, id string, sink eventstore.ProgressSink) (*eventstore.Prefix, error) {
	if b.pristine {
		return nil, &eventstore.NotFoundError{ID: id}
	}
	if sink != nil {
		// Reported events cannot be taken back: a load that overlapped a checkpoint fails instead.
		db, done, err := b.reader()
		if err != nil {
			return nil, err
		}
		p, err := b.loadStored(ctx, db, id, sink)
		if !done() {
			return nil, errChangedWhileRead
		}
		return p, err
	}
	var p *eventstore.Prefix
	err := b.again(func(db *sql.DB) (err error) {
		p, err = b.loadStored(ctx, db, id, nil)
		return err
	})
	return p, err
}

func (b *Backend) loadStored(ctx context.Context, db *sql.DB, id string, sink eventstore.ProgressSink) (*eventstore.Prefix, error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	s, err := b.session(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	if sink != nil {
		sink.Header(s.header, "") // a SQLite prefix names no path (Locate)
	}
	sc, torn, err := b.loadRows(ctx, tx, id, sink)
	if err != nil {
		return nil, err
	}
	art := b.artifact(ctx, tx, s, b.owner())
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	p := &eventstore.Prefix{Header: s.header, Events: sc.events, RowMembers: sc.rowMembers, Artifact: art}
	if sc.tornFrom >= 0 {
		p.Torn = &eventstore.Torn{Seq: sc.tornFrom, Bytes: torn}
	}
	return p, nil
}

// ReadRaw: the SQLite store keeps no transcript file (the harness's supportsRawArtifacts is false).
func (b *Backend) ReadRaw(ctx context.Context, id string) ([]byte, error) {
	return nil, &eventstore.IOError{Err: errors.New("the SQLite backend keeps no raw transcript: session " + quote(id) + " is rows in " + b.path)}
}

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
