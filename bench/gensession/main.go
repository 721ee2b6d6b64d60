// Command gensession writes a synthetic but realistic session of at least N events (whole turns) into a
// JSONL store root with dshfs's own writer (see internal/synth). Used by the benchmarks under bench/.
//
//	gensession [-mode zstd|none] [-id ID] [-append] ROOT N
//
// With -append it adds N whole turns to an existing session, stamped with the current time.
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
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: gensession [-mode zstd|none] [-id ID] ROOT N")
		os.Exit(2)
	}
	n, err := strconv.Atoi(flag.Arg(1))
	if err != nil || n < 1 {
		fmt.Fprintln(os.Stderr, "gensession: N must be a positive integer")
		os.Exit(2)
	}
	write := synth.Write
	if *appendTurns {
		write = synth.Append
	}
	if err := write(flag.Arg(0), jsonl.Compression(*mode), *id, n); err != nil {
		fmt.Fprintln(os.Stderr, "gensession:", err)
		os.Exit(1)
	}
}
