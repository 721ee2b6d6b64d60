package eventstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/storetest"
)

// TestNewSessionIDs: create and a fork's child refuse an id holding NUL or bytes that are not WTF-8
// (which the header's encoding would replace by U+FFFD, creating another id than the one asked for), and
// nothing is created; a lone surrogate, which a JS string may hold, is an id like any other.
func TestNewSessionIDs(t *testing.T) {
	ctx := context.Background()
	st := storetest.Raw(t)
	cwd := event.String("/srv/ids")
	create := func(id string) error { return st.Create(ctx, event.Header{ID: id, CreatedAt: 1, Cwd: &cwd}) }
	for _, c := range []struct{ id, want string }{
		{"a\xffb", "is not valid UTF-8 (byte 0xFF at offset 1)"},
		{"\xed\xa0", "is not valid UTF-8 (byte 0xED at offset 0)"},
		{"\x00nul", "contains NUL"},
		{"", "must be a non-empty string"},
	} {
		err := create(c.id)
		ce := eventstore.AsCommandError(err)
		if ce == nil || ce.Code != eventstore.CodeBadInput || !strings.Contains(ce.Message, c.want) {
			t.Errorf("create %q: %v, want %q", c.id, err, c.want)
		}
	}
	if err := create("lone\xed\xa0\x80"); err != nil { // "lone\ud800"
		t.Fatalf("a lone surrogate: %v", err)
	}
	if err := create("parent"); err != nil {
		t.Fatal(err)
	}
	_, err := st.Fork(ctx, "parent", nil, "child\xc3")
	if ce := eventstore.AsCommandError(err); ce == nil || !strings.Contains(ce.Message, "is not valid UTF-8") {
		t.Fatalf("fork to an invalid child id: %v", err)
	}
	l, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range l.Entries {
		ids = append(ids, e.ID)
	}
	if len(ids) != 2 {
		t.Fatalf("sessions %q, want only the lone-surrogate id and the parent", ids)
	}
}
