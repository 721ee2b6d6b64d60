package load

import (
	"errors"
	"strings"

	"github.com/dshfs/dshfs/eventstore/event"
)

// Surface validates the next event of a seed the way the harness's SurfaceManager.validateNext does.
// The store always checks with the surface package's fold (*surface.Folder, whose shortcut for unmarked
// events the checks take); tests give one that fails at a chosen event. nil: no surface check (ReadStored,
// which the harness runs without one).
type Surface interface{ Push(e event.Event) error }

// Parallel runs fn over contiguous ranges covering [0, n), from min items on, and returns the error of the
// lowest failing range: how a large log's parse is spread (the program's eventstore.Tuning.Parallel). nil
// runs everything inline.
type Parallel func(n, min int, fn func(lo, hi int) error) error

func (p Parallel) run(n, min int, fn func(lo, hi int) error) error {
	if p == nil {
		return fn(0, n)
	}
	return p(n, min, fn)
}

// ReadStored is the harness's readFrom(id, 0) post-read path (readStoredPrefix): assertStoredId,
// assertVersion (UnsupportedError with " (raw log: <path>)" when path != ""), snapshotStoredEvents
// (legacy refusals, legacy normalization, message-shape check with subject "session event at seq N"),
// then the vocabulary check, given the stored prefix's row members (eventstore.Prefix.RowMembers; nil:
// unknown). Errors are not wrapped: plain errors with the harness's text, a *TypeError where the harness
// would raise one, or *UnsupportedError. It returns the normalized events.
func ReadStored(id string, h event.Header, stored []event.Event, rows []uint64, path string, par Parallel) ([]event.Event, error) {
	c, err := checkStored(id, h, stored, rows, path, passTurns, nil, par)
	if c != nil {
		defer c.release()
	}
	if err != nil {
		return nil, err
	}
	return c.events(), nil
}

// Inspect is the harness's prepareCore over the events of a load as it delivers them: the ReadStored
// steps, then the closers (the repair plan, each message-shape checked), then the restore-mode Session
// constructor over stored+closers: header validation, and per event the envelope, request/header and
// message checks, the legacy header check, seq contiguity and sc (wrapped as "invalid seed event at
// index N: <msg>"). Errors are not wrapped, as ReadStored's. It returns the normalized stored events and
// the closers separately.
func Inspect(id string, feed *Progress, sc Surface, par Parallel) ([]event.Event, []event.Event, error) {
	c, err := checkFeed(id, feed, passCount, sc, par)
	if c != nil {
		defer c.release()
	}
	if err != nil {
		return nil, nil, err
	}
	closers, err := c.closers()
	if err != nil {
		return nil, nil, err
	}
	return c.events(), closers, nil
}

// checkStored runs the passes before end over stored (sc checking the surface in passSeed), after the
// header checks that precede them. rows are the stored events' row members (eventstore.Prefix.RowMembers); par spreads
// the parse of a large log.
func checkStored(id string, h event.Header, stored []event.Event, rows []uint64, path string, end pass, sc Surface, par Parallel) (*logCheck, error) {
	return checkFeed(id, Stored(h, path, stored, rows), end, sc, par)
}

// checkFeed is checkStored over the events of a load as it delivers them.
func checkFeed(id string, feed *Progress, end pass, sc Surface, par Parallel) (*logCheck, error) {
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
	c := newLogCheck(id, h, feed, path, end, par)
	c.sc = sc
	return c, c.run()
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
	return unsupported(`session "`+h.ID+`" contains event type "`+JSString(typ, typOK)+`" (seq `+JSString(seq, seqOK)+
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

// UnsupportedError is a format refusal the checks found (the harness's SessionFormatUnsupportedError):
// the message already carries the " (raw log: <path>)" suffix when there is an artifact path. The store
// reports it as its own eventstore.UnsupportedError.
type UnsupportedError struct {
	Message string
	Path    string // artifact path, "" when unknown
}

func (e *UnsupportedError) Error() string { return e.Message }
