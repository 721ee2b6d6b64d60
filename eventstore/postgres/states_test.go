package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
)

// TestSyncStates: a state is recorded for a session its host's sync holds, once (the same state again
// changes no revision), and shown where the store is read: a stale session is refused in the listing and
// on load, a diverged one stays readable; a schema made before the table existed gets it from pg init.
func TestSyncStates(t *testing.T) {
	s, db, dsn := newDB(t)
	b := open(t, dsn, Options{})
	ctx := context.Background()
	for _, id := range []string{"d", "u"} {
		if err := b.Ingest(ctx, "h", id, header(id), 0, lines(0, 2)); err != nil {
			t.Fatal(err)
		}
	}
	// a version-1 schema made before sync_states existed: pg init adds it
	if err := s.Exec(db, `DROP TABLE sync_states`); err != nil {
		t.Fatal(err)
	}
	reader := open(t, dsn, Options{ReadOnly: true})
	if st, err := reader.SyncStates(ctx); err != nil || len(st) != 0 {
		t.Fatalf("states without the table: %v %v", st, err)
	}
	if err := Init(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	if err := b.NoteSync(ctx, "other", "d", Diverged, "not its host"); err != nil {
		t.Fatal(err)
	}
	if err := b.NoteSync(ctx, "h", "d", Diverged, "at seq 1"); err != nil {
		t.Fatal(err)
	}
	held, _ := b.Held(ctx, "d")
	if err := b.NoteSync(ctx, "h", "d", Diverged, "at seq 1"); err != nil {
		t.Fatal(err)
	}
	if h, _ := b.Held(ctx, "d"); h.Revision != held.Revision {
		t.Errorf("the same state again moved the revision %d to %d", held.Revision, h.Revision)
	}
	if err := b.NoteSync(ctx, "h", "u", Stale, "v4 beside it"); err != nil {
		t.Fatal(err)
	}
	fresh := open(t, dsn, Options{ReadOnly: true})
	st, err := fresh.SyncStates(ctx)
	if err != nil || len(st) != 2 || st["d"].State != Diverged || st["d"].Host != "h" || st["d"].Reason != "at seq 1" || st["u"].State != Stale {
		t.Fatalf("states: %+v %v", st, err)
	}
	l, err := fresh.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Entries {
		var se *SyncStateError
		if stale := errors.As(e.Refusal, &se); stale != (e.ID == "u") {
			t.Errorf("%s listed with refusal %v", e.ID, e.Refusal)
		}
	}
	if _, err := fresh.LoadStored(ctx, "u"); eventstore.Classify(err) != eventstore.KindUnsupported || !strings.Contains(err.Error(), "v4 beside it") {
		t.Errorf("load of the stale session: %v", err)
	}
	if p, err := fresh.LoadStored(ctx, "d"); err != nil || len(p.Events) != 2 {
		t.Errorf("load of the diverged session: %v", err)
	}
	if c, err := fresh.Custody(ctx, "d"); err != nil || c.State != Diverged || c.StateReason != "at seq 1" {
		t.Errorf("custody: %+v %v", c, err)
	}
}
