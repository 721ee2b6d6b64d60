package event

import (
	"bytes"
	"errors"
	"math"
)

// FormatVersion is the harness's SESSION_FORMAT_VERSION: the only header version it reads.
const FormatVersion = 0

// Header is a session header as the JSONL header line carries it (docs/harness.md#header-line).
//
// The optional fields are kept as parsed values because the header shape guard does not check their types
// (restore-time validation does, later): a header with `"cwd":5` still lists and inspects as the harness
// shows it.
type Header struct {
	Version         float64
	ID              string
	CreatedAt       int64
	DelegationDepth int64
	// NoDelegationDepth marks a header stored without a delegation depth: the harness's SQLite provider
	// stores delegation_depth NULL for top-level sessions and forks (only subagents set it) and its
	// inspect().meta then has no delegationDepth. A JSONL header line cannot be without one (the JSONL
	// reader's shape guard refuses it), so only the SQLite backend sets this.
	NoDelegationDepth bool
	Cwd               *Value // nil = absent
	ParentSession     *Value
	SeedLength        *Value
	Origin            *Value // when present, always the string "subagent" (the shape guard checks it)
	AgentPreset       *Value // when present, always a string
	// Logical is, for a session of a later format generation (v2, v3), its header as the harness's codec
	// restores it (JSON.stringify, its own member order: isSeeded, no seedLength); Meta returns it as it
	// is. Nil for a v0 header, whose meta is built from the fields above.
	Logical []byte
}

// Header-line failures, with the harness's exact texts.
var (
	ErrHeaderless      = errors.New("empty or header-less session log")
	ErrHeaderNotJSON   = errors.New("corrupt session log: header line is not valid JSON")
	ErrNotHeader       = errors.New("corrupt session log: first line is not a session header")
	ErrRetiredBaseline = errors.New("session header uses retired policy baseline fields")
)

// UnsupportedVersionError is the harness's SessionFormatUnsupportedError for a header whose version is not
// FormatVersion. Error() is the refusal text without the " (raw log: <path>)" suffix backends append.
type UnsupportedVersionError struct {
	ID      string // the header id, or String(id) when it is not a string
	Version float64
}

// Error is the refusal text; backends add their " (raw log: <path>)" suffix themselves.
func (e *UnsupportedVersionError) Error() string { return VersionRefusal(e.ID, e.Version) }

// VersionRefusal is the harness's direction-aware refusal text (docs/harness.md#header-line), without a raw-log
// suffix. The version prints as JS prints a number.
func VersionRefusal(id string, version float64) string {
	v := FormatNumber(version)
	if version > FormatVersion {
		return `session "` + id + `" uses log format v` + v + `, but this harness reads only v0: the log was written by a newer harness — upgrade the harness to open it`
	}
	return `session "` + id + `" uses log format v` + v + `, older than the supported v0, and this build ships no upgrade path for it`
}

// ParseHeaderLine parses one header record INCLUDING its trailing LF, checking in the harness's order:
// record framing (ErrHeaderless), JSON (ErrHeaderNotJSON), version refusal before any shape check
// (*UnsupportedVersionError), the shape guard (ErrNotHeader), then retired fields (ErrRetiredBaseline).
// Unknown keys are dropped.
func ParseHeaderLine(rec []byte) (Header, error) {
	if len(rec) == 0 || rec[len(rec)-1] != '\n' || bytes.IndexByte(rec, '\n') != len(rec)-1 {
		return Header{}, ErrHeaderless
	}
	v, err := Parse(rec[:len(rec)-1])
	if err != nil {
		return Header{}, ErrHeaderNotJSON
	}
	if v.Kind == KindObject {
		if ver, ok := v.Get("version"); ok && ver.Kind == KindNumber && ver.Num != FormatVersion {
			id, present := v.Get("id")
			idText := "undefined"
			if present {
				idText = JSString(id)
			}
			return Header{}, &UnsupportedVersionError{ID: idText, Version: ver.Num}
		}
	}
	h, ok := headerFromValue(v)
	if !ok {
		return Header{}, ErrNotHeader
	}
	if v.Has("sandboxMode") || v.Has("approvalPolicy") {
		return Header{}, ErrRetiredBaseline
	}
	return h, nil
}

