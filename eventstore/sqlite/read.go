package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
)

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

// LoadStored reads a session's row and all its events rows in one read transaction (one snapshot).
func (b *Backend) LoadStored(ctx context.Context, id string) (*eventstore.Prefix, error) {
	return b.LoadStoredProgress(ctx, id, nil)
}

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
