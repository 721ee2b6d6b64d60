package eventstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
)

// TestAcceptNamesFirstBadLine: the checks of an event alone run beside the parse and the fold's after it,
// yet the refusal always names the first bad line of the request, whichever kind of check refuses it, and
// nothing of the request is accepted.
func TestAcceptNamesFirstBadLine(t *testing.T) {
	const (
		good      = `{"type":"plugin/note","data":{},"ignorable":true}`
		unknown   = `{"type":"plugin/x","data":{}}`                                       // refused by the event's own checks
		strayEnd  = `{"type":"turn/end","data":{"turn":9,"reason":{"kind":"completed"}}}` // refused by the live invariants
		badSeq    = `{"type":"plugin/note","seq":0,"data":{},"ignorable":true}`           // refused by the parse
		unknownIs = `unknown event type "plugin/x"`
		strayIs   = `turn/end 9 does not match open turn null`
	)
	for _, c := range []struct {
		name  string
		lines []string
		line  int
		msg   string
	}{
		{"the fold's refusal first", []string{good, strayEnd, unknown}, 2, strayIs},
		{"the event's own refusal first", []string{good, unknown, strayEnd}, 2, unknownIs},
		{"an own refusal after many good lines", append(repeat(good, 600), unknown), 601, unknownIs},
		{"a check's refusal before a parse refusal", []string{unknown, badSeq}, 1, unknownIs},
		{"a parse refusal before a check's", []string{good, badSeq, unknown}, 2, "stale or wrong seq"},
		{"a parse refusal after the fold's", []string{strayEnd, `{"type":`}, 1, strayIs},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			be, err := jsonl.Open(t.TempDir(), jsonl.Zstd)
			if err != nil {
				t.Fatal(err)
			}
			st := eventstore.New(be)
			defer st.Close(ctx)
			cwd := event.String("/srv/x")
			if err := st.Create(ctx, event.Header{ID: "s", CreatedAt: 1, Cwd: &cwd}); err != nil {
				t.Fatal(err)
			}
			w, err := st.Writer(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			lines := make([][]byte, len(c.lines))
			for i, l := range c.lines {
				lines[i] = []byte(l)
			}
			err = w.Accept(lines)
			ce := eventstore.AsCommandError(err)
			if err == nil || ce.Line != c.line || !strings.Contains(ce.Message, c.msg) {
				t.Fatalf("refusal %v (line %d), want line %d and %q", err, ce.Line, c.line, c.msg)
			}
			if n := len(w.Snapshot().Events); n != 0 {
				t.Errorf("%d events accepted from a refused request", n)
			}
		})
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}
