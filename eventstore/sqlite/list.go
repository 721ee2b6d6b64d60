package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
)

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
