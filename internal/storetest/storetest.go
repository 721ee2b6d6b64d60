// Package storetest builds small JSONL stores for tests, through dshfs's own writer.
package storetest

import (
	"context"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/eventtest"
)

// Raw returns an empty uncompressed store in a fresh temp dir.
func Raw(t testing.TB) *eventstore.Store {
	t.Helper()
	b, err := jsonl.Open(t.TempDir(), jsonl.None)
	if err != nil {
		t.Fatal(err)
	}
	return eventstore.New(b)
}

// Add writes session id (cwd /p) holding the given event lines as one batch.
func Add(t testing.TB, st *eventstore.Store, id string, lines ...string) {
	t.Helper()
	cwd := event.String("/p")
	if err := st.Create(context.Background(), event.Header{ID: id, CreatedAt: 1, Cwd: &cwd}); err != nil {
		t.Fatal(err)
	}
	if err := st.Append(context.Background(), id, eventtest.Events(t, lines...)); err != nil {
		t.Fatal(err)
	}
}
