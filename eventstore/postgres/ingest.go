package postgres

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
	"github.com/jackc/pgx/v5"
)

// Holding is what the fleet store holds of one session, for `dshfs sync` to copy only what is past it.
type Holding struct {
	Exists   bool
	Host     string    // the session's source host
	NextSeq  int64     // the seq after its last stored event
	Header   []byte    // its header line verbatim (no LF)
	SyncHost string    // the host whose sync still feeds it; "" when released or written here
	SyncSeen time.Time // when that sync last ran for it
	Revision int64
	// Generation is the format generation the store holds the session in: 0, or 4 (its header the v4
	// file's physical header line, its lines the file's rows)
	Generation int
}

// HostConflictError refuses an Ingest of a session the store already holds from another host, or with
// another header: the same id with different events is never merged or overwritten.
type HostConflictError struct {
	ID              string
	Host, Have      string // the ingesting host, and the host the store holds the session from
	HeaderDiffers   bool
	StoredHeader    []byte
	IngestingHeader []byte
}

func (e *HostConflictError) Error() string {
	if e.Host != e.Have {
		return fmt.Sprintf("session %q is already in the fleet store from host %q; the copy from host %q is refused (nothing was written)", e.ID, e.Have, e.Host)
	}
	return fmt.Sprintf("session %q from host %q has another header than the fleet store's copy of it; refused (nothing was written)", e.ID, e.Host)
}

// ReleasedError refuses an Ingest of a session its sync no longer feeds: released (`dshfs sync --release`)
// or written through the fleet store, which took it over. Taking it back would merge two writers' events;
// nothing was written.
type ReleasedError struct{ ID, Host string }

func (e *ReleasedError) Error() string {
	return fmt.Sprintf("session %q was released by host %q's sync or taken over by a fleet writer: it is written through the fleet store now, and this copy is refused (nothing was written)", e.ID, e.Host)
}

// GapError refuses an Ingest that does not start where the stored session ends: copying it would leave
// a gap (From > NextSeq) or a duplicate (From < NextSeq). Nothing was written.
type GapError struct {
	ID            string
	From, NextSeq int64
}

func (e *GapError) Error() string {
	return fmt.Sprintf("session %q: ingest starts at seq %d, but the fleet store's next seq is %d; nothing was written", e.ID, e.From, e.NextSeq)
}

// LineError is a line Ingest cannot store: it does not decode to events with seqs contiguous from the
// batch's start. Nothing was written.
type LineError struct {
	ID    string
	Index int // the line's index in the batch
	Err   error
}

