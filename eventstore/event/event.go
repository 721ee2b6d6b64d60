package event

import (
	"bytes"
	"errors"
	"strconv"
)

// Event is one session event as stored: canonical record bytes plus envelope fields decoded from them.
//
// Raw is the source of truth; Type and Seq are cached because every consumer (scanner, validation,
// directory listings) needs them for every event, and re-scanning Raw each time would dominate loading.
type Event struct {
	Raw  []byte // JSON.stringify of the record, member order as parsed
	Type string // the "type" member when it is a string, else ""
	Seq  int64  // the "seq" member when it is a non-negative safe integer, else -1
}

// ErrNotCanonical is returned by NewEvent for bytes that are not JSON.stringify output.
var ErrNotCanonical = errors.New("event record is not canonical JSON (use event.Canonical first)")

// NewEvent wraps canonical record bytes and fills Type/Seq. Any JSON value is accepted (a line holding
// `42` or `null` gets Type "" and Seq -1), because the harness's scanner lets such values through and
// only later validation rejects them.
func NewEvent(raw []byte) (Event, error) {
	if !isCanonical(raw) {
		return Event{}, ErrNotCanonical
	}
	return trustedEvent(raw), nil
}

// ParseEvent canonicalizes one stored line (Canonical) and wraps the result, validating only once.
func ParseEvent(line []byte) (Event, error) {
	raw, err := Canonical(line)
	if err != nil {
		return Event{}, err
	}
	return trustedEvent(raw), nil
}

// trustedEvent wraps bytes already known to be canonical.
func trustedEvent(raw []byte) Event {
	e := Event{Raw: raw, Seq: -1}
	if len(raw) == 0 || raw[0] != '{' {
		return e
	}
	if t, ok := lookupMember(raw, "type"); ok && len(t) >= 2 && t[0] == '"' {
		e.Type = decodeCanonicalString(t)
	}
	if s, ok := lookupMember(raw, "seq"); ok {
		e.Seq = seqOf(s)
	}
	return e
}

// CanonicalEvent wraps a record the caller has checked with IsCanonical and whose "type" string and
// "seq" (a non-negative safe integer) it has read: it spares trustedEvent's second scan of the bytes.
// A known type's name is shared, so a long event list does not hold one copy of it per event.
func CanonicalEvent(raw []byte, typ string, seq int64) Event {
	if t, ok := knownTypes[typ]; ok {
		typ = t
	}
	return Event{Raw: raw, Type: typ, Seq: seq}
}

// seqOf interprets a canonical number token as a seq: a non-negative safe integer, else -1.
func seqOf(tok []byte) int64 {
	if len(tok) == 0 || tok[0] < '0' || tok[0] > '9' {
		return -1
	}
	if len(tok) <= 16 {
		n, err := strconv.ParseInt(string(tok), 10, 64)
		if err == nil {
			if n > MaxSafeInteger {
				return -1
			}
			return n
		}
	}
	// Exponent or fractional spellings: only the value matters.
	f := parseNumber(tok)
	if IsSafeInteger(f) && f >= 0 {
		return int64(f)
	}
	return -1
}

// decodeCanonicalString returns the WTF-8 contents of a canonical string token (with quotes).
func decodeCanonicalString(tok []byte) string {
	inner := tok[1 : len(tok)-1]
	if t, ok := internType(inner); ok {
		return t
	}
	for _, c := range inner {
		if c == '\\' {
			return string(unescapeCanonical(nil, inner))
		}
	}
	return string(inner)
}

// Record parses the stored record.
func (e Event) Record() (Value, error) { return Parse(e.Raw) }

// Member returns the raw canonical bytes of a top-level record member.
func (e Event) Member(key string) ([]byte, bool) { return Lookup(e.Raw, key) }

// SeqText is how JS `${event.seq}` prints the seq member, which is what the harness's diagnostics
// (seq gap, unknown type) embed: "undefined" when absent, numbers via FormatNumber, strings raw, null as
// "null", objects as "[object Object]", arrays joined with ",".
func (e Event) SeqText() string {
	if e.Seq >= 0 {
		return strconv.FormatInt(e.Seq, 10)
	}
	tok, ok := lookupMember(e.Raw, "seq")
	if !ok {
		return "undefined"
	}
	v, err := Parse(tok)
	if err != nil {
		return "undefined"
	}
	return JSString(v)
}

// JSString is JavaScript's String(v) for a JSON value (template-literal interpolation).
func JSString(v Value) string {
	return string(appendJSString(nil, v, false))
}

func appendJSString(dst []byte, v Value, inArray bool) []byte {
	switch v.Kind {
	case KindNull:
		if inArray {
			return dst // Array.prototype.join prints null and undefined elements as ""
		}
		return append(dst, "null"...)
	case KindBool:
		return strconv.AppendBool(dst, v.Bool)
	case KindNumber:
		return AppendNumber(dst, v.Num)
	case KindString:
		return append(dst, v.Str...)
	case KindArray:
		for i := range v.Arr {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSString(dst, v.Arr[i], true)
		}
		return dst
	default:
		return append(dst, "[object Object]"...)
	}
}

