package eventstore

import (
	"errors"
	"strings"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/surface"
)

// This file composes the coordinator's two post-read paths over a backend's stored prefix: readFrom's
// readStoredPrefix (readStored) and inspect/load's prepareCore (Inspect), in the harness's exact check
// order, so that the first failing check — and so the reported text — is the harness's.

// surfaceCheck validates the next event of a seed the way the harness's SurfaceManager.validateNext
// does. The store always checks with the surface package's fold (*surface.Folder); the interface exists
// so that the package's own tests can make the check fail at a chosen event. nil: no surface check
// (readStored, which the harness runs without one).
type surfaceCheck interface{ Push(e event.Event) error }

// readStored is the harness's readFrom(id, 0) post-read path (readStoredPrefix): assertStoredId,
// assertVersion (UnsupportedError with " (raw log: <path>)" when path != ""), snapshotStoredEvents
// (legacy refusals, legacy normalization, message-shape check with subject "session event at seq N"),
// then the vocabulary check, given the stored prefix's row members (Prefix.RowMembers; nil: unknown).
// Errors are not wrapped: plain errors with the harness's text, a *TypeError where the harness would
// raise one, or *UnsupportedError. It returns the normalized events.
func readStored(id string, h event.Header, stored []event.Event, rows []uint64, path string, t Tuning) ([]event.Event, error) {
	c, err := checkStored(id, h, stored, rows, path, passTurns, nil, t)
	if err != nil {
		return nil, err
	}
	return c.events(), nil
}

// checkStored runs the passes before end over stored (sc checking the surface in passSeed), after the
// header checks that precede them. rows are the stored events' row members (Prefix.RowMembers); t spreads
// the parse of a large log.
func checkStored(id string, h event.Header, stored []event.Event, rows []uint64, path string, end pass, sc surfaceCheck, t Tuning) (*logCheck, error) {
	return checkFeed(id, loaded(&Prefix{Header: h, Events: stored, RowMembers: rows, Path: path}), end, sc, t)
}

// checkFeed is checkStored over the events of a load as it delivers them.
func checkFeed(id string, feed *Progress, end pass, sc surfaceCheck, t Tuning) (*logCheck, error) {
	h, path, err := feed.waitHeader()
	if err != nil {
		return nil, err
	}
	if err := checkStoredID(id, h); err != nil {
		return nil, err
	}
	if err := checkVersion(h, path); err != nil {
		return nil, err
	}
	c := newLogCheck(id, h, feed, path, end, t)
	c.sc = sc
	return c, c.run()
}

// Inspect is the harness's prepareCore: the readStored steps, then the closers (the repair plan, each
// message-shape checked), then the restore-mode Session constructor over stored+closers: header
// validation, and per event the envelope, request/header and message checks, the legacy header check,
// seq contiguity and the surface fold (wrapped as "invalid seed event at index N: <msg>"). Every failure except
// *UnsupportedError comes back as *CorruptionError{id, cause}. It returns the normalized stored events
// and the closers separately.
func Inspect(id string, h event.Header, stored []event.Event, path string) (events, closers []event.Event, err error) {
	return inspectWith(id, h, stored, path, surface.NewFolder(0))
}

// inspectWith is Inspect with the surface check sc.
func inspectWith(id string, h event.Header, stored []event.Event, path string, sc surfaceCheck) (events, closers []event.Event, err error) {
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
func inspect(id string, h event.Header, stored []event.Event, rows []uint64, path string, sc surfaceCheck, t Tuning) ([]event.Event, []event.Event, error) {
	return inspectFeed(id, loaded(&Prefix{Header: h, Events: stored, RowMembers: rows, Path: path}), sc, t)
}

// inspectFeed is inspect over the events of a load as it delivers them.
func inspectFeed(id string, feed *Progress, sc surfaceCheck, t Tuning) ([]event.Event, []event.Event, error) {
	c, err := checkFeed(id, feed, passCount, sc, t)
	if err != nil {
		return nil, nil, err
	}
	closers, err := c.closers()
	if err != nil {
		return nil, nil, err
	}
	return c.events(), closers, nil
}

// checkStoredID is assertStoredId: the backend's header must name the requested session.
func checkStoredID(id string, h event.Header) error {
	if h.ID != id {
		return errors.New(`stored session identity mismatch: requested "` + id + `", header contains "` + h.ID + `"`)
	}
	return nil
}

// checkVersion is assertVersion: any format version but the current one is a refusal, not corruption.
func checkVersion(h event.Header, path string) error {
	if h.Version == 0 {
		return nil
	}
	return unsupported(event.VersionRefusal(h.ID, h.Version), path)
}

// checkVocabulary is assertEventsSupported: an unknown event type is a refusal unless the writer marked
// the event ignorable. It runs on normalized events, after the legacy refusals had their say.
func checkVocabulary(h event.Header, events []event.Event, path string) error {
	for _, e := range events {
		if err := checkKnownType(h, e, path); err != nil {
			return err
		}
	}
	return nil
}

func checkKnownType(h event.Header, e event.Event, path string) error {
	if event.IsKnownType(e.Type) {
		return nil
	}
	if ign, ok := e.Member("ignorable"); ok && string(ign) == "true" {
		return nil
	}
	rec, err := e.Record()
	if err != nil {
		return err
	}
	typ, typOK := rec.Get("type")
	seq, seqOK := rec.Get("seq")
	return unsupported(`session "`+h.ID+`" contains event type "`+jsString(typ, typOK)+`" (seq `+jsString(seq, seqOK)+
		`) unknown to this harness and not marked ignorable; refusing to interpret the log — it was likely written by a newer harness`, path)
}

// unsupported builds the coordinator's format refusal, pointing at the raw artifact when there is one.
func unsupported(reason, path string) *UnsupportedError {
	if path != "" {
		reason += " (raw log: " + path + ")"
	}
	return &UnsupportedError{Message: reason, Path: path}
}

// checkRestoredHeader is validateRestoredSessionHeader/validateSessionHeader over the stored header.
func checkRestoredHeader(id string, h event.Header) error {
	if h.Version != 0 {
		return errors.New("session header version must be 0, got " + event.FormatNumber(h.Version))
	}
	if h.ID != id {
		return errors.New(`session header id "` + h.ID + `" does not match session id "` + id + `"`)
	}
	if h.CreatedAt < 0 || h.CreatedAt > event.MaxSafeInteger {
		return errors.New("session header createdAt must be a non-negative safe integer")
	}
	if h.Cwd != nil {
		if h.Cwd.Kind != event.KindString {
			return errors.New("session header cwd must be a string")
		}
		if !strings.HasPrefix(h.Cwd.Str, "/") {
			return errors.New(`session header cwd must be an absolute path, got "` + h.Cwd.Str + `"`)
		}
	}
	if h.ParentSession != nil && h.ParentSession.Kind != event.KindString {
		return errors.New("session header parentSession must be a string")
	}
	if v := h.SeedLength; v != nil && (v.Kind != event.KindNumber || !event.IsSafeInteger(v.Num) || v.Num < 0) {
		return errors.New("session header seedLength must be a non-negative safe integer")
	}
	if v := h.Origin; v != nil && !strEq(*v, true, "subagent") {
		return errors.New(`session header origin must be "subagent"`)
	}
	if h.DelegationDepth < 0 || h.DelegationDepth > event.MaxSafeInteger {
		return errors.New("session header delegationDepth must be a non-negative safe integer")
	}
	if h.AgentPreset != nil && h.AgentPreset.Kind != event.KindString {
		return errors.New("session header agentPreset must be a string")
	}
	return nil
}
