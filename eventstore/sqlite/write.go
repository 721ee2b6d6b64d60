package sqlite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
)

// commit runs fn in a BEGIN IMMEDIATE transaction on one connection, after the harness's schema recheck,
// then bumps the session's revision (every committed change does) and returns the state it left; on any
// failure nothing is written.
func (b *Backend) commit(ctx context.Context, id string, fn func(conn *sql.Conn) error) (eventstore.Artifact, error) {
	if b.opts.ReadOnly {
		return eventstore.Artifact{}, b.readOnlyError()
	}
	conn, err := b.db.Conn(ctx)
	if err != nil {
		return eventstore.Artifact{}, &eventstore.IOError{Err: err}
	}
	defer conn.Close()
	var s session
	err = immediate(ctx, conn, func() error {
		if err := b.checkMutation(ctx, conn); err != nil {
			return err
		}
		if err := fn(conn); err != nil {
			return err
		}
		if err := bumpRevision(ctx, conn, id); err != nil {
			return err
		}
		s, err = b.session(ctx, conn, id)
		return err
	})
	if err != nil {
		return eventstore.Artifact{}, wrapWrite(err)
	}
	return b.artifact(ctx, b.db, s, b.owner()), nil
}

// unchanged refuses a write when the session is no longer in the state the writer last saw.
func (b *Backend) unchanged(cur session, expect eventstore.Artifact) error {
	if tok := b.token(cur); tok != expect.Token {
		return conflict("session " + quote(cur.header.ID) + " changed under this writer (another process wrote it: revision " + expect.Token + " became " + tok + "); nothing was written")
	}
	return nil
}

// conflict is the refusal of a write whose session changed under the writer; the harness's next-seq text
// when that is what differs.
func conflict(msg string) error {
	return &eventstore.CommandError{Failure: eventstore.Busy, Code: eventstore.CodeConflict, Message: msg}
}

// nextSeq computes the stored next seq from the tail span, as the harness's append does: the last two
// rows, widened to any packed row covering the older one, scanned; a torn tail refuses the append.
func (b *Backend) nextSeq(ctx context.Context, q querier, id string) (int64, error) {
	tail, err := b.readRows(ctx, q, sqlSelectTail, id, 2)
	if err != nil || len(tail) == 0 {
		return 0, err
	}
	from := tail[len(tail)-1].seq // the older of the two (they come newest first)
	base, rows, err := b.spanFrom(ctx, q, id, from)
	if err != nil {
		return 0, err
	}
	sc, err := scanRows(rows, base, false, b.opts.Tuning)
	if err != nil {
		return 0, err
	}
	if sc.tornFrom >= 0 {
		return 0, errors.New("session " + id + " has an invalid physical tail at seq " + strconv.FormatInt(sc.tornFrom, 10))
	}
	if len(sc.events) == 0 {
		return base, nil
	}
	return sc.events[len(sc.events)-1].Seq + 1, nil
}

// spanFrom selects the rows that may hold seq from on: a packed row starting up to 1023 seqs earlier may
// cover it (a malformed one is included so that the scan fails closed).
func (b *Backend) spanFrom(ctx context.Context, q querier, id string, from int64) (int64, []row, error) {
	preds, err := b.readRows(ctx, q, sqlSelectPacked, id, max(0, from-MaxPackedMembers+1), from)
	if err != nil {
		return 0, nil, err
	}
	base := from
	for i := range preds {
		evs, err := decodeRow(&preds[i])
		if err != nil || (len(evs) > 0 && evs[len(evs)-1].Seq >= from) {
			base = min(base, preds[i].seq)
		}
	}
	rows, err := b.readRows(ctx, q, sqlSelectEventsFrom, id, base)
	return base, rows, err
}

func insert(ctx context.Context, conn *sql.Conn, id string, recs []bound) error {
	stmt, err := conn.PrepareContext(ctx, sqlInsertEvent)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, r := range recs {
		if _, err := stmt.ExecContext(ctx, id, r.seq, r.typ, r.time, r.data, r.seqs, r.surface, r.ignorable); err != nil {
			return err
		}
	}
	return nil
}

func bumpRevision(ctx context.Context, conn *sql.Conn, id string) error {
	res, err := conn.ExecContext(ctx, sqlBumpRevision, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return errors.New("session " + id + " metadata row is missing")
	}
	return nil
}

