package postgres

import (
	"context"
	"errors"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Options configure a backend.
type Options struct {
	// ReadOnly is for ls, cat, check and read-only mounts: no DDL and no write is ever sent (the
	// connections' transactions are read-only too), so a role with SELECT only suffices. A database
	// without the schema reads as an empty store.
	ReadOnly bool
	// Host is this host's name, recorded as the source host of the sessions it creates and as the holder
	// of the writer locks it takes (default os.Hostname()).
	Host string
	// MaxData bounds one stored line's decompressed size (config writer.max_line_bytes; 0: no bound), so
	// that a hostile row cannot make a read allocate without bound.
	MaxData int64
	// MaxSession is the load budget of one session's decoded events (config writer.max_session_bytes; 0:
	// none); a session past it is refused (eventstore.TooLargeError).
	MaxSession int64
	// ReleaseAfter is [fleet] release_after: a session a host's sync feeds is writable here once that sync
	// has not run for this long. Zero: DefaultReleaseAfter.
	ReleaseAfter time.Duration
	// Timeout is [fleet] timeout: how long any operation waits for the server to answer — connecting, a
	// query, the next row of a stream — before it fails with an *eventstore.IOError (a *TimeoutError).
	// Zero: DefaultTimeout.
	Timeout time.Duration
	// PendingDir is where KeepPending writes accepted events when the database cannot take them either
	// (default: $XDG_STATE_HOME/dshfs/pending, else ~/.local/state/dshfs/pending).
	PendingDir string
	// Tuning is how parallel a large batch's encoding and a load's decoding run.
	Tuning eventstore.Tuning
}

// DefaultReleaseAfter is [fleet] release_after's default.
const DefaultReleaseAfter = 10 * time.Minute

// Backend is one fleet store database. It is safe for concurrent use; two Backends on one database (two
// hosts, or two processes) are independent writers that exclude each other by the advisory locks.
type Backend struct {
	cfg      *pgxpool.Config
	where    string // Redact(dsn)
	password string // the DSN's password, scrubbed from every error text
	opts     Options
	pool     *pgxpool.Pool
	storeID  string
	pristine bool // read-only over a database without the schema (yet): no sessions; guarded by mu
	// schema is the database's schema version (guarded by mu): SchemaVersion once a writer opened it; a
	// read-only Backend over a version-1 database reads it as such (every session v0) until a writer
	// migrates it, looked for again at most once a PollInterval
	schema  int64
	checked time.Time // when empty last looked for the schema
	// hasStates: the sync_states table exists (guarded by mu); statesChecked is when that was last looked at
	hasStates     bool
	statesChecked time.Time

	forcePoll bool                 // tests: Watch polls as it does where LISTEN cannot be used
	watches   []context.CancelFunc // guarded by mu: the Watch goroutines, ended by Close

	mu    sync.Mutex
	locks map[string]*writerLock // the writer locks this Backend holds, by session id
}

// IsDSN reports whether a STORE names a fleet store: a postgres:// or postgresql:// URL.
func IsDSN(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

var (
	kvPassword  = regexp.MustCompile(`(?i)(^|\s+)password\s*=\s*('(?:[^'\\]|\\.)*'|\S*)`)
	urlPassword = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]*://[^:@/?#]*):[^@/?#]*@`)
)

// Redact returns the DSN without its password — the URL's userinfo password and a password query
// parameter, or a keyword DSN's password=… — for status.json, logs and error messages.
func Redact(dsn string) string {
	if IsDSN(dsn) {
		u, err := url.Parse(dsn)
		if err != nil {
			// an unparsable URL: cut what can be a password by its shape
			s := urlPassword.ReplaceAllString(dsn, "$1@")
			return kvURLParam.ReplaceAllString(s, "$1")
		}
		if u.User != nil {
			u.User = url.User(u.User.Username())
		}
		q := u.Query()
		if q.Has("password") {
			q.Del("password")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	return strings.TrimSpace(kvPassword.ReplaceAllString(dsn, ""))
}

var kvURLParam = regexp.MustCompile(`([?&])password=[^&#]*&?`)

// Open connects to the fleet store at dsn (libpq rules: PG* environment variables, ~/.pgpass, sslmode and
// client certificates pass through pgx's parser). A writer creates the schema in an empty database; a
// read-only Open sends no DDL. Another schema version, or a foreign layout, is refused with nothing
// written. The errors name the DSN without its password.
func Open(ctx context.Context, dsn string, o Options) (_ *Backend, err error) {
	b := &Backend{where: Redact(dsn), opts: o, locks: map[string]*writerLock{}}
	if b.opts.Timeout <= 0 {
		b.opts.Timeout = DefaultTimeout
	}
	if b.opts.Host == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, errors.New("fleet store: this host has no name (" + err.Error() + "); set [fleet] host")
		}
		b.opts.Host = h
	}
	if b.opts.ReleaseAfter <= 0 {
		b.opts.ReleaseAfter = DefaultReleaseAfter
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, b.scrub(errors.New("fleet store " + b.where + ": not a valid PostgreSQL DSN: " + parseReason(err)))
	}
	b.password = cfg.ConnConfig.Password
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "dshfs " + b.opts.Host + " " + itoa(int64(os.Getpid()))
	}
	if o.ReadOnly {
		// the server itself refuses any write, whatever a bug here would send
		cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = b.opts.Timeout
	}
	b.cfg = cfg
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, b.wrap(err)
	}
	b.pool = pool
	if err := b.start(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return b, nil
}

