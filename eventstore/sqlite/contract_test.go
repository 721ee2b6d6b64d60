package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/storetest"
)

// TestContract runs the backend contract suite — the same test code as the JSONL encodings — over a
// database file in the store directory.
func TestContract(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T, dir string) eventstore.Backend {
			b, err := Open(filepath.Join(dir, "sessions.db"), Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			return b
		},
		// A crash mid-append leaves no partial row (a transaction commits whole), so the damage a torn tail
		// stands for is a row after the last turn/end that does not decode: a packed row with cut data.
		Tear: func(t *testing.T, be eventstore.Backend, id string) {
			b := be.(*Backend)
			ctx := context.Background()
			next, err := b.nextSeq(ctx, b.db, id)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.db.Exec(sqlInsertEvent, id, next, "text-chunks", 1, `{"turn":1,"step":1,"ind`, nil, nil, 0); err != nil {
				t.Fatal(err)
			}
		},
	})
}
