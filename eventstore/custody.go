package eventstore

import (
	"context"
	"time"
)

// Custody is who holds a session of a store many hosts share (the fleet store): the host it came from,
// and the host whose sync still feeds it, through which writes elsewhere are refused. Every field changes
// only with the session's revision (an ingest, a release, a write), so a status.json showing it is never
// stale by its revision.
type Custody struct {
	Host     string // the host the session came from
	SyncHost string // the host whose `dshfs sync` still feeds it; "" when none (released, or written here)
	// ReleaseAfter is how long after its last sync a synced session becomes writable through the store
	// ([fleet] release_after); the refusal of a write names the last sync's time.
	ReleaseAfter time.Duration
	// State is what a host's sync recorded of the copy ("stale", "diverged"; "" when nothing), and
	// StateReason why.
	State, StateReason string
}

// Custodian is a backend whose sessions have custody (the fleet store).
type Custodian interface {
	Custody(ctx context.Context, id string) (Custody, error)
}