func (e *LineError) Error() string {
	return fmt.Sprintf("session %q: line %d of the batch cannot be stored: %v; nothing was written", e.ID, e.Index, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// UnstorableError refuses a session the fleet store cannot hold as it is: a NUL character in a value kept
// in a text column (the session id, its cwd or parent, an event's type), which PostgreSQL's text does not
// hold. The session is not damaged; it cannot be stored here. Nothing was written.
type UnstorableError struct {
	ID   string
	What string // "the session id", "the cwd", …
}

func (e *UnstorableError) Error() string {
	return fmt.Sprintf("session %q: %s holds a NUL character, which the fleet store (PostgreSQL text) cannot hold; nothing was written", e.ID, e.What)
}

// storable checks the header's values kept as text for a NUL character.
func storable(id string, hf headerFields) error {
	for _, v := range []struct {
		what string
		s    *string
	}{{"the session id", &id}, {"the cwd", hf.cwd}, {"the parent session id", hf.parent}} {
		if v.s != nil && strings.IndexByte(*v.s, 0) >= 0 {
			return &UnstorableError{ID: id, What: v.what}
		}
	}
	return nil
}

// headerFields are a header line's columns.
type headerFields struct {
	// generation is the session's format generation: 4 for a v4 physical header line, else 0 (a header
	// of another unsupported version is stored as v0's, and listed refused)
	generation int16
	version    float64
	createdAt  int64
	cwd        *string
	parent     *string
}

// parseHeader reads a header line (no LF) for its columns; a header of an unsupported format version is
// stored (and listed refused, as the harness refuses it), anything else that is not a header is not.
func parseHeader(id string, line []byte) (headerFields, error) {
	if bytes.IndexByte(line, '\n') >= 0 {
		return headerFields{}, fmt.Errorf("session %q: the header holds a line feed", id)
	}
	h, err := event.ParseHeaderLine(append(bytes.Clone(line), '\n'))
	var uv *event.UnsupportedVersionError
	if errors.As(err, &uv) && uv.Version == 4 {
		// a v4 session's physical header line, as the v4 codec reads it
		gh, err := generation.ParseHeader(4, line)
		if err != nil {
			return headerFields{}, fmt.Errorf("session %q: the v4 header does not read: %w", id, err)
		}
		if gh.ID != id {
			return headerFields{}, fmt.Errorf("session %q: the header names session %q", id, gh.ID)
		}
		return headerFields{version: 4, createdAt: gh.CreatedAt, cwd: gh.Cwd, parent: gh.ParentSession, generation: 4}, nil
	}
	if errors.As(err, &uv) {
		if uv.ID != id {
			return headerFields{}, fmt.Errorf("session %q: the header names session %q", id, uv.ID)
		}
		return headerFields{version: uv.Version}, nil
	}
	if err != nil {
		return headerFields{}, fmt.Errorf("session %q: the header does not read: %w", id, err)
	}
	if h.ID != id {
		return headerFields{}, fmt.Errorf("session %q: the header names session %q", id, h.ID)
	}
	f := headerFields{version: h.Version, createdAt: h.CreatedAt}
	if h.Cwd != nil && h.Cwd.Kind == event.KindString {
		f.cwd = &h.Cwd.Str
	}
	if h.ParentSession != nil && h.ParentSession.Kind == event.KindString {
		f.parent = &h.ParentSession.Str
	}
	return f, nil
}

// encodeBatch describes lines as rows, checking that their seqs run contiguously from from: v0 lines, or
// the physical rows of a v4 file (gen 4), one event each.
func encodeBatch(id string, gen int16, from int64, lines [][]byte) ([]storedLine, error) {
	out := make([]storedLine, len(lines))
	next := from
	for i, l := range lines {
		if bytes.IndexByte(l, '\n') >= 0 {
			return nil, &LineError{ID: id, Index: i, Err: errors.New("it holds a line feed")}
		}
		var s storedLine
		var err error
		if gen == 4 {
			s, err = v4Row(l)
		} else {
			s, err = encodeLine(l)
		}
		if err != nil {
			return nil, &LineError{ID: id, Index: i, Err: err}
		}
		if strings.IndexByte(s.typ, 0) >= 0 {
			return nil, &UnstorableError{ID: id, What: fmt.Sprintf("the type of the event at seq %d", s.seq)}
		}
		if s.seq != next || s.lastSeq < s.seq {
			return nil, &LineError{ID: id, Index: i, Err: fmt.Errorf("it starts at seq %d, expected %d", s.seq, next)}
		}
		next = s.lastSeq + 1
		out[i] = s
	}
	return out, nil
}

// Held returns what the store holds of session id (Exists false when nothing).
func (b *Backend) Held(ctx context.Context, id string) (_ Holding, err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	if b.empty(ctx) {
		return Holding{}, nil
	}
	h, err := scanHolding(b.pool.QueryRow(ctx, `SELECT `+b.holdingColumns()+` FROM sessions WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Holding{}, nil
	}
	if err != nil {
		return Holding{}, b.wrap(err)
	}
	return h, nil
}

// HeldAll is Held of every session the store holds, by id, from one query: a sync pass over a host's store
// asks once instead of a round trip per session (which was most of a pass that finds nothing new).
func (b *Backend) HeldAll(ctx context.Context) (_ map[string]Holding, err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	out := map[string]Holding{}
	if b.empty(ctx) {
		return out, nil
	}
	rows, err := b.pool.Query(ctx, `SELECT id, `+b.holdingColumns()+` FROM sessions`)
	if err != nil {
		return nil, b.wrap(err)
	}
	defer rows.Close()
	for rows.Next() {
		progress(ctx)
		var id string
		h, err := scanHolding(rows, &id)
		if err != nil {
			return nil, b.wrap(err)
		}
		out[id] = h
	}
	if err := rows.Err(); err != nil {
		return nil, b.wrap(err)
	}
	return out, nil
}

// holdingColumns are the columns scanHolding reads.
func (b *Backend) holdingColumns() string {
	return `host, next_seq, header, sync_host, sync_seen, revision, ` + b.generationCol()
}

// scanHolding reads holdingColumns (after any leading columns given in lead).
func scanHolding(row pgx.Row, lead ...any) (Holding, error) {
	var h Holding
	var syncHost *string
	var seen *time.Time
	var gen int16
	if err := row.Scan(append(lead, &h.Host, &h.NextSeq, &h.Header, &syncHost, &seen, &h.Revision, &gen)...); err != nil {
		return Holding{}, err
	}
	h.Exists, h.Generation = true, int(gen)
	if syncHost != nil {
		h.SyncHost = *syncHost
	}
	if seen != nil {
		h.SyncSeen = *seen
	}
	return h, nil
}

// Ingest stores lines — complete stored lines (no LF) whose seqs run contiguously from from — as session
// id of host, in ONE transaction: the session row is created (source host and sync host: host) or locked
// (SELECT … FOR UPDATE); another host or another header is a *HostConflictError, a from other than the
// stored next seq a *GapError, a session a dshfs writer holds a busy *eventstore.CommandError — each with
// nothing written. Otherwise the rows are inserted, the session's next seq, size and revision advanced,
// sync_host set to host and sync_seen to now, and the change announced. With no lines, an existing
// session's sync_seen is refreshed alone (its content, and so its revision, is unchanged).
func (b *Backend) Ingest(ctx context.Context, host, id string, header []byte, from int64, lines [][]byte) error {
	_, err := b.IngestRevision(ctx, host, id, header, from, lines)
	return err
}

// IngestRevision is Ingest returning the session's revision after the transaction: a sync that knows the
// revision its own write produced knows, while the session keeps it, that nobody else wrote there since.
func (b *Backend) IngestRevision(ctx context.Context, host, id string, header []byte, from int64, lines [][]byte) (rev int64, err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	if host == "" || id == "" {
		return 0, errors.New("ingest: host and session id must not be empty")
	}
	hf, err := parseHeader(id, header)
	if err != nil {
		return 0, err
	}
	if err := storable(id, hf); err != nil {
		return 0, err
	}
	resume := pause(ctx)
	recs, err := encodeBatch(id, hf.generation, from, lines)
	resume()
	if err != nil {
		return 0, err
	}
	err = b.tx(ctx, func(tx pgx.Tx) error {
		if err := b.tryXactLock(ctx, tx, id); err != nil {
			return err
		}
		var have, stored []byte
		var haveHost string
		var syncHost *string
		var next int64
		err := tx.QueryRow(ctx, `SELECT host, header, next_seq, sync_host FROM sessions WHERE id = $1 FOR UPDATE`, id).Scan(&haveHost, &stored, &next, &syncHost)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if from != 0 {
				return &GapError{ID: id, From: from, NextSeq: 0}
			}
			inc := eventstore.NewUUID()
			if _, err := tx.Exec(ctx, `INSERT INTO sessions (id, header, version, created_at, cwd, parent_session, host, incarnation, bytes, sync_host, sync_seen, generation)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $7, now(), $10)`, id, header, hf.version, hf.createdAt, hf.cwd, hf.parent, host, inc, int64(len(header)+1), hf.generation); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			have = stored
			if haveHost != host || !bytes.Equal(have, header) {
				return &HostConflictError{ID: id, Host: host, Have: haveHost, HeaderDiffers: !bytes.Equal(have, header), StoredHeader: have, IngestingHeader: header}
			}
			if syncHost == nil {
				return &ReleasedError{ID: id, Host: host}
			}
			if from != next {
				return &GapError{ID: id, From: from, NextSeq: next}
			}
			if len(recs) == 0 {
				return tx.QueryRow(ctx, `UPDATE sessions SET sync_host = $2, sync_seen = now() WHERE id = $1 RETURNING revision`, id, host).Scan(&rev)
			}
		}
		rev, err = syncedRows(ctx, tx, id, recs, host)
		return err
	})
	return rev, err
}

// syncedRows stores the rows a sync copies from host, in the transaction that proved them, and announces
// the session: its new revision.
func syncedRows(ctx context.Context, tx pgx.Tx, id string, recs []storedLine, host string) (int64, error) {
	if err := insertRows(ctx, tx, id, recs); err != nil {
		return 0, err
	}
	if err := advance(ctx, tx, id, recs, &host, true); err != nil {
		return 0, err
	}
	var rev int64
	if err := tx.QueryRow(ctx, `SELECT revision FROM sessions WHERE id = $1`, id).Scan(&rev); err != nil {
		return 0, err
	}
	return rev, notify(ctx, tx, id)
}

// insertRows inserts events rows (COPY: a sync batch can be thousands of lines).
func insertRows(ctx context.Context, tx pgx.Tx, id string, recs []storedLine) error {
	if len(recs) == 0 {
		return nil
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"events"}, []string{"session_id", "seq", "last_seq", "type", "time", "line", "compressed"},
		pgx.CopyFromSlice(len(recs), func(i int) ([]any, error) {
			progress(ctx)
			r := &recs[i]
			return []any{id, r.seq, r.lastSeq, r.typ, r.time, r.line, r.compressed}, nil
		}))
	return err
}

// advance records appended rows on the session row: next seq, counts, last time, and (bump) a new
// revision; with syncHost, the sync that fed them; without, a fleet writer's rows: the session is no longer
// a sync's (one whose sync went idle is taken over), so that its host's sync sees it released.
func advance(ctx context.Context, tx pgx.Tx, id string, recs []storedLine, syncHost *string, bump bool) error {
	var size int64
	for i := range recs {
		size += recs[i].size + 1
	}
	var next, last *int64
	if n := len(recs); n > 0 {
		nx, lt := recs[n-1].lastSeq+1, recs[n-1].last
		next, last = &nx, &lt
	}
	q := `UPDATE sessions SET next_seq = COALESCE($2, next_seq), rows = rows + $3, bytes = bytes + $4, last_time = COALESCE($5, last_time),
updated_at = now()`
	if bump {
		q += `, revision = revision + 1`
	}
	if syncHost != nil {
		q += `, sync_host = $6, sync_seen = now() WHERE id = $1`
		_, err := tx.Exec(ctx, q, id, next, int64(len(recs)), size, last, *syncHost)
		return err
	}
	_, err := tx.Exec(ctx, q+`, sync_host = NULL, sync_seen = NULL WHERE id = $1`, id, next, int64(len(recs)), size, last)
	return err
}

// Touch tells the store that host's sync still runs: every session it feeds whose sync_seen is older
// than fresh is marked seen now, in one statement (a per-session refresh costs a query per session a
// minute). Released sessions are left as they are.
func (b *Backend) Touch(ctx context.Context, host string, fresh time.Duration) (err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	if b.opts.ReadOnly {
		return b.readOnlyError()
	}
	_, err = b.pool.Exec(ctx, `UPDATE sessions SET sync_seen = now() WHERE sync_host = $1 AND (sync_seen IS NULL OR sync_seen < now() - make_interval(secs => $2))`,
		host, fresh.Seconds())
	return err
}

// Release hands a synced session over (`dshfs sync --release`): its sync host is cleared, so it is
// writable through the fleet store at once. host, when not empty, must be the syncing host; a session
// nobody syncs is left as it is.
func (b *Backend) Release(ctx context.Context, host, id string) (err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	return b.tx(ctx, func(tx pgx.Tx) error {
		var syncHost *string
		err := tx.QueryRow(ctx, `SELECT sync_host FROM sessions WHERE id = $1 FOR UPDATE`, id).Scan(&syncHost)
		if errors.Is(err, pgx.ErrNoRows) {
			return &eventstore.NotFoundError{ID: id}
		}
		if err != nil || syncHost == nil {
			return err
		}
		if host != "" && *syncHost != host {
			return &eventstore.CommandError{Failure: eventstore.Busy, Code: eventstore.CodeLocked,
				Message: fmt.Sprintf("session %q is synced by host %q, not %q; not released", id, *syncHost, host)}
		}
		if _, err := tx.Exec(ctx, `UPDATE sessions SET sync_host = NULL, sync_seen = NULL, revision = revision + 1, updated_at = now() WHERE id = $1`, id); err != nil {
			return err
		}
		return notify(ctx, tx, id)
	})
}

// tryXactLock takes session id's writer lock for the transaction without waiting: a write outside the
// engine (Ingest) never runs while a dshfs writer holds the session.
func (b *Backend) tryXactLock(ctx context.Context, tx pgx.Tx, id string) error {
	var ok bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, hashtext($2))`, lockNamespace, id).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return b.lockedError(ctx, tx, id)
	}
	return nil
}

// lockedError is the refusal of a session whose writer lock another connection holds, naming the holder
// the writers table records.
func (b *Backend) lockedError(ctx context.Context, q queryer, id string) error {
	return &eventstore.CommandError{Failure: eventstore.Busy, Code: eventstore.CodeLocked,
		Message: "session " + strconv.Quote(id) + " is being written by " + b.holder(ctx, q, id) + "; reads work, writes are refused until it releases the session"}
}

// Holder names who holds session id's writer lock now — "dshfs on host H (pid P, since T)" — or "" when
// nobody does: for status.json.
func (b *Backend) Holder(ctx context.Context, id string) (_ string, err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	if b.empty(ctx) {
		return "", nil
	}
	var held bool
	if err := b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
AND classid = $1::oid AND objid = hashtext($2)::oid AND objsubid = 2)`, int64(uint32(lockNamespace)), id).Scan(&held); err != nil {
		return "", b.wrap(err)
	}
	if !held {
		return "", nil
	}
	return b.holder(ctx, b.pool, id), nil
}

// holder names who holds a session's writer lock: its host, pid and since when.
func (b *Backend) holder(ctx context.Context, q queryer, id string) string {
	var host string
	var pid int32
	var since time.Time
	err := q.QueryRow(ctx, `SELECT w.host, w.pid, w.since FROM writers w JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted
AND l.classid = $2::oid AND l.objid = hashtext($1)::oid AND l.objsubid = 2 AND l.pid = w.backend_pid
WHERE w.session_id = $1`, id, int64(uint32(lockNamespace))).Scan(&host, &pid, &since)
	if err != nil {
		return "another dshfs writer"
	}
	return fmt.Sprintf("dshfs on host %s (pid %d, since %s)", host, pid, since.UTC().Format(time.RFC3339))
}

// Custody is who holds session id here, for status.json: the host it came from and the sync still feeding
// it (eventstore.Custodian).
func (b *Backend) Custody(ctx context.Context, id string) (_ eventstore.Custody, err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	c := eventstore.Custody{ReleaseAfter: b.opts.ReleaseAfter}
	if b.empty(ctx) {
		return c, &eventstore.NotFoundError{ID: id}
	}
	var syncHost *string
	err = b.pool.QueryRow(ctx, `SELECT host, sync_host FROM sessions WHERE id = $1`, id).Scan(&c.Host, &syncHost)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, &eventstore.NotFoundError{ID: id}
	}
	if err != nil {
		return c, b.wrap(err)
	}
	if syncHost != nil {
		c.SyncHost = *syncHost
	}
	states, err := b.syncStates(ctx, b.pool, id)
	if err != nil {
		return c, err
	}
	if st, ok := states[id]; ok {
		c.State, c.StateReason = st.State, st.Reason
	}
	return c, nil
}

// LineDigest is one stored line of a session: the seqs it holds and the SHA-256 of its text (decompressed,
// without LF). `dshfs sync` compares a host's lines with these before it appends, so that what it appends
// continues the stored log by content, not only by position.
type LineDigest struct {
	Seq, LastSeq int64
	Sum          [32]byte
}

// Digests returns the digests of session id's stored lines in seq order and the session's revision, from
// one statement (one snapshot, one round trip; exists is false when the store holds no such session). The
// server hashes the rows stored as they are (sha256), so that only 32 bytes of each travel; a row kept as a
// zstd frame travels whole and is hashed here once decompressed.
func (b *Backend) Digests(ctx context.Context, id string) (revision int64, exists bool, _ []LineDigest, err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	if b.empty(ctx) {
		return 0, false, nil, nil
	}
	rows, err := b.pool.Query(ctx, `SELECT s.revision, e.seq, e.last_seq, CASE WHEN e.compressed THEN e.line ELSE sha256(e.line) END, e.compressed
FROM sessions s LEFT JOIN events e ON e.session_id = s.id WHERE s.id = $1 ORDER BY e.seq`, id)
	if err != nil {
		return 0, false, nil, b.wrap(err)
	}
	defer rows.Close()
	var out []LineDigest
	for rows.Next() {
		progress(ctx)
		var seq, last *int64
		var data []byte
		var compressed *bool
		if err := rows.Scan(&revision, &seq, &last, &data, &compressed); err != nil {
			return 0, false, nil, b.wrap(err)
		}
		exists = true
		if seq == nil {
			continue // a session of no events
		}
		d := LineDigest{Seq: *seq, LastSeq: *last}
		if *compressed {
			line, err := decompress(data, true, b.opts.MaxData)
			if err != nil {
				return 0, false, nil, &contentError{fmt.Errorf("session %q: the row at seq %d: %w", id, d.Seq, err)}
			}
			d.Sum = sha256.Sum256(line)
		} else if copy(d.Sum[:], data) != len(d.Sum) {
			return 0, false, nil, fmt.Errorf("session %q: the row at seq %d: a digest of %d bytes", id, d.Seq, len(data))
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return 0, false, nil, b.wrap(err)
	}
	return revision, exists, out, nil
}

// StoredLine returns the text of session id's stored line that starts at seq (decompressed, without LF):
// what `dshfs sync` decodes to name the first event where a host's log and the stored one differ.
func (b *Backend) StoredLine(ctx context.Context, id string, seq int64) (_ []byte, err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	if b.empty(ctx) {
		return nil, &eventstore.NotFoundError{ID: id}
	}
	var data []byte
	var compressed bool
	err = b.pool.QueryRow(ctx, `SELECT line, compressed FROM events WHERE session_id = $1 AND seq = $2`, id, seq).Scan(&data, &compressed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &eventstore.NotFoundError{ID: id}
	}
	if err != nil {
		return nil, b.wrap(err)
	}
	line, err := decompress(data, compressed, b.opts.MaxData)
	if err != nil {
		return nil, &contentError{err}
	}
	return line, nil
}
