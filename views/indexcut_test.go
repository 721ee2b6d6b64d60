package views

import (
	"errors"
	"strings"
	"testing"
	"time"
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
