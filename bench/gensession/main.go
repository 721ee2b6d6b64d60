// Command gensession writes a synthetic but realistic session of at least N events (whole turns) into a
// JSONL store root with dshfs's own writer (see internal/synth). Used by the benchmarks under bench/.
//
//	gensession [-mode zstd|none] [-id ID] [-append] [-generation 0|4] [-chunks K] ROOT N [ID...]
//
// -chunks sets how many streamed text chunks a turn's first step holds (default 20; its second holds three
// quarters as many): fewer make a mix heavier in messages, tool calls and results (2: about a fifth of the
// events are chunks, against three quarters by default).
//
// With -append it adds N whole turns to an existing session, stamped with the current time. IDs after N
// name the sessions to write, in place of -id: one process writing a thousand sessions saves a thousand
// process starts, which on this project's VMs cost about 20 ms each (page faults).
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"

	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/synth"
)

func main() {
	mode := flag.String("mode", "zstd", "compression of the root: zstd or none")
	id := flag.String("id", "bench-session", "session id")
	appendTurns := flag.Bool("append", false, "append N whole turns to an existing session instead of creating one")
	gen := flag.Int("generation", 0, "format generation of a new session: 0, or 4 (the same turns as v4 stores them)")
	chunks := flag.Int("chunks", synth.DefaultChunks, "streamed text chunks in a turn's first step (three quarters as many in its second)")
	flag.Parse()
	if flag.NArg() < 2 {
		fmt.Fprintln(os.Stderr, "usage: gensession [-mode zstd|none] [-id ID] [-append] [-generation 0|4] [-chunks K] ROOT N [ID...]")
		os.Exit(2)
	}
	n, err := strconv.Atoi(flag.Arg(1))
	if err != nil || n < 1 {
		fmt.Fprintln(os.Stderr, "gensession: N must be a positive integer")
		os.Exit(2)
	}
	write := func(root string, mode jsonl.Compression, id string, n int) error {
		return synth.WriteChunks(root, mode, id, n, *chunks)
	}
	switch {
	case *chunks < 0:
		fmt.Fprintln(os.Stderr, "gensession: -chunks must not be negative")
		os.Exit(2)
	case *chunks != synth.DefaultChunks && (*appendTurns || *gen != 0):
		fmt.Fprintln(os.Stderr, "gensession: -chunks is for a new generation-0 session")
		os.Exit(2)
	case *appendTurns:
		write = synth.Append
	case *gen == 4:
		write = synth.WriteV4
	case *gen != 0:
		fmt.Fprintln(os.Stderr, "gensession: -generation must be 0 or 4")
		os.Exit(2)
	}
	ids := flag.Args()[2:]
	if len(ids) == 0 {
		ids = []string{*id}
	}
	for _, id := range ids {
		if err := write(flag.Arg(0), jsonl.Compression(*mode), id, n); err != nil {
			fmt.Fprintf(os.Stderr, "gensession: %s: %v\n", id, err)
			os.Exit(1)
		}
	}
}
