// Command dshfs reads, checks and (later) mounts DeepSeek Harness session stores.
//
// Usage:
//
//	dshfs ls [--config FILE] [--json] STORE
//	dshfs cat [--config FILE] [--inspect] [--view VIEW] STORE ID
//	dshfs check [--config FILE] [--json] STORE [ID...]
//
// Flags may appear anywhere among the arguments. Exit codes: 0 success; 1 a refusal, corruption or
// difference was found; 2 usage or I/O error.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
