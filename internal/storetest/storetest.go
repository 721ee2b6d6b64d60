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

// Add writes session id (cwd /p) holding the given event lines as one batch, unchecked: tests build
// refused and corrupt sessions with it.
func Add(t testing.TB, st *eventstore.Store, id string, lines ...string) {
	t.Helper()
	cwd := event.String("/p")
	Write(t, st.Backend(), event.Header{ID: id, CreatedAt: 1, Cwd: &cwd}, eventtest.Events(t, lines...))
}

// Write publishes a session through the backend directly — header and first batch, then one durable
// batch (one zstd frame) per further batch — without the engine's validation, so that tests can store
// what the harness would refuse.
func Write(t testing.TB, b eventstore.Backend, h event.Header, batches ...[]event.Event) {
	t.Helper()
	ctx := context.Background()
	var first []event.Event
	if len(batches) > 0 {
		first, batches = batches[0], batches[1:]
	}
	art, err := b.Materialize(ctx, h, first)
	if err != nil {
		t.Fatal(err)
	}
	for _, batch := range batches {
		if art, err = b.AppendBatch(ctx, h, art, batch, nil); err != nil {
			t.Fatal(err)
		}
	}
}
