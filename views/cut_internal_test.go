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
// longer text is shown as written (the transcript cuts it anyway), never indented or decoded whole, and
// its cut says how long it is.
func TestPrettyArgumentsBounded(t *testing.T) {
	quoted := func(s string) []byte { return event.Stringify(event.String(s)) }
	if got := prettyArguments(quoted(`{"a":1}`), transcriptCut); got.shown != "{\n  \"a\": 1\n}" || got.cut() {
		t.Errorf("small arguments: %+v", got)
	}
	if got := prettyArguments([]byte(`{"a":[1,2]}`), transcriptCut); got.shown != "{\n  \"a\": [\n    1,\n    2\n  ]\n}" {
		t.Errorf("arguments written as a value: %+v", got)
	}
	huge := `{"a":"` + strings.Repeat("é", prettyLimit) + `"}`
	for _, raw := range [][]byte{quoted(huge), []byte(huge)} {
		got := prettyArguments(raw, transcriptCut)
		if !strings.HasPrefix(huge, got.shown) || len(got.shown) > transcriptCut || len(got.shown) < transcriptCut-1 || got.total != len(huge) {
			t.Errorf("huge arguments: %d bytes shown of %d, want the first %d of %d", len(got.shown), got.total, transcriptCut, len(huge))
		}
	}
}
