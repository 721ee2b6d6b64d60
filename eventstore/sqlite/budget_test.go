package sqlite

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
)

// TestSessionBudget: a session whose decoded events would cost more than max_session_bytes is refused as
// too large (eventstore.KindTooLarge); rows are small on disk and many, so the budget counts events, not
// the database's bytes. The same database loads under the default budget.
func TestSessionBudget(t *testing.T) {
	defer func(n int) { loadBlock = n }(loadBlock)
	loadBlock = 64 // the budget is checked block by block: several blocks before it is passed
	p := synthLog(t, "s", 600)
	path := filepath.Join(t.TempDir(), "s.db")
	b, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Materialize(ctx, p.Header, p.Events); err != nil {
		t.Fatal(err)
	}
	b.Close()
	for _, c := range []struct {
		limit int64
		fail  bool
	}{{0, false}, {eventstore.DefaultMaxSessionBytes, false}, {16 << 10, true}} {
		b, err := Open(path, Options{ReadOnly: true, MaxSession: c.limit})
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.LoadStored(ctx, "s")
		b.Close()
		if !c.fail {
			if err != nil || len(got.Events) != len(p.Events) {
				t.Fatalf("limit %d: %v", c.limit, err)
			}
			continue
		}
		var tl *eventstore.TooLargeError
		if !errors.As(err, &tl) || eventstore.Classify(err) != eventstore.KindTooLarge ||
			!strings.Contains(err.Error(), "over max_session_bytes (16384)") {
			t.Fatalf("limit %d: %v", c.limit, err)
		}
	}
}
