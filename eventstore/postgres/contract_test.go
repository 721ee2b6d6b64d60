package postgres

import (
	"context"
	"sync"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/storetest"
	"github.com/dshfs/dshfs/internal/pgtest"
)

// TestContract runs the backend contract suite — the same test code as the JSONL encodings and SQLite —
// over a fresh database per store directory: opening the same directory twice opens two Backends on one
// database, as two hosts would.
func TestContract(t *testing.T) {
	s := pgtest.Shared(t)
	var mu sync.Mutex
	dbs := map[string]string{} // store directory → database
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T, dir string) eventstore.Backend {
			mu.Lock()
			db, ok := dbs[dir]
			if !ok {
				db = s.NewDatabase(t)
				dbs[dir] = db
			}
			mu.Unlock()
			b, err := Open(context.Background(), s.DSN(db), Options{Host: "contract", PendingDir: dir + "/pending"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			return b
		},
		// A crash mid-append leaves no partial row (a transaction commits whole), so the damage a torn tail
		// stands for is a row after the last one that does not decode: a packed row with cut data.
		Tear: func(t *testing.T, be eventstore.Backend, id string) {
			b := be.(*Backend)
			ctx := context.Background()
			var next int64
			if err := b.pool.QueryRow(ctx, `SELECT next_seq FROM sessions WHERE id = $1`, id).Scan(&next); err != nil {
				t.Fatal(err)
			}
			if _, err := b.pool.Exec(ctx, `INSERT INTO events (session_id, seq, last_seq, type, time, line, compressed) VALUES ($1, $2, $2, 'text-chunks', 1, $3, false)`,
				id, next, []byte(`{"type":"text-chunks","seq0":`)); err != nil {
				t.Fatal(err)
			}
		},
	})
}
