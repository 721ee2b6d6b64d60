package surface

import (
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
)

// TestFoldLifted: over v4's lifted tool results (a tool-role message whose content is the result), a
// replacement may change the message's whole content — every block, any number of them — and nothing
// else. v0's rule, which compares the first block with its inner content blanked, would refuse a cut in
// the first text block and let a change in a later one through.
func TestFoldLifted(t *testing.T) {
	const only = "tool/result surface replacement may change only content"
	lifted := func(content, isError, id string) string {
		return `{"turn":1,"step":1,"message":{"role":"tool","source":{"kind":"tool","callId":"c0"},"toolCallId":"c0","content":` +
			content + `,"isError":` + isError + `,"id":"` + id + `"}}`
	}
	two := `[{"type":"text","text":"aaaa"},{"type":"text","text":"bbbb"}]`
	cases := []struct {
		name, data   string
		want, v0Want string
	}{
		{"first block cut", lifted(`[{"type":"text","text":"a[...]"},{"type":"text","text":"bbbb"}]`, "false", "r"), "", only},
		{"later block cut", lifted(`[{"type":"text","text":"aaaa"},{"type":"text","text":"b"}]`, "false", "r"), "", ""},
		{"blocks dropped", lifted(`[]`, "false", "r"), "", only},
		{"isError changed", lifted(two, "true", "r"), only, only},
		{"id changed", lifted(two, "false", "r2"), only, only},
		{"turn changed", `{"turn":2` + lifted(two, "false", "r")[len(`{"turn":1`):], only, only},
	}
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			log := []event.Event{
				logOnly(t, "tool/call", 0),
				ev(t, "tool/result", 1, lifted(two, "false", "r"), "sourceEventSeqs", "[0]", "surfaceOp", `"append"`),
				ev(t, "tool/result", 2, c.data, "sourceEventSeqs", "[1]", "surfaceOp", replaceOpJSON(1, 1)),
			}
			res, err := FoldLifted(log)
			if got := errText(err); got != c.want {
				t.Fatalf("lifted rule: %q, want %q", got, c.want)
			}
			if err == nil && (len(res.Nodes) != 1 || res.Nodes[0] != 2) {
				t.Fatalf("surface %v", res.Nodes)
			}
			if _, err := Fold(log); errText(err) != c.v0Want {
				t.Fatalf("v0 rule: %q, want %q", errText(err), c.v0Want)
			}
		})
	}
}