// bindBatch packs one append batch with the schema's bounds and encodes every record; an event the schema
// cannot hold as written refuses the whole batch before anything is written. t spreads a large batch.
func bindBatch(batch []event.Event, packing []event.Packing, t eventstore.Tuning) ([]bound, error) {
	recs := event.PackRecords(batch, packing, packLimits, t.N())
	out := make([]bound, len(recs))
	err := t.Parallel(len(recs), 1024, func(lo, hi int) error {
		for i := lo; i < hi; i++ {
			b, err := bindRecord(recs[i])
			if err != nil {
				e := recs[i].Event
				return &eventstore.CommandError{Failure: eventstore.Invalid, Code: eventstore.CodeBadInput,
					Message: "event seq " + e.SeqText() + " (" + e.Type + ") cannot be stored in a SQLite session database: " + err.Error()}
			}
			out[i] = b
		}
		return nil
	})
	return out, err
}

// Materialize writes a new session's row and its first batch (possibly empty) in one transaction; an
// existing session is never touched. Unlike the harness, whose create() writes nothing until the first
// append, an empty session is a row without events, so that a created session is listed at once.
func (b *Backend) Materialize(ctx context.Context, h event.Header, batch []event.Event) (eventstore.Artifact, error) {
	recs, err := bindBatch(batch, nil, b.opts.Tuning)
	if err != nil {
		return eventstore.Artifact{}, err
	}
	if h.Version != 0 {
		return eventstore.Artifact{}, errors.New("the SQLite schema stores headers of format version 0 only")
	}
	inc := eventstore.NewUUID()
	return b.commit(ctx, h.ID, func(conn *sql.Conn) error {
		if _, err := b.session(ctx, conn, h.ID); err == nil {
			return &eventstore.CommandError{Failure: eventstore.Exists, Code: eventstore.CodeAlreadyExists,
				Message: `refusing to materialize "` + h.ID + `": a log already exists in the database (load/resume it instead)`}
		} else if !isNotFound(err) {
			return err
		}
		if _, err := conn.ExecContext(ctx, sqlUpsertSession, h.ID, int64(h.Version), h.CreatedAt, valueArg(h.Cwd),
			valueArg(h.ParentSession), valueArg(h.SeedLength), valueArg(h.Origin), depthArg(h), valueArg(h.AgentPreset), inc); err != nil {
			return err
		}
		return insert(ctx, conn, h.ID, recs)
	})
}

// depthArg binds delegation_depth: NULL for a header without one, as the harness's provider stores it.
func depthArg(h event.Header) any {
	if h.NoDelegationDepth {
		return nil
	}
	return h.DelegationDepth
}

// valueArg binds an optional header field: NULL when absent, else its string or integer.
func valueArg(v *event.Value) any {
	switch {
	case v == nil:
		return nil
	case v.Kind == event.KindString:
		return v.Str
	case v.Kind == event.KindNumber:
		return int64(v.Num)
	}
	return string(event.Stringify(*v))
}

func isNotFound(err error) bool {
	var nf *eventstore.NotFoundError
	return errors.As(err, &nf)
}

// wrapWrite classifies a failed write: refusals and the harness's format texts pass as they are, anything
// else from SQLite is a storage failure (nothing was written: the transaction rolled back).
func wrapWrite(err error) error {
	var ce *eventstore.CommandError
	var fe *FormatError
	var ne *eventstore.NotFoundError
	if errors.As(err, &ce) || errors.As(err, &fe) || errors.As(err, &ne) {
		return err
	}
	return &eventstore.IOError{Err: err}
}

// AppendBatch appends one batch in one BEGIN IMMEDIATE transaction: the schema rechecked, the session's
// revision compared with what the writer last saw and the stored next seq with the batch's first, the
// batch packed and inserted, the revision bumped. On any failure nothing is written.
func (b *Backend) AppendBatch(ctx context.Context, h event.Header, expect eventstore.Artifact, batch []event.Event, packing []event.Packing) (eventstore.Artifact, error) {
	if len(batch) == 0 {
		return expect, nil
	}
	recs, err := bindBatch(batch, packing, b.opts.Tuning)
	if err != nil {
		return eventstore.Artifact{}, err
	}
	return b.commit(ctx, h.ID, func(conn *sql.Conn) error {
		cur, err := b.session(ctx, conn, h.ID)
		if err != nil {
			return err
		}
		next, err := b.nextSeq(ctx, conn, h.ID)
		if err != nil {
			return err
		}
		if batch[0].Seq != next {
			return conflict("session " + h.ID + " append starts at seq " + batch[0].SeqText() + ", stored next seq is " + strconv.FormatInt(next, 10))
		}
		if err := b.unchanged(cur, expect); err != nil {
			return err
		}
		return insert(ctx, conn, h.ID, recs)
	})
}

