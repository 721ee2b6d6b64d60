package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/jackc/pgx/v5"
)

// commit runs fn in one transaction that then bumps the session's revision, announces the change and
// returns the state it left. A session whose writer lock this Backend holds is written on the lock's own
// connection — re-taken first when it was lost, so a write never lands without its lock. A write without
// the lock (convert, a foreign writer) is caught, as the harness's are, by the revision and next-seq
// checks. A session a host's sync still feeds is refused. On any failure nothing is written.
func (b *Backend) commit(ctx context.Context, id string, fn func(tx pgx.Tx) error) (_ eventstore.Artifact, err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	if b.opts.ReadOnly {
		return eventstore.Artifact{}, b.readOnlyError()
	}
	var s sessionRow
	body := func(tx pgx.Tx) error {
		if err := b.syncHeld(ctx, tx, id); err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE sessions SET revision = revision + 1, updated_at = now() WHERE id = $1`, id); err != nil {
			return err
		}
		if err := notify(ctx, tx, id); err != nil {
			return err
		}
		var err error
		s, err = b.session(ctx, tx, id)
		return err
	}
	if l := b.lockOf(id); l != nil {
		l.mu.Lock()
		var conn *pgx.Conn
		if conn, err = l.live(ctx); err == nil {
			err = pgx.BeginFunc(ctx, conn, body)
		}
		l.mu.Unlock()
	} else {
		err = pgx.BeginFunc(ctx, b.pool, body)
	}
	if err != nil {
		return eventstore.Artifact{}, b.wrap(err)
	}
	return b.artifact(s), nil
}

// conflict is the refusal of a write whose session changed under the writer.
func conflict(msg string) error {
	return &eventstore.CommandError{Failure: eventstore.Busy, Code: eventstore.CodeConflict, Message: msg}
}

// encodeEvents describes a batch's stored lines as rows: packed as the JSONL writer packs a batch, or one
// line per event (packed false: repair closers, as the harness writes them). t spreads a large batch.
func encodeEvents(batch []event.Event, packing []event.Packing, packed bool, t eventstore.Tuning) ([]storedLine, error) {
	var lines [][]byte
	switch {
	case !packed:
		lines = make([][]byte, len(batch))
		for i, e := range batch {
			lines[i] = e.Raw
		}
	case packing != nil:
		lines = event.PackBatchOf(batch, packing)
	default:
		lines = event.PackBatch(batch, t.N())
	}
	out := make([]storedLine, len(lines))
	err := t.Parallel(len(lines), 1024, func(lo, hi int) error {
		for i := lo; i < hi; i++ {
			s, err := encodeLine(lines[i])
			if err != nil {
				return &eventstore.CommandError{Failure: eventstore.Invalid, Code: eventstore.CodeBadInput,
					Message: "a line of the batch cannot be stored in the fleet store: " + err.Error()}
			}
			out[i] = s
		}
		return nil
	})
	return out, err
}

// encodeFor is encodeEvents for the writer of header h: a v4 header's batch is stored as its physical v4
// rows, one an event, whatever packed says (a v4 file packs nothing).
func (b *Backend) encodeFor(h event.Header, batch []event.Event, packing []event.Packing, packed bool) ([]storedLine, error) {
	if h.Version == 4 {
		return v4Rows(batch)
	}
	return encodeEvents(batch, packing, packed, b.opts.Tuning)
}

// headerOf is the header line a new session of header h is stored with, and its generation.
func headerOf(h event.Header) ([]byte, int16, error) {
	if h.Version == 4 {
		line, err := v4HeaderLine(h)
		return line, 4, err
	}
	return h.Line(), 0, nil
}

// Materialize writes a new session's row and its first batch (possibly empty) in one transaction; an
// existing session is never touched. Its source host is this Backend's host. A v4 header (its Logical the
// codec's logical header) makes a v4 session, stored as the v4 file the JSONL writer would write.
func (b *Backend) Materialize(ctx context.Context, h event.Header, batch []event.Event) (_ eventstore.Artifact, err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	resume := pause(ctx)
	recs, err := b.encodeFor(h, batch, nil, true)
	resume()
	if err != nil {
		return eventstore.Artifact{}, err
	}
	line, gen, err := headerOf(h)
	var hf headerFields
	if err == nil {
		hf, err = parseHeader(h.ID, line)
	}
	if err == nil {
		err = storable(h.ID, hf)
	}
	if err != nil {
		return eventstore.Artifact{}, &eventstore.CommandError{Failure: eventstore.Invalid, Code: eventstore.CodeBadInput, Message: err.Error()}
	}
	inc := eventstore.NewUUID()
	return b.commit(ctx, h.ID, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO sessions (id, header, version, created_at, cwd, parent_session, host, incarnation, bytes, generation)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (id) DO NOTHING`, h.ID, line, hf.version, hf.createdAt, hf.cwd, hf.parent, b.opts.Host, inc, int64(len(line)+1), gen)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return &eventstore.CommandError{Failure: eventstore.Exists, Code: eventstore.CodeAlreadyExists,
				Message: `refusing to materialize "` + h.ID + `": a log already exists in the fleet store (load/resume it instead)`}
		}
		if err := insertRows(ctx, tx, h.ID, recs); err != nil {
			return err
		}
		return advance(ctx, tx, h.ID, recs, nil, false)
	})
}

