//go:build !dshfsfaults

package main

import "github.com/dshfs/dshfs/eventstore/jsonl"

// installFaults does nothing in a normal build: fault injection exists only under the dshfsfaults tag
// (see faults.go), so a shipped binary has no way to kill itself on request.
func installFaults(*jsonl.Backend) {}

// startProfile is a no-op outside test builds.
func startProfile() (stop func()) { return func() {} }
