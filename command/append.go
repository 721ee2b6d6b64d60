package command

import (
	"bytes"
	"context"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/load"
)

// Append appends the events of Input, newline-delimited in the append file's syntax (docs/writing.md): each
// line one event, blank lines none, all of them accepted or none. The mount gives it the complete lines
// of one WRITE request (a partial line waits in its handle); the CLI gives it its whole input, whose last
// line may lack its newline. A refusal's Line is the 1-based line of Input it names, blank lines counted.
//
// How far it goes is the Front's: a mount accepts the events and its write-behind makes them durable
// later (an input of blank lines only changes nothing, and makes no session live); a CLI process makes
// them durable before it answers, and says where the log now ends.
type Append struct{ Input []byte }

// eventLines splits append input into its event lines, with the 1-based input line of each: the one
// place the append syntax is cut into lines, for every front-end.
func eventLines(input []byte) (lines [][]byte, at []int) {
	for i, l := range bytes.Split(input, []byte{'\n'}) {
		if len(bytes.TrimSpace(l)) > 0 { // blank lines carry no event
			lines = append(lines, l)
			at = append(at, i+1)
		}
	}
	return lines, at
}

// append runs an Append: the lines are accepted together, a refusal names its input line, and a CLI
// process flushes them.
func (e Env) append(ctx context.Context, id string, c Append) (Outcome, error) {
	lines, at := eventLines(c.Input)
	if len(lines) == 0 && e.Front == Mount {
		return Accepted{}, nil
	}
	w, err := e.Store.Writer(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := w.Accept(lines); err != nil {
		ce := eventstore.AsCommandError(err)
		if ce.Line > 0 && ce.Line <= len(at) {
			named := *ce // the engine's error, renumbered for this input
			named.Line = at[ce.Line-1]
			ce = &named
		}
		return nil, ce
	}
	if e.Front == Mount {
		return Accepted{Events: len(lines)}, nil
	}
	if err := w.Flush(ctx); err != nil {
		return nil, err
	}
	snap := w.Snapshot()
	done := Appended{Events: len(lines), Through: int64(snap.Durable - 1)}
	if t, open := load.OpenTurn(snap.Events); open {
		done.OpenTurn = &t
	}
	return done, nil
}
