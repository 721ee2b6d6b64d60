package eventstore

import (
	"errors"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/load"
	"github.com/dshfs/dshfs/surface"
)

// This file composes the coordinator's two post-read paths over a backend's stored prefix — readFrom's
// readStoredPrefix (readStored) and inspect/load's prepareCore (Inspect) — from the harness's checks in
// package load, and gives their refusals the seam's types.

// readStored is load.ReadStored over a stored prefix, its format refusal an *UnsupportedError.
func readStored(id string, h event.Header, stored []event.Event, rows []uint64, path string, t Tuning) ([]event.Event, error) {
	events, err := load.ReadStored(id, h, stored, rows, path, t.Parallel)
	return events, refusal(err)
}

// Inspect is the harness's prepareCore (load.Inspect) over a stored log, with the surface fold of package
// surface. Every failure except *UnsupportedError comes back as *CorruptionError{id, cause}. It returns
// the normalized stored events and the closers separately.
func Inspect(id string, h event.Header, stored []event.Event, path string) (events, closers []event.Event, err error) {
	return inspectWith(id, h, stored, path, surface.NewFolder(0))
}

// inspectWith is Inspect with the surface check sc.
func inspectWith(id string, h event.Header, stored []event.Event, path string, sc load.Surface) (events, closers []event.Event, err error) {
	events, closers, err = inspect(id, h, stored, nil, path, sc, Tuning{})
	if err != nil {
		return nil, nil, inspectError(id, err)
	}
	return events, closers, nil
}

// inspectError is how Inspect reports a failed check: a format refusal as it is, anything else as the
// session's corruption.
func inspectError(id string, err error) error {
	var u *UnsupportedError
	if errors.As(err, &u) {
		return err
	}
	return &CorruptionError{ID: id, Cause: err}
}

// inspect is Inspect with the stored prefix's row members (Prefix.RowMembers; nil: unknown), and errors
// unwrapped.
func inspect(id string, h event.Header, stored []event.Event, rows []uint64, path string, sc load.Surface, t Tuning) ([]event.Event, []event.Event, error) {
	return inspectFeed(id, load.Stored(h, path, stored, rows), sc, t)
}

// inspectFeed is inspect over the events of a load as it delivers them.
func inspectFeed(id string, feed *load.Progress, sc load.Surface, t Tuning) ([]event.Event, []event.Event, error) {
	events, closers, err := load.Inspect(id, feed, sc, t.Parallel)
	return events, closers, refusal(err)
}

// refusal gives a format refusal of the checks the seam's type; any other error is returned as it is.
func refusal(err error) error {
	var u *load.UnsupportedError
	if errors.As(err, &u) {
		return &UnsupportedError{Message: u.Message, Path: u.Path}
	}
	return err
}
