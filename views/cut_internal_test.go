package views

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore/event"
)

// TestIndexRowCutsRefusal: a refusal quoting megabytes is cut in the index row, which says where the
// whole reason is.
func TestIndexRowCutsRefusal(t *testing.T) {
	s := &Session{ID: "x", Refusal: errors.New(strings.Repeat("y", 1<<20)), mtime: fixedTime(time.Unix(0, 0))}
	r := IndexRowOf(s, "x")
	if len(r.Refusal) > 2*refusalCut || !strings.Contains(r.Refusal, "1048576 bytes in all") || !strings.Contains(r.Refusal, "sessions/x/status.json") {
		t.Fatalf("row refusal of %d bytes: %.200q", len(r.Refusal), r.Refusal)
	}
}

// TestPrettyArgumentsBounded: tool-call arguments are indented for the transcript up to prettyLimit; a
// longer text is shown as written (the transcript cuts it anyway), never indented whole.
func TestPrettyArgumentsBounded(t *testing.T) {
	if got := prettyArguments(event.String(`{"a":1}`)); got != "{\n  \"a\": 1\n}" {
		t.Errorf("small arguments: %q", got)
	}
	huge := `{"a":"` + strings.Repeat("x", prettyLimit) + `"}`
	if got := prettyArguments(event.String(huge)); got != huge {
		t.Errorf("huge arguments were rewritten (%d bytes)", len(got))
	}
}
