// Package eventtest builds events from JSON lines for tests.
package eventtest

import (
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
)

// Events parses each line (any JSON spelling) into a canonical event, failing t on malformed input.
func Events(t testing.TB, lines ...string) []event.Event {
	t.Helper()
	out := make([]event.Event, 0, len(lines))
	for _, l := range lines {
		e, err := event.ParseEvent([]byte(l))
		if err != nil {
			t.Fatalf("bad test event %s: %v", l, err)
		}
		out = append(out, e)
	}
	return out
}
