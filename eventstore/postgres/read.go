package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/jackc/pgx/v5"
)

// sessionRow is a sessions row as the reads use it.
type sessionRow struct {
	id, host, incarnation   string
	header                  []byte
	revision, nextSeq, size int64
	rows                    int64
	lastTime                *int64
	createdAt               int64
	syncHost                *string
	syncSeen                *time.Time
	generation              int16 // 0 or 4
}

// sessionCols are the columns scanSession reads.
func (b *Backend) sessionCols() string {
	return `id, header, host, incarnation, revision, next_seq, rows, bytes, last_time, created_at, sync_host, sync_seen, ` + b.generationCol()
}

func scanSession(r pgx.Row) (sessionRow, error) {
	var s sessionRow
	err := r.Scan(&s.id, &s.header, &s.host, &s.incarnation, &s.revision, &s.nextSeq, &s.rows, &s.size, &s.lastTime, &s.createdAt, &s.syncHost, &s.syncSeen, &s.generation)
	return s, err
}

// session reads one sessions row; *eventstore.NotFoundError when there is none.
func (b *Backend) session(ctx context.Context, q queryer, id string) (sessionRow, error) {
	if b.empty(ctx) {
		return sessionRow{}, &eventstore.NotFoundError{ID: id}
	}
	s, err := scanSession(q.QueryRow(ctx, `SELECT `+b.sessionCols()+` FROM sessions WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return s, &eventstore.NotFoundError{ID: id}
	}
	return s, err
}

// token is a session's revision token: the store, the session row's incarnation, its revision.
func (b *Backend) token(s sessionRow) string {
	return b.identity(s) + ":revision:" + strconv.FormatInt(s.revision, 10)
}

func (b *Backend) identity(s sessionRow) string {
	return "pg:" + b.StoreID() + ":incarnation:" + s.incarnation
}

// owner is who may read fleet sessions through a mount: the mounting user alone (mode 0600). The sessions
// are readable with the mounting user's database credentials, which no other user of the machine holds.
func owner() *eventstore.Owner {
	return &eventstore.Owner{UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), Perm: 0o600}
}

// artifact is a session's state: its time is that of its last stored event (the header's createdAt when
// it has none), its size that of its JSONL text.
func (b *Backend) artifact(s sessionRow) eventstore.Artifact {
	at := s.createdAt
	if s.lastTime != nil {
		at = *s.lastTime
	}
	return eventstore.Artifact{Token: b.token(s), Identity: b.identity(s), ModTime: time.UnixMilli(at), Size: s.size, Owner: owner()}
}

// parseStoredHeader reads a stored header line as the JSONL scan reads a first line: a v0 header, or the
// physical header line of a v4 session (gen 4) as the v4 codec reads it.
func parseStoredHeader(id string, line []byte, gen int16) (event.Header, error) {
	if gen == 4 {
		gh, err := generation.ParseHeader(4, line)
		if err != nil {
			return event.Header{}, laterError(err)
		}
		h := jsonl.LaterHeader(gh)
		if h.ID != id {
			return h, &contentError{fmt.Errorf("corrupt session log: the header names session %q, stored as %q", h.ID, id)}
		}
		return h, nil
	}
	h, err := event.ParseHeaderLine(append(bytes.Clone(line), '\n'))
	var uv *event.UnsupportedVersionError
	if errors.As(err, &uv) {
		return h, &eventstore.UnsupportedError{Message: event.VersionRefusal(uv.ID, uv.Version)}
	}
	if err == nil && h.ID != id {
		err = fmt.Errorf("corrupt session log: the header names session %q, stored as %q", h.ID, id)
	}
	if err != nil {
		return h, &contentError{err}
	}
	return h, nil
}

// List reads the sessions rows only, in the order they were created; a session whose header the harness
// would refuse is listed with its refusal.
func (b *Backend) List(ctx context.Context) (_ eventstore.Listing, err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	if b.empty(ctx) {
		return eventstore.Listing{}, nil
	}
	rows, err := b.pool.Query(ctx, `SELECT `+b.sessionCols()+` FROM sessions ORDER BY listed`)
	if err != nil {
		return eventstore.Listing{}, b.wrap(err)
	}
	defer rows.Close()
	var l eventstore.Listing
	own := owner()
	for rows.Next() {
		progress(ctx)
		s, err := scanSession(rows)
		if err != nil {
			return eventstore.Listing{}, b.wrap(err)
		}
		art := b.artifact(s)
		e := eventstore.Entry{ID: s.id, Path: b.where, Revision: art.Token, Identity: art.Identity, ModTime: art.ModTime, Owner: own, Host: s.host,
			Generation: int(s.generation)}
		h, err := parseStoredHeader(s.id, s.header, s.generation)
		if err != nil {
			e.Refusal = err
		} else {
			e.Header = &h
		}
		if len(s.header) > 0 && s.header[0] == '{' {
			e.HeaderLine = s.header
		}
		l.Entries = append(l.Entries, e)
	}
	if err := rows.Err(); err != nil {
		return eventstore.Listing{}, b.wrap(err)
	}
	rows.Close()
	states, err := b.syncStates(ctx, b.pool, "")
	if err != nil {
		return eventstore.Listing{}, err
	}
	for i := range l.Entries {
		if e := &l.Entries[i]; e.Refusal == nil {
			e.Refusal = staleRefusal(e.ID, states)
		}
	}
	return l, nil
}

// Stat returns a session's state from its sessions row.
func (b *Backend) Stat(ctx context.Context, id, _ string) (_ eventstore.Artifact, err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	s, err := b.session(ctx, b.pool, id)
	if err != nil {
		return eventstore.Artifact{}, b.wrap(err)
	}
	return b.artifact(s), nil
}

// Locate: a fleet session has no artifact path of its own, but a session a JSONL store could not hold
// (jsonl.Place) is refused, as the harness would refuse it: it could be neither synced back to a host nor
// backed up.
func (b *Backend) Locate(h event.Header) (string, error) {
	if _, _, err := jsonl.Place(h); err != nil {
		return "", fmt.Errorf("%w (the harness's limit on every store)", err)
	}
	return "", nil
}

// ReadRaw returns the session as JSONL text: its header line and every stored line, each LF-terminated
// — the artifact a JSONL store would hold (torn rows included, as a JSONL artifact holds torn bytes).
func (b *Backend) ReadRaw(ctx context.Context, id string) ([]byte, error) {
	var buf bytes.Buffer
	if err := b.WriteRaw(ctx, id, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteRaw writes ReadRaw's text to w row by row, from one snapshot, never holding the session whole.
func (b *Backend) WriteRaw(ctx context.Context, id string, w io.Writer) (err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	return b.wrap(b.snapshot(ctx, func(tx pgx.Tx) error {
		s, err := b.session(ctx, tx, id)
		if err != nil {
			return err
		}
		resume := pause(ctx)
		_, err = w.Write(append(s.header, '\n'))
		resume()
		if err != nil {
			return err
		}
		return b.eachLine(ctx, tx, id, 0, func(seq int64, line []byte, err error) error {
			if err != nil {
				return &contentError{fmt.Errorf("session %q: the row at seq %d: %w", id, seq, err)}
			}
			_, err = w.Write(append(line, '\n'))
			return err
		})
	}))
}

// snapshot runs fn in a read-only repeatable-read transaction: one consistent view of the store.
func (b *Backend) snapshot(ctx context.Context, fn func(tx pgx.Tx) error) error {
	if b.empty(ctx) {
		return fn(nil)
	}
	return pgx.BeginTxFunc(ctx, b.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

// eachLine hands fn a session's stored lines from seq from on, in seq order, decompressed.
func (b *Backend) eachLine(ctx context.Context, tx pgx.Tx, id string, from int64, fn func(seq int64, line []byte, err error) error) error {
	rows, err := tx.Query(ctx, `SELECT seq, line, compressed FROM events WHERE session_id = $1 AND seq >= $2 ORDER BY seq`, id, from)
	if err != nil {
		return err
	}
	defer rows.Close()
	var seq int64
	var data []byte
	var compressed bool
	for rows.Next() {
		progress(ctx)
		if err := rows.Scan(&seq, &data, &compressed); err != nil {
			return err
		}
		resume := pause(ctx)
		line, derr := decompress(data, compressed, b.opts.MaxData)
		err := fn(seq, line, derr)
		resume()
		if err != nil {
			return err
		}
	}
	return rows.Err()
}

// LoadStored reads a session's row and all its events rows from one snapshot.
func (b *Backend) LoadStored(ctx context.Context, id string) (*eventstore.Prefix, error) {
	return b.LoadStoredProgress(ctx, id, nil)
}

var _ eventstore.ProgressiveBackend = (*Backend)(nil)

// loadBlock is how many rows a load decodes at once, on every core.
var loadBlock = 4096

// LoadStoredProgress is LoadStored reporting the session's events to sink (nil: none) block by block as
// its rows are decoded (eventstore.ProgressiveBackend).
func (b *Backend) LoadStoredProgress(ctx context.Context, id string, sink eventstore.ProgressSink) (_ *eventstore.Prefix, err error) {
	ctx, end := b.bound(ctx)
	defer func() { err = end(err) }()
	if b.empty(ctx) {
		return nil, &eventstore.NotFoundError{ID: id}
	}
	var p *eventstore.Prefix
	err = b.snapshot(ctx, func(tx pgx.Tx) error {
		s, err := b.session(ctx, tx, id)
		if err != nil {
			return err
		}
		h, err := parseStoredHeader(id, s.header, s.generation)
		if err != nil {
			return err
		}
		states, err := b.syncStates(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := staleRefusal(id, states); err != nil {
			return err
		}
		if s.generation == 4 {
			p, err = b.loadV4(ctx, tx, s, sink)
			return err
		}
		if sink != nil {
			sink.Header(h, "")
		}
		sc := &rowScan{tornAt: -1, PrefixScan: eventstore.PrefixScan{Budget: eventstore.Budget{Limit: b.opts.MaxSession}}}
		block := make([]decoded, 0, loadBlock)
		var given int64
		flush := func() error {
			b.opts.Tuning.Parallel(len(block), 256, func(lo, hi int) error {
				var scratch event.RowScratch
				for i := lo; i < hi; i++ {
					block[i].decode(&scratch)
				}
				return nil
			})
			given += int64(len(block))
			if s.rows > 0 {
				sc.share = float64(given) / float64(s.rows)
			}
			for i := range block {
				if err := sc.apply(&block[i]); err != nil {
					return err
				}
			}
			clear(block)
			block = block[:0]
			if sink != nil {
				sink.Events(sc.Events, sc.Rows)
			}
			return nil
		}
		err = b.eachLine(ctx, tx, id, 0, func(seq int64, line []byte, err error) error {
			block = append(block, decoded{seq: seq, line: line, err: err})
			if len(block) == loadBlock {
				return flush()
			}
			return nil
		})
		if err == nil {
			err = flush()
		}
		if err != nil {
			return err
		}
		p = &eventstore.Prefix{Header: h, Events: eventstore.Trim(sc.Events), RowMembers: sc.Rows, Artifact: b.artifact(s)}
		if sc.Issue != nil {
			p.Torn = &eventstore.Torn{Seq: sc.tornAt, Bytes: sc.tornBytes}
		}
		return nil
	})
	if err != nil {
		return nil, b.wrap(err)
	}
	return p, nil
}

// decoded is one row of a load: its line and what it decodes to.
type decoded struct {
	seq    int64
	line   []byte
	err    error // the row's bytes do not read (decompress), or its line does not decode
	events []event.Event
	row    bool
}

func (d *decoded) decode(sc *event.RowScratch) {
	if d.err != nil {
		return
	}
	canon, err := event.Canonical(d.line)
	if err != nil {
		d.err = err
		return
	}
	d.events, d.row, d.err = event.AppendStored(nil, canon, sc)
}

// rowScan keeps the contiguous event prefix of a session's rows as the JSONL scan keeps that of its lines
// (eventstore.PrefixScan), a row standing for a line; the first row left out starts the torn tail, which a
// repair deletes.
type rowScan struct {
	eventstore.PrefixScan
	tornAt    int64 // seq of the first torn row; -1: none
	tornBytes int64
	share     float64
}

func (s *rowScan) apply(d *decoded) error {
	clean := s.Issue == nil
	if need := len(s.Events) + len(d.events); need > cap(s.Events) {
		s.Events = eventstore.GrowTo(s.Events, need, s.share)
	}
	kept, err := s.Take(d.events, d.row, d.err)
	if !kept {
		if clean && s.Issue != nil {
			s.tornAt = d.seq
		}
		s.tornBytes += int64(len(d.line)) + 1
	}
	if err != nil && err == s.Issue {
		return &contentError{err}
	}
	return err
}