func (b *Backend) start(ctx context.Context) error {
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return b.wrap(err)
	}
	defer conn.Release()
	if b.opts.ReadOnly {
		pristine, id, version, err := inspectSchema(ctx, conn, b.where)
		if err != nil {
			return b.wrap(err)
		}
		b.pristine, b.storeID, b.schema, b.checked = pristine, id, version, time.Now()
		return nil
	}
	id, err := ensureSchema(ctx, conn.Conn(), b.where)
	if err != nil {
		return b.wrap(err)
	}
	b.storeID, b.schema = id, SchemaVersion
	return nil
}

// Init creates the fleet schema in the database at dsn, or checks the one there (`dshfs pg init`): it is
// what any writer's Open does, on its own.
func Init(ctx context.Context, dsn string) error {
	b, err := Open(ctx, dsn, Options{Host: "init"})
	if err != nil {
		return err
	}
	defer b.Close()
	// a schema made before sync_states existed gets it here, from the role that owns the schema
	return b.tx(ctx, func(tx pgx.Tx) error { return ensureStates(ctx, tx) })
}

// parseReason is pgx's parse failure without the connection string it quotes (redacted best-effort only).
func parseReason(err error) string {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		if u := pe.Unwrap(); u != nil {
			return u.Error()
		}
	}
	msg := err.Error()
	if i := strings.Index(msg, "`: "); i >= 0 {
		return msg[i+3:]
	}
	return "cannot parse it"
}

// wrap turns a database error into one naming the store (without its password); refusals and schema
// errors pass as they are.
func (b *Backend) wrap(err error) error {
	if err == nil {
		return nil
	}
	if !dbFailure(err) {
		return b.scrub(err)
	}
	return b.scrub(&eventstore.IOError{Err: &StoreError{Where: b.where, Err: err}})
}

// dbFailure tells a failure of the database or the connection to it — an *eventstore.IOError once wrapped
// — from a refusal or a content error of this package's own, which pass as they are.
func dbFailure(err error) bool {
	var (
		se *SchemaError
		ce *eventstore.CommandError
		nf *eventstore.NotFoundError
		ue *eventstore.UnsupportedError
		tl *eventstore.TooLargeError
		io *eventstore.IOError
		hc *HostConflictError
		ge *GapError
		le *LineError
		ct *contentError
		us *UnstorableError
	)
	return !(errors.As(err, &se) || errors.As(err, &ce) || errors.As(err, &nf) || errors.As(err, &ue) || errors.As(err, &tl) ||
		errors.As(err, &io) || errors.As(err, &hc) || errors.As(err, &ge) || errors.As(err, &le) || errors.As(err, &ct) || errors.As(err, &us))
}

// contentError is stored content the harness would refuse (a corrupt log, a header that does not read):
// not a failure of the database.
type contentError struct{ err error }

