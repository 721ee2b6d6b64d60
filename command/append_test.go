package command_test

import (
	"context"
	"testing"

	"github.com/dshfs/dshfs/command"
	"github.com/dshfs/dshfs/eventstore"
)

// TestAppend runs append input through both front-ends: the lines of one input are accepted together or
// not at all, blank lines carry no event but count in the line a refusal names, a mount leaves the events
// to its write-behind while a CLI process makes them durable, and a mount's write of blank lines only makes
// no session live.
func TestAppend(t *testing.T) {
	t.Parallel()
	const note = `{"type":"plugin/note","data":{},"ignorable":true}`
	const bad = `{"type":"plugin/x"`
	for _, c := range []struct {
		name    string
		front   command.Front
		input   string
		message string // on success
		line    int    // on refusal: the input line named
		live    bool   // the session is live afterwards
		pending int    // events accepted but not durable
	}{
		{name: "mount", front: command.Mount, input: note + "\n\n" + note,
			message: "accepted 2 events; live in this mount, durable at the next flush", live: true, pending: 2},
		{name: "cli", front: command.CLI, input: note + "\n" + note + "\n",
			message: "appended 2 events; durable through seq 71", live: true},
		{name: "cli, a last line without its newline", front: command.CLI, input: "\n" + note,
			message: "appended 1 events; durable through seq 70", live: true},
		{name: "mount, blank lines only", front: command.Mount, input: "\n  \n",
			message: "accepted 0 events; live in this mount, durable at the next flush"},
		{name: "mount, a bad line after a blank one", front: command.Mount, input: note + "\n\n" + bad, line: 3},
		{name: "cli, a bad line", front: command.CLI, input: "\n\n" + bad + "\n" + note + "\n", line: 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := fixtureStore(t)
			env := command.Env{Store: st, Front: c.front}
			r := env.Run(ctx, command.Request{Session: clean, Line: "append", Cmd: command.Append{Input: []byte(c.input)}})
			switch {
			case c.line > 0:
				if r.Err == nil || r.Err.Failure != eventstore.Invalid || r.Err.Code != eventstore.CodeBadInput || r.Err.Line != c.line {
					t.Fatalf("%s, want BAD_INPUT on line %d", r.JSON(), c.line)
				}
				if w := st.Live(clean); w != nil && w.Pending() != 0 {
					t.Fatalf("a refused input left %d events pending", w.Pending())
				}
				return
			case r.Err != nil || r.Message() != c.message || r.Record().Command != "append":
				t.Fatalf("%s, want %q", r.JSON(), c.message)
			}
			w := st.Live(clean)
			if (w != nil) != c.live {
				t.Fatalf("live %v, want %v", w != nil, c.live)
			}
			if w != nil && w.Pending() != c.pending {
				t.Fatalf("%d events pending, want %d", w.Pending(), c.pending)
			}
		})
	}
}
