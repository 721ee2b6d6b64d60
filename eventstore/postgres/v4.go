package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/jackc/pgx/v5"
)

// A v4 session (sessions.generation 4) is stored as its v4 file holds it: the header column is the
// file's physical header line, and each events row one physical row line — one event, its seq the row's
// seq — byte for byte. A load joins them into the raw v4 text (the file's plaintext) and restores it with
// the v4 codec exactly as the JSONL backend restores a session.v4.jsonl, so the events, the refusals and
// the repair plan are the same ones; nothing of the v4 rules is restated here.

// v4Row describes a physical v4 row line (no LF) as its events row: one event, whose seq, type and time
// the row states. Whether the row is one the v4 restore accepts is the restore's matter (a load, or the
// writer's V4Checker before a write); a row without a seq has no place here.
func v4Row(line []byte) (storedLine, error) {
	v, err := event.Parse(line)
	if err != nil {
		return storedLine{}, fmt.Errorf("line is not JSON: %w", err)
	}
	if v.Kind != event.KindObject {
		return storedLine{}, errors.New("a v4 row must be a JSON object")
	}
	seq, ok := v.Get("seq")
	if !ok || seq.Kind != event.KindNumber || !event.IsSafeInteger(seq.Num) || seq.Num < 0 {
		return storedLine{}, errors.New("the v4 row has no valid seq")
	}
	s := storedLine{seq: int64(seq.Num), lastSeq: int64(seq.Num), typ: "?", size: int64(len(line))}
	if t, ok := v.Get("type"); ok && t.Kind == event.KindString {
		s.typ = t.Str
	}
	if t, ok := v.Get("time"); ok && t.Kind == event.KindNumber && event.IsSafeInteger(t.Num) {
		s.time = int64(t.Num)
	}
	s.last = s.time
	s.line, s.compressed = compress(line)
	return s, nil
}

// v4HeaderLine is the physical header line a v4 file starts with, for a header whose Logical is the
// codec's logical header (eventstore.V4Header, a fork's child): "type" first, as the JSONL writer writes it.
func v4HeaderLine(h event.Header) ([]byte, error) {
	if len(h.Logical) < 2 || h.Logical[0] != '{' {
		return nil, errors.New("a v4 header needs its logical form")
	}
	return append([]byte(`{"type":"session",`), h.Logical[1:]...), nil
}

// v4Rows describes a batch of v4 events as their physical rows (generation.PhysicalRow: what the JSONL
// writer writes to a session.v4.jsonl), one row an event.
func v4Rows(batch []event.Event) ([]storedLine, error) {
	out := make([]storedLine, len(batch))
	for i, e := range batch {
		row, err := generation.PhysicalRow(e)
		if err == nil {
			out[i], err = v4Row(row)
		}
		if err != nil {
			return nil, &eventstore.CommandError{Failure: eventstore.Invalid, Code: eventstore.CodeBadInput,
				Message: "an event of the batch cannot be stored as a v4 row in the fleet store: " + err.Error()}
		}
	}
	return out, nil
}

// laterError classifies what the v4 codec refused, as the JSONL backend does: unsupported, or corruption
// of the stored log.
func laterError(err error) error {
	var u interface{ Unsupported() bool }
	if errors.As(err, &u) && u.Unsupported() {
		return &eventstore.UnsupportedError{Message: err.Error()}
	}
	return &contentError{err}
}

// loadV4 reads a v4 session's rows (inside the load's snapshot) and restores them.
func (b *Backend) loadV4(ctx context.Context, tx pgx.Tx, s sessionRow, sink eventstore.ProgressSink) (*eventstore.Prefix, error) {
	text := append(bytes.Clone(s.header), '\n')
	var starts []int64 // where each row starts in text
	var seqs []int64
	err := b.eachLine(ctx, tx, s.id, 0, func(seq int64, line []byte, err error) error {
		if err != nil {
			return &contentError{fmt.Errorf("session %q: the row at seq %d: %w", s.id, seq, err)}
		}
		starts, seqs = append(starts, int64(len(text))), append(seqs, seq)
		text = append(append(text, line...), '\n')
		return nil
	})
	if err != nil {
		return nil, err
	}
	p, err := b.restoreV4(text, starts, seqs)
	if err != nil {
		return nil, err
	}
	p.Artifact = b.artifact(s)
	if sink != nil {
		sink.Header(p.Header, "")
		sink.Events(p.Events, nil)
	}
	return p, nil
}