// lockSession reads the session row for update and checks it is still in the state the writer saw.
func (b *Backend) lockSession(ctx context.Context, tx pgx.Tx, id string, expect eventstore.Artifact) (sessionRow, error) {
	cur, err := scanSession(tx.QueryRow(ctx, `SELECT `+b.sessionCols()+` FROM sessions WHERE id = $1 FOR UPDATE`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return cur, &eventstore.NotFoundError{ID: id}
	}
	if err != nil {
		return cur, err
	}
	if tok := b.token(cur); tok != expect.Token {
		return cur, conflict("session " + strconv.Quote(id) + " changed under this writer (another writer wrote it: revision " + expect.Token + " became " + tok + "); nothing was written")
	}
	return cur, nil
}

// sameGeneration refuses a write in the shapes of header h to a session stored in another generation:
// the session was replaced by its v4 successor under a writer of its v0 log (a conflict, as a foreign
// write is, so the writer keeps its events instead of retrying).
func sameGeneration(cur sessionRow, h event.Header) error {
	want := int16(0)
	if h.Version == 4 {
		want = 4
	}
	if cur.generation != want {
		return conflict(fmt.Sprintf("session %q is format generation v%d in the fleet store, not v%d as this writer read it (its v%d log was superseded); nothing was written",
			cur.id, cur.generation, want, want))
	}
	return nil
}

// AppendBatch appends one batch in one transaction: the session's revision compared with what the writer
// last saw and its stored next seq with the batch's first, the batch packed as the JSONL writer packs it
// and inserted, the revision bumped. On any failure nothing is written.
func (b *Backend) AppendBatch(ctx context.Context, h event.Header, expect eventstore.Artifact, batch []event.Event, packing []event.Packing) (_ eventstore.Artifact, err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	if len(batch) == 0 {
		return expect, nil
	}
	resume := pause(ctx)
	recs, err := b.encodeFor(h, batch, packing, true)
	resume()
	if err != nil {
		return eventstore.Artifact{}, err
	}
	return b.commit(ctx, h.ID, func(tx pgx.Tx) error {
		cur, err := b.lockSession(ctx, tx, h.ID, expect)
		if err == nil {
			err = sameGeneration(cur, h)
		}
		if err != nil {
			return err
		}
		if recs[0].seq != cur.nextSeq {
			return conflict("session " + h.ID + " append starts at seq " + batch[0].SeqText() + ", stored next seq is " + strconv.FormatInt(cur.nextSeq, 10))
		}
		if err := noTornRows(ctx, tx, h.ID, cur.nextSeq); err != nil {
			return err
		}
		if err := insertRows(ctx, tx, h.ID, recs); err != nil {
			return err
		}
		return advance(ctx, tx, h.ID, recs, nil, false)
	})
}

// noTornRows refuses an append over rows past the stored next seq (damage: a torn tail needs a repair).
func noTornRows(ctx context.Context, tx pgx.Tx, id string, next int64) error {
	var torn bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE session_id = $1 AND seq >= $2)`, id, next).Scan(&torn); err != nil {
		return err
	}
	if torn {
		return &contentError{errors.New("session " + id + " has an invalid physical tail at seq " + strconv.FormatInt(next, 10))}
	}
	return nil
}

// CommitRepair deletes a torn tail — keeping the deleted rows' lines in the `kept` table first, so a
// repair never destroys evidence — and appends the closers (one line each, never packed), in one
// transaction with the staleness checks.
func (b *Backend) CommitRepair(ctx context.Context, h event.Header, expect eventstore.Artifact, torn *eventstore.Torn, recovered, closers []event.Event) (_ eventstore.Artifact, err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	if torn == nil && len(recovered)+len(closers) == 0 {
		return expect, nil
	}
	resume := pause(ctx)
	recs, err := b.encodeFor(h, append(append([]event.Event(nil), recovered...), closers...), nil, false)
	resume()
	if err != nil {
		return eventstore.Artifact{}, err
	}
	return b.commit(ctx, h.ID, func(tx pgx.Tx) error {
		cur, err := b.lockSession(ctx, tx, h.ID, expect)
		if err == nil {
			err = sameGeneration(cur, h)
		}
		if err != nil {
			return err
		}
		if torn != nil {
			if err := b.cutTorn(ctx, tx, cur, torn.Seq); err != nil {
				return err
			}
			if cur, err = b.session(ctx, tx, h.ID); err != nil {
				return err
			}
		}
		if len(recs) == 0 {
			return nil
		}
		if recs[0].seq != cur.nextSeq {
			return conflict("session " + h.ID + " repair is stale: closer starts at seq " + strconv.FormatInt(recs[0].seq, 10) + ", stored next seq is " + strconv.FormatInt(cur.nextSeq, 10))
		}
		if err := insertRows(ctx, tx, h.ID, recs); err != nil {
			return err
		}
		return advance(ctx, tx, h.ID, recs, nil, false)
	})
}

// cutTorn moves the rows from seq from on into `kept` (kind torn: the header line and the rows' lines, a
// JSONL text) and sets the session's next seq, row count and size from what stays.
func (b *Backend) cutTorn(ctx context.Context, tx pgx.Tx, cur sessionRow, from int64) error {
	body := append(bytes.Clone(cur.header), '\n')
	var n, size int64
	err := b.eachLine(ctx, tx, cur.id, from, func(seq int64, line []byte, err error) error {
		if err != nil {
			line = fmt.Appendf(nil, "(row at seq %d does not read: %v)", seq, err)
		}
		body = append(append(body, line...), '\n')
		n++
		size += int64(len(line)) + 1
		return nil
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return conflict("session " + cur.id + " repair is stale: physical tail no longer starts at seq " + strconv.FormatInt(from, 10))
	}
	if _, err := tx.Exec(ctx, `INSERT INTO kept (session_id, kind, host, body) VALUES ($1, 'torn', $2, $3)`, cur.id, b.opts.Host, body); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM events WHERE session_id = $1 AND seq >= $2`, cur.id, from); err != nil {
		return err
	}
	// the rows kept are contiguous from 0 up to the cut; the last one's time is the session's time
	_, err = tx.Exec(ctx, `UPDATE sessions SET next_seq = COALESCE((SELECT max(last_seq) + 1 FROM events WHERE session_id = $1), 0),
rows = (SELECT count(*) FROM events WHERE session_id = $1), bytes = GREATEST(bytes - $2, length(header) + 1),
last_time = (SELECT time FROM events WHERE session_id = $1 ORDER BY seq DESC LIMIT 1) WHERE id = $1`, cur.id, size)
	return err
}

