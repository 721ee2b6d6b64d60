// Command dshfs reads, checks, mounts and writes DeepSeek Harness session stores.
//
// Usage:
//
//	dshfs mount [--config FILE] [--read-only] [--allow-other] [--demo] [STORE] MOUNTPOINT
//	dshfs ls [--config FILE] [--json] STORE
//	dshfs cat [--config FILE] [--inspect] [--view VIEW] STORE ID
//	dshfs index [--config FILE] [--page N] STORE
//	dshfs check [--config FILE] [--json] STORE [ID...]
//	dshfs append [--config FILE] STORE ID [FILE|-]
//	dshfs create [--config FILE] [--cwd DIR] [--generation auto|0|4] STORE [ID]
//	dshfs resume [--config FILE] STORE ID
//	dshfs fork [--config FILE] STORE ID [BOUNDARY] [CHILD_ID]
//
// Flags may appear anywhere among the arguments. Exit codes: 0 success; 1 a refusal, corruption or
// difference was found; 2 usage or I/O error.
package main

import (
	"os"
)

func main() {
	stop := startProfile()
	code := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