func (e *contentError) Error() string { return e.err.Error() }
func (e *contentError) Unwrap() error { return e.err }

// StoreError is a failure of the database itself (connecting, a query); its text names the store without
// its password.
type StoreError struct {
	Where string
	Err   error
}

func (e *StoreError) Error() string {
	msg := e.Err.Error()
	var ce *pgconn.ConnectError
	if errors.As(e.Err, &ce) {
		msg = "cannot connect: " + msg
	}
	return "fleet store " + e.Where + ": " + msg
}

func (e *StoreError) Unwrap() error { return e.Err }

// scrub makes sure no error text carries the password, whatever a driver quoted.
func (b *Backend) scrub(err error) error {
	if err == nil || b.password == "" || !strings.Contains(err.Error(), b.password) {
		return err
	}
	return &scrubbed{msg: strings.ReplaceAll(err.Error(), b.password, "xxxxx"), err: err}
}

type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// Location is the store as status.json and logs show it: the DSN without its password.
func (b *Backend) Location() string { return b.where }

// Path is Location: a fleet session has no artifact path of its own, so status.json names the store.
func (b *Backend) Path() string { return b.where }

// StoreID is the store's identity (dshfs_fleet.store_id), part of every revision token; "" for a
// read-only Backend over a database without the schema.
func (b *Backend) StoreID() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.storeID
}

// empty reports whether a read-only Backend opened over a database without the schema still finds none:
// it looks again at most once a PollInterval, so a reader started before the first writer sees the store
// once a writer has created it — and a reader of a version-1 schema sees it once a writer migrated it.
func (b *Backend) empty(ctx context.Context) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.pristine && b.schema == SchemaVersion {
		return false
	}
	if time.Since(b.checked) < PollInterval {
		return b.pristine
	}
	b.checked = time.Now()
	pristine, id, version, err := inspectSchema(ctx, b.pool, b.where)
	if err != nil || pristine {
		return b.pristine
	}
	b.pristine, b.storeID, b.schema = false, id, version
	return false
}

// generationCol is how the reads select a session's generation: the column, or 0 in a version-1 schema
// (which has none, and holds v0 sessions only).
func (b *Backend) generationCol() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.schema < 2 {
		return `0::smallint`
	}
	return `generation`
}

// SchemaVersion is the fleet schema version status.json reports: the database's (a read-only Backend
// reads a version-1 schema without migrating it).
func (b *Backend) SchemaVersion() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.schema == 0 {
		return SchemaVersion
	}
	return int(b.schema)
}

// ReleaseAfter is how long a synced session stays unwritable here after its sync last ran ([fleet]
// release_after), for status.json to say when it becomes writable.
func (b *Backend) ReleaseAfter() time.Duration { return b.opts.ReleaseAfter }

// Host is this host's name as the store records it.
func (b *Backend) Host() string { return b.opts.Host }

// Name is the backend name status.json reports.
func (b *Backend) Name() string { return "postgres" }

// Close releases every writer lock this Backend holds and closes its connections.
func (b *Backend) Close() error {
	b.mu.Lock()
	locks := make([]*writerLock, 0, len(b.locks))
	for _, l := range b.locks {
		locks = append(locks, l)
	}
	b.mu.Unlock()
	for _, l := range locks {
		l.Release()
	}
	b.mu.Lock()
	for _, cancel := range b.watches {
		cancel()
	}
	b.watches = nil
	b.mu.Unlock()
	b.pool.Close()
	return nil
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// readOnlyError refuses a write on a read-only Backend.
func (b *Backend) readOnlyError() error {
	return &eventstore.CommandError{Failure: eventstore.Refused, Code: eventstore.CodeRefused,
		Message: "fleet store " + b.where + " was opened read-only; nothing was written"}
}

// tx runs fn in one read-write transaction: committed when fn succeeds, rolled back otherwise.
func (b *Backend) tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	if b.opts.ReadOnly {
		return b.readOnlyError()
	}
	return b.wrap(pgx.BeginFunc(ctx, b.pool, fn))
}

// notify announces a changed session inside a write's transaction (delivered at its commit).
func notify(ctx context.Context, tx pgx.Tx, id string) error {
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, notifyChannel, id)
	return err
}