// restoreV4 restores the raw v4 text of a session (its header line and rows, each LF-terminated; starts
// and seqs are each row's offset in text and seq) as the JSONL backend restores a raw session.v4.jsonl:
// recovery 'recoverable', so a damaged row ends the log unless a later turn/end proves it committed. The
// rows past the restored prefix are the torn tail, from the seq of the first of them.
func (b *Backend) restoreV4(text []byte, starts, seqs []int64) (*eventstore.Prefix, error) {
	a, err := generation.DecodeWith(text, generation.Options{Generation: 4, Recovery: generation.Recoverable,
		MaxFrameBytes: generation.DefaultMaxFrameBytes, Workers: b.opts.Tuning.N()})
	if err != nil {
		return nil, laterError(err)
	}
	budget := eventstore.Budget{Limit: b.opts.MaxSession}
	if err := budget.Add(a.Events); err != nil {
		return nil, err
	}
	p := &eventstore.Prefix{Header: jsonl.LaterHeader(a.Header), Events: a.Events, Generation: 4}
	closers, rerr := a.Repair()
	p.Later = &eventstore.LaterLog{Header: a.Header, Cut: a.InheritedEventCount, Closers: closers, RepairErr: rerr}
	if n := int64(len(text)); a.Committed < n {
		for i, at := range starts {
			if at >= a.Committed {
				p.Torn = &eventstore.Torn{Seq: seqs[i], Bytes: n - at}
				break
			}
		}
		if p.Torn == nil {
			return nil, &contentError{errors.New("corrupt session log: the v4 restore ends inside the row at offset " + strconv.FormatInt(a.Committed, 10))}
		}
	}
	return p, nil
}

// Supersede carries a session its host's harness upgraded into its new generation: the fleet store's v0
// log of session id, fed by host's sync and still at revision rev (what the sync compared the v4 log
// with), is replaced by the v4 log — header, its physical header line; lines, its rows from seq 0 — in
// ONE transaction. The v0 log is not lost: its header line and lines are kept first as a `kept` row of
// kind superseded (a JSONL text, as a torn one is). The session gets a new incarnation (its artifact was
// replaced, as the harness replaces the file it reads), its stale state is cleared, and the change is
// announced. A session of another host, one released, written since (another revision), already v4, or
// held by a writer is refused with nothing written. It returns the session's revision after.
func (b *Backend) Supersede(ctx context.Context, host, id string, rev int64, header []byte, lines [][]byte) (newRev int64, err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	hf, err := parseHeader(id, header)
	if err != nil {
		return 0, err
	}
	if hf.generation != 4 {
		return 0, fmt.Errorf("session %q: a superseding log must be generation v4", id)
	}
	if err := storable(id, hf); err != nil {
		return 0, err
	}
	resume := pause(ctx)
	recs, err := encodeBatch(id, 4, 0, lines)
	resume()
	if err != nil {
		return 0, err
	}
	err = b.tx(ctx, func(tx pgx.Tx) error {
		if err := b.tryXactLock(ctx, tx, id); err != nil {
			return err
		}
		if err := ensureStates(ctx, tx); err != nil {
			return err
		}
		cur, err := scanSession(tx.QueryRow(ctx, `SELECT `+b.sessionCols()+` FROM sessions WHERE id = $1 FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return &eventstore.NotFoundError{ID: id}
		}
		if err != nil {
			return err
		}
		switch {
		case cur.host != host:
			return &HostConflictError{ID: id, Host: host, Have: cur.host}
		case cur.syncHost == nil:
			return &ReleasedError{ID: id, Host: host}
		case cur.generation != 0:
			return conflict(fmt.Sprintf("session %q is already generation v%d in the fleet store; nothing was written", id, cur.generation))
		case cur.revision != rev:
			return conflict(fmt.Sprintf("session %q changed in the fleet store while its v4 successor was compared with it (revision %d became %d); nothing was written", id, rev, cur.revision))
		}
		body := append(bytes.Clone(cur.header), '\n')
		if err := b.eachLine(ctx, tx, id, 0, func(seq int64, line []byte, err error) error {
			if err != nil {
				line = fmt.Appendf(nil, "(row at seq %d does not read: %v)", seq, err)
			}
			body = append(append(body, line...), '\n')
			return nil
		}); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO kept (session_id, kind, host, body) VALUES ($1, 'superseded', $2, $3)`, id, host, body); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM events WHERE session_id = $1`, id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM sync_states WHERE session_id = $1`, id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE sessions SET header = $2, version = $3, created_at = $4, cwd = $5, parent_session = $6, generation = 4,
incarnation = $7, next_seq = 0, rows = 0, bytes = $8, last_time = NULL WHERE id = $1`,
			id, header, hf.version, hf.createdAt, hf.cwd, hf.parent, eventstore.NewUUID(), int64(len(header)+1)); err != nil {
			return err
		}
		newRev, err = syncedRows(ctx, tx, id, recs, host)
		return err
	})
	b.mu.Lock()
	if err == nil {
		b.hasStates = true
	}
	b.mu.Unlock()
	return newRev, err
}

// Kept is one row of the `kept` table: what a write could not store, a repair cut, or a superseded v0 log.
type Kept struct {
	ID   int64
	Kind string // pending, torn or superseded
	Host string
	Body []byte // JSONL text: the header line, then the lines
}

// KeptOf returns the kept rows of session id, oldest first: where a superseded v0 log is retrieved.
func (b *Backend) KeptOf(ctx context.Context, id string) (_ []Kept, err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	if b.empty(ctx) {
		return nil, nil
	}
	rows, err := b.pool.Query(ctx, `SELECT id, kind, host, body FROM kept WHERE session_id = $1 ORDER BY id`, id)
	if err != nil {
		return nil, b.wrap(err)
	}
	defer rows.Close()
	var out []Kept
	for rows.Next() {
		var k Kept
		if err := rows.Scan(&k.ID, &k.Kind, &k.Host, &k.Body); err != nil {
			return nil, b.wrap(err)
		}
		out = append(out, k)
	}
	return out, b.wrap(rows.Err())
}
