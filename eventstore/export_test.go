package eventstore

import "github.com/dshfs/dshfs/eventstore/event"

// Entry points for the tests, which drive the engine's parse of one append line.

// ParseInput is parseInput's event.
func ParseInput(line []byte, seq, now int64) (event.Event, *CommandError) {
	in, err := parseInput(line, seq, now)
	return in.ev, err
}