// WritesGeneration says that a fleet store writes v0 and v4 sessions (eventstore.GenerationWriter).
func (b *Backend) WritesGeneration(g int) bool { return g == 0 || g == 4 }

// KeepPending keeps events that were accepted but could not be written: as a `kept` row (kind pending: the
// header line and one event per line) when the database takes it, else — the database being what failed —
// in a local file under Options.PendingDir. It returns where.
func (b *Backend) KeepPending(ctx context.Context, h event.Header, events []event.Event) (string, error) {
	line, _, err := headerOf(h)
	if err != nil {
		line = h.Line()
	}
	body := append(line, '\n')
	for _, e := range events {
		body = append(append(body, e.Raw...), '\n')
	}
	if !b.opts.ReadOnly {
		tctx, end := b.bound(ctx)
		var id int64
		err := b.pool.QueryRow(tctx, `INSERT INTO kept (session_id, kind, host, body) VALUES ($1, 'pending', $2, $3) RETURNING id`, h.ID, b.opts.Host, body).Scan(&id)
		err = end(err)
		if err == nil {
			return "the fleet store " + b.where + ", table kept, row " + strconv.FormatInt(id, 10), nil
		}
	}
	dir, err := b.pendingDir()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", &eventstore.IOError{Err: err}
	}
	path := filepath.Join(dir, "pending-"+safeName(h.ID)+"-"+strconv.FormatInt(time.Now().UnixNano(), 10)+".jsonl")
	return path, eventstore.WriteNewFile(path, body)
}

func (b *Backend) pendingDir() (string, error) {
	if b.opts.PendingDir != "" {
		return b.opts.PendingDir, nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "dshfs", "pending"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", &eventstore.IOError{Err: errors.New("no directory to keep pending events in: " + err.Error())}
	}
	return filepath.Join(home, ".local", "state", "dshfs", "pending"), nil
}

// safeName is a session id as a file name part: its bytes outside [A-Za-z0-9._-] hex-escaped.
func safeName(id string) string {
	var out []byte
	for i := 0; i < len(id) && len(out) < 96; i++ {
		c := id[i]
		if c == '.' && i == 0 || !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			out = fmt.Appendf(out, "%%%02X", c)
			continue
		}
		out = append(out, c)
	}
	return string(out)
}