// NewEventFrom builds a fresh event in the live-append key order: type, seq, time, data, then extra
// members in the order given. data must be canonical JSON. Extra keys that JS would reorder or merge
// (array-index keys, repeats of the envelope keys) are placed the way a JS object literal would.
func NewEventFrom(typ string, seq, time int64, data []byte, extra ...Member) Event {
	simple := true
	for i, m := range extra {
		switch m.Key {
		case "type", "seq", "time", "data":
			simple = false
		}
		if IsArrayIndexKey(m.Key) {
			simple = false
		}
		for _, prev := range extra[:i] {
			if prev.Key == m.Key {
				simple = false
			}
		}
	}
	if !simple {
		dv, err := Parse(data)
		if err != nil {
			dv = Value{}
		}
		members := append([]Member{
			{Key: "type", Value: String(typ)},
			{Key: "seq", Value: Int(seq)},
			{Key: "time", Value: Int(time)},
			{Key: "data", Value: dv},
		}, extra...)
		return trustedEvent(Stringify(Object(members...)))
	}
	buf := make([]byte, 0, len(data)+len(typ)+48)
	buf = append(buf, `{"type":`...)
	buf = AppendQuote(buf, typ)
	buf = append(buf, `,"seq":`...)
	buf = AppendNumber(buf, float64(seq))
	buf = append(buf, `,"time":`...)
	buf = AppendNumber(buf, float64(time))
	buf = append(buf, `,"data":`...)
	buf = append(buf, data...)
	for _, m := range extra {
		buf = append(buf, ',')
		buf = AppendQuote(buf, m.Key)
		buf = append(buf, ':')
		buf = AppendStringify(buf, m.Value)
	}
	buf = append(buf, '}')
	if cap(buf)-len(buf) > len(buf)/8 {
		// extra members outgrew the first guess and append doubled the buffer: the event may live as long
		// as its session (a SQLite load builds every scalar event here), so it keeps only its bytes
		buf = append(make([]byte, 0, len(buf)), buf...)
	}
	return Event{Raw: buf, Type: typ, Seq: seqFromInt(seq)}
}

func seqFromInt(seq int64) int64 {
	if seq < 0 || seq > MaxSafeInteger {
		return -1
	}
	return seq
}

// Shallow parses the record like Record, except that objects and arrays nested more than depth levels deep
// (the record itself is level 1) keep their Kind but not their contents. Checks that read a few fields near
// the top of large payloads (message shapes, turn brackets) use it to avoid building trees of tool output.
//
// Members named in skip, at any depth, are not materialized either: a container keeps only its Kind, a
// string its Kind with an empty Str (the load checks never read message texts or tool arguments).
func (e Event) Shallow(depth int, skip ...string) (Value, error) {
	p := getParser(parser{s: e.Raw, limit: depth, skip: skip})
	defer putParser(p)
	v, err := p.value(0)
	if err != nil {
		return Value{}, err
	}
	if p.i != len(p.s) {
		return Value{}, p.errorf("unexpected data after JSON value")
	}
	return v, nil
}

// Envelope parses the record like Record, except that a `data` object or array is left empty: its Kind is
// kept, its contents are not parsed. Loading checks only envelope members for most event types (streamed
// assistant/chunk events are the bulk of a log), and skipping their payloads is most of the cost of
// validating a large session. Use Record wherever data is read.
func (e Event) Envelope() (Value, error) {
	raw := e.Raw
	if len(raw) < 2 || raw[0] != '{' {
		return Parse(raw)
	}
	out := Value{Kind: KindObject, Obj: make([]Member, 0, 6)}
	if raw[1] == '}' {
		return out, nil
	}
	for i := 1; i < len(raw); {
		if raw[i] != '"' {
			return Parse(raw)
		}
		kEnd := skipString(raw, i)
		if kEnd < 0 || kEnd >= len(raw) || raw[kEnd] != ':' {
			return Parse(raw)
		}
		key, interned := internKey(raw[i+1 : kEnd-1])
		if !interned {
			key = string(unescapeCanonical(nil, raw[i+1:kEnd-1]))
		}
		vStart := kEnd + 1
		vEnd := skipValue(raw, vStart)
		if vEnd < 0 || vEnd >= len(raw) {
			return Parse(raw)
		}
		var v Value
		switch {
		case key == "data" && raw[vStart] == '{':
			v = Value{Kind: KindObject}
		case key == "data" && raw[vStart] == '[':
			v = Value{Kind: KindArray}
		default:
			var err error
			if v, err = Parse(raw[vStart:vEnd]); err != nil {
				return Value{}, err
			}
		}
		out.Obj = append(out.Obj, Member{Key: key, Value: v})
		if raw[vEnd] != ',' {
			break
		}
		i = vEnd + 1
	}
	return out, nil
}

// Time returns the raw bytes of the record's "time" member, as Member("time") does. The harness writes
// every record as {"type":T,"seq":N,"time":M,...}; that envelope is read straight through (a log's views
// read every event's time, and a member lookup skipped the names and values before it one by one), and
// any other layout is looked up.
func (e Event) Time() ([]byte, bool) {
	const typeHead, seqHead, timeHead = `{"type":"`, `","seq":`, `,"time":`
	raw := e.Raw
	if !bytes.HasPrefix(raw, []byte(typeHead)) {
		return e.Member("time")
	}
	i := len(typeHead)
	q := bytes.IndexByte(raw[i:], '"')
	if q < 0 || raw[i+q-1] == '\\' { // an escaped quote, or one that only looks escaped: looked up
		return e.Member("time")
	}
	i += q
	if !bytes.HasPrefix(raw[i:], []byte(seqHead)) {
		return e.Member("time")
	}
	i += len(seqHead)
	i += digits(raw[i:])
	if !bytes.HasPrefix(raw[i:], []byte(timeHead)) {
		return e.Member("time")
	}
	i += len(timeHead)
	n := digits(raw[i:])
	if n == 0 || i+n >= len(raw) || (raw[i+n] != ',' && raw[i+n] != '}') {
		return e.Member("time")
	}
	return raw[i : i+n], true
}

// digits is how many ASCII digits b starts with.
func digits(b []byte) int {
	n := 0
	for n < len(b) && b[n] >= '0' && b[n] <= '9' {
		n++
	}
	return n
}