// CommitRepair deletes a torn tail and inserts the closers (as scalar rows, never packed), under BEGIN
// IMMEDIATE, with the harness's staleness checks. The deleted rows are first kept in a sidecar file beside
// the database (`<database>.torn-<sha256(id)>-<unix ns>.jsonl`, one JSON object per row with its columns),
// so a repair never destroys evidence.
func (b *Backend) CommitRepair(ctx context.Context, h event.Header, expect eventstore.Artifact, torn *eventstore.Torn, recovered, closers []event.Event) (eventstore.Artifact, error) {
	if torn == nil && len(recovered)+len(closers) == 0 {
		return expect, nil
	}
	batch := append(append([]event.Event(nil), recovered...), closers...)
	recs := make([]bound, len(batch))
	for i, e := range batch {
		r, err := bindScalar(e)
		if err != nil {
			return eventstore.Artifact{}, err
		}
		recs[i] = r
	}
	return b.commit(ctx, h.ID, func(conn *sql.Conn) error {
		cur, err := b.session(ctx, conn, h.ID)
		if isNotFound(err) {
			return errors.New("session " + h.ID + " metadata row is missing")
		} else if err != nil {
			return err
		}
		if err := b.unchanged(cur, expect); err != nil {
			return err
		}
		rows, err := b.readRows(ctx, conn, sqlSelectEvents, h.ID)
		if err != nil {
			return err
		}
		sc, err := scanRows(rows, 0, false, b.opts.Tuning) // the torn rows go to a sidecar whole
		if err != nil {
			return err
		}
		switch {
		case torn != nil && sc.tornFrom != torn.Seq:
			return conflict("session " + h.ID + " repair is stale: physical tail no longer starts at seq " + strconv.FormatInt(torn.Seq, 10))
		case torn != nil:
			if err := b.keepTorn(h.ID, sc.tornRows); err != nil {
				return err
			}
			if _, err := conn.ExecContext(ctx, sqlDeleteFrom, h.ID, torn.Seq); err != nil {
				return err
			}
		case sc.tornFrom >= 0:
			return conflict("session " + h.ID + " repair omitted current torn tail at seq " + strconv.FormatInt(sc.tornFrom, 10))
		}
		if len(recs) > 0 {
			next := int64(0)
			if n := len(sc.events); n > 0 {
				next = sc.events[n-1].Seq + 1
			}
			if recs[0].seq != next {
				return conflict("session " + h.ID + " repair is stale: closer starts at seq " + strconv.FormatInt(recs[0].seq, 10) + ", stored next seq is " + strconv.FormatInt(next, 10))
			}
			return insert(ctx, conn, h.ID, recs)
		}
		return nil
	})
}

// sidecar names a file beside the database for one session: the id is hashed, since it may hold any
// character; the file's first line names it.
func (b *Backend) sidecar(kind, id string) string {
	sum := sha256.Sum256([]byte(id))
	return b.path + "." + kind + "-" + hex.EncodeToString(sum[:8]) + "-" + strconv.FormatInt(time.Now().UnixNano(), 10) + ".jsonl"
}

// keepTorn writes the rows a repair deletes to a sidecar, fsynced with its directory, before the delete.
func (b *Backend) keepTorn(id string, rows []row) error {
	var buf bytes.Buffer
	buf.Write(event.Stringify(event.Object(event.Member{Key: "session", Value: event.String(id)},
		event.Member{Key: "database", Value: event.String(b.path)})))
	buf.WriteByte('\n')
	for i := range rows {
		r := &rows[i]
		m := []event.Member{{Key: "seq", Value: event.Int(r.seq)}, {Key: "type", Value: event.String(r.typ)}, {Key: "time", Value: event.Int(r.time)}}
		switch d := r.data.(type) {
		case string:
			m = append(m, event.Member{Key: "data", Value: event.String(d)})
		case []byte:
			m = append(m, event.Member{Key: "dataBlobBase64", Value: event.String(base64.StdEncoding.EncodeToString(d))})
		}
		if r.hasSeqs {
			m = append(m, event.Member{Key: "sourceEventSeqsBase64", Value: event.String(base64.StdEncoding.EncodeToString(r.seqs))})
		}
		if r.surface != nil {
			m = append(m, event.Member{Key: "surfaceOp", Value: event.String(*r.surface)})
		}
		if r.ignorable != nil {
			m = append(m, event.Member{Key: "ignorable", Value: event.Int(*r.ignorable)})
		}
		buf.Write(event.Stringify(event.Object(m...)))
		buf.WriteByte('\n')
	}
	return eventstore.WriteNewFile(b.sidecar("torn", id), buf.Bytes())
}

// KeepPending writes events that were accepted but could not be stored to a sidecar beside the database:
// the session's header line, then one event per line — a transcript a user can read or import.
func (b *Backend) KeepPending(ctx context.Context, h event.Header, events []event.Event) (string, error) {
	body := append(h.Line(), '\n')
	for _, e := range events {
		body = append(append(body, e.Raw...), '\n')
	}
	side := b.sidecar("pending", h.ID)
	return side, eventstore.WriteNewFile(side, body)
}
