package fleetsync_test

import (
	"context"
	"sort"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/postgres"
)

// loadFleet reads a session back from the fleet store through the backend's own read path, as every
// reader of it does; ok is false when the fleet store holds no such session.
func loadFleet(t *testing.T, dst *postgres.Backend, id string) (*eventstore.Prefix, bool) {
	t.Helper()
	p, err := dst.LoadStored(context.Background(), id)
	if eventstore.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("%s: fleet store: %v", id, err)
	}
	return p, true
}

// fleetIDs lists the fleet store's sessions (a fresh read-only instance: nothing cached).
func fleetIDs(t *testing.T, dsn string) []string {
	t.Helper()
	ctx := context.Background()
	b, err := postgres.Open(ctx, dsn, postgres.Options{ReadOnly: true, Host: "reader"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	l, err := b.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range l.Entries {
		ids = append(ids, e.ID)
	}
	sort.Strings(ids)
	return ids
}