// headerFromValue applies the isHeaderLine shape guard and extracts the header fields.
func headerFromValue(v Value) (Header, bool) {
	if v.Kind != KindObject {
		return Header{}, false
	}
	typ, _ := v.Get("type")
	ver, _ := v.Get("version")
	id, _ := v.Get("id")
	created, hasCreated := v.Get("createdAt")
	depth, hasDepth := v.Get("delegationDepth")
	if typ.Kind != KindString || typ.Str != "session" || ver.Kind != KindNumber || id.Kind != KindString {
		return Header{}, false
	}
	if !hasCreated || !nonNegativeSafeInt(created) || !hasDepth || !nonNegativeSafeInt(depth) {
		return Header{}, false
	}
	h := Header{Version: ver.Num, ID: id.Str, CreatedAt: int64(created.Num), DelegationDepth: int64(depth.Num)}
	if o, ok := v.Get("origin"); ok {
		if o.Kind != KindString || o.Str != "subagent" {
			return Header{}, false
		}
		h.Origin = &o
	}
	if a, ok := v.Get("agentPreset"); ok {
		if a.Kind != KindString {
			return Header{}, false
		}
		h.AgentPreset = &a
	}
	if c, ok := v.Get("cwd"); ok {
		h.Cwd = &c
	}
	if p, ok := v.Get("parentSession"); ok {
		h.ParentSession = &p
	}
	if s, ok := v.Get("seedLength"); ok {
		h.SeedLength = &s
	}
	return h, true
}

// nonNegativeSafeInt is the guard's test for createdAt and delegationDepth (negative zero refused).
func nonNegativeSafeInt(v Value) bool {
	return v.Kind == KindNumber && IsSafeInteger(v.Num) && v.Num >= 0 && !math.Signbit(v.Num)
}

// Line is the on-disk JSONL header line without its LF, in toHeaderLine key order. It always carries
// delegationDepth (0 for a header without one, which is what NULL means to the SQLite provider: top
// level), because the JSONL reader refuses a header line without it.
func (h Header) Line() []byte {
	dst := append(make([]byte, 0, 160), `{"type":"session",`...)
	return h.WithDepth().appendFields(dst)
}

// WithDepth is the header with its delegation depth explicit: what it becomes in a JSONL store. Two
// headers that differ only in a NULL depth against depth 0 are the same session header.
func (h Header) WithDepth() Header {
	h.NoDelegationDepth = false
	return h
}

// Meta is inspect().meta as JSON (fromHeaderLine order, no "type"), without a trailing LF.
func (h Header) Meta() []byte {
	if h.Logical != nil {
		return bytes.Clone(h.Logical)
	}
	dst := append(make([]byte, 0, 160), '{')
	return h.appendFields(dst)
}

func (h Header) appendFields(dst []byte) []byte {
	dst = append(dst, `"version":`...)
	dst = AppendStringify(dst, Number(h.Version))
	dst = append(dst, `,"id":`...)
	dst = AppendQuote(dst, h.ID)
	dst = append(dst, `,"createdAt":`...)
	dst = AppendNumber(dst, float64(h.CreatedAt))
	dst = appendOptional(dst, "cwd", h.Cwd)
	dst = appendOptional(dst, "parentSession", h.ParentSession)
	dst = appendOptional(dst, "seedLength", h.SeedLength)
	dst = appendOptional(dst, "origin", h.Origin)
	if !h.NoDelegationDepth {
		dst = append(dst, `,"delegationDepth":`...)
		dst = AppendNumber(dst, float64(h.DelegationDepth))
	}
	dst = appendOptional(dst, "agentPreset", h.AgentPreset)
	return append(dst, '}')
}

func appendOptional(dst []byte, key string, v *Value) []byte {
	if v == nil {
		return dst
	}
	dst = append(dst, ',', '"')
	dst = append(dst, key...)
	dst = append(dst, '"', ':')
	return AppendStringify(dst, *v)
}
