package fleetsync_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/klauspost/compress/zstd"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/postgres"
)

// loadFleet reads a session back from the fleet store: through the backend's own read path
// (eventstore.Backend.LoadStored) where it has one, else from its rows (each line decoded with the
// event package's functions, as every reader of a stored line decodes it). ok is false when the fleet
// store holds no such session.
func loadFleet(t *testing.T, dst *postgres.Backend, dsn, id string) (p *eventstore.Prefix, ok bool) {
	t.Helper()
	ctx := context.Background()
	if ld, has := any(dst).(interface {
		LoadStored(context.Context, string) (*eventstore.Prefix, error)
	}); has {
		p, err := ld.LoadStored(ctx, id)
		if eventstore.IsNotFound(err) {
			return nil, false
		}
		if err != nil {
			t.Fatalf("%s: fleet store: %v", id, err)
		}
		return p, true
	}
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var header []byte
	if err := c.QueryRow(ctx, `SELECT header FROM sessions WHERE id = $1`, id).Scan(&header); err == pgx.ErrNoRows {
		return nil, false
	} else if err != nil {
		t.Fatal(err)
	}
	h, err := event.ParseHeaderLine(append(header, '\n'))
	if err != nil {
		t.Fatalf("%s: stored header: %v", id, err)
	}
	p = &eventstore.Prefix{Header: h}
	rows, err := c.Query(ctx, `SELECT seq, last_seq, line, compressed FROM events WHERE session_id = $1 ORDER BY seq`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	for rows.Next() {
		var seq, last int64
		var line []byte
		var compressed bool
		if err := rows.Scan(&seq, &last, &line, &compressed); err != nil {
			t.Fatal(err)
		}
		if compressed {
			if line, err = dec.DecodeAll(line, nil); err != nil {
				t.Fatalf("%s: row %d: %v", id, seq, err)
			}
		}
		canon, err := event.Canonical(line)
		if err != nil {
			t.Fatalf("%s: row %d: %v", id, seq, err)
		}
		evs, _, err := event.DecodeStored(canon)
		if err != nil || len(evs) == 0 || evs[0].Seq != seq || evs[len(evs)-1].Seq != last {
			t.Fatalf("%s: row %d..%d holds %d events (%v)", id, seq, last, len(evs), err)
		}
		p.Events = append(p.Events, evs...)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return p, true
}

// fleetIDs lists the fleet store's sessions.
func fleetIDs(t *testing.T, dsn string) []string {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT id FROM sessions ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}
