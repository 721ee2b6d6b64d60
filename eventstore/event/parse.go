package event

import (
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"
)

// SyntaxError is a JSON.parse failure. The harness never shows the JS message text, only that parsing
// failed, so the offset is for diagnostics.
type SyntaxError struct {
	Offset int // byte offset into the UTF-8 decoded text
	Msg    string
}

// Error describes where parsing failed; the harness only ever reports that it failed.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at offset %d: %s", e.Offset, e.Msg)
}

// ErrTooDeep is returned for input nested deeper than MaxDepth.
var ErrTooDeep = errors.New("invalid JSON: nesting deeper than event.MaxDepth")

// Parse parses b with JSON.parse semantics after decoding it from UTF-8 the way Node's
// Buffer.toString('utf8') does (invalid sequences become U+FFFD by the maximal-subpart rule).
func Parse(b []byte) (Value, error) { return parseAll(DecodeUTF8(b), false) }

// parsers keeps parsers with their scratch stacks between calls: a fresh parser grows its member and
// value stacks anew for every input, which was most of the allocation of parsing many small records (an
// append request's lines). Parsed values never alias a parser's memory (containers are copied out, strings
// converted), so reuse is safe.
var parsers = sync.Pool{New: func() any { return new(parser) }}

// getParser takes a parser from parsers, set up like proto but with the scratch stacks it kept.
func getParser(proto parser) *parser {
	p := parsers.Get().(*parser)
	proto.buf, proto.mstack, proto.vstack = p.buf[:0], p.mstack[:0], p.vstack[:0]
	*p = proto
	return p
}

// putParser returns p to parsers, keeping only its scratch stacks.
func putParser(p *parser) {
	*p = parser{buf: p.buf, mstack: p.mstack, vstack: p.vstack}
	parsers.Put(p)
}

// parseAll parses the whole input as one JSON value with optional whitespace around it.
func parseAll(s []byte, strict bool) (Value, error) {
	p := getParser(parser{s: s, strict: strict})
	defer putParser(p)
	return p.whole()
}

func (p *parser) whole() (Value, error) {
	p.skipWS()
	v, err := p.value(0)
	if err != nil {
		return Value{}, err
	}
	p.skipWS()
	if p.i != len(p.s) {
		return Value{}, p.errorf("unexpected data after JSON value")
	}
	return v, nil
}

// ParseStrict parses input that must survive a JSON.parse/JSON.stringify round trip without losing
// anything: it is Parse, except that invalid UTF-8 (which JSON.parse would turn into U+FFFD) and a
// repeated member name (of which JSON.parse keeps only the last) are errors, and so is every value
// CheckLossless rejects (negative zero, numbers that overflow to ±Infinity). New events written by dshfs
// come through here, so what a user hands in is exactly what the log keeps.
func ParseStrict(b []byte) (Value, error) {
	if !utf8.Valid(b) {
		return Value{}, &SyntaxError{Offset: firstInvalidUTF8(b), Msg: "invalid UTF-8"}
	}
	v, err := parseAll(b, true)
	if err != nil {
		return Value{}, err
	}
	if err := CheckLossless(v); err != nil {
		return Value{}, err
	}
	return v, nil
}

func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// DecodeUTF8 returns b decoded as the WHATWG UTF-8 decoder (TextDecoder, Buffer.toString) would and
// re-encoded as UTF-8: valid input is returned as is, each maximal subpart of an invalid sequence
// becomes one U+FFFD. (Go's own conversions emit one U+FFFD per bad byte, which differs on truncated
// multi-byte sequences.)
func DecodeUTF8(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	out := make([]byte, 0, len(b)+8)
	i := 0
	for i < len(b) {
		c := b[i]
		if c < 0x80 {
			out = append(out, c)
			i++
			continue
		}
		var need int
		lower, upper := byte(0x80), byte(0xBF)
		switch {
		case c >= 0xC2 && c <= 0xDF:
			need = 1
		case c >= 0xE0 && c <= 0xEF:
			need = 2
			if c == 0xE0 {
				lower = 0xA0
			} else if c == 0xED {
				upper = 0x9F
			}
		case c >= 0xF0 && c <= 0xF4:
			need = 3
			if c == 0xF0 {
				lower = 0x90
			} else if c == 0xF4 {
				upper = 0x8F
			}
		default:
			out = utf8.AppendRune(out, utf8.RuneError)
			i++
			continue
		}
		j := i + 1
		ok := true
		for k := 0; k < need; k++ {
			if j >= len(b) || b[j] < lower || b[j] > upper {
				ok = false
				break
			}
			lower, upper = 0x80, 0xBF
			j++
		}
		if ok {
			out = append(out, b[i:j]...)
		} else {
			// The maximal subpart b[i:j] is replaced as one unit; the offending byte is reprocessed.
			out = utf8.AppendRune(out, utf8.RuneError)
		}
		i = j
	}
	return out
}

type parser struct {
	s   []byte
	i   int
	buf []byte // scratch for strings with escapes
	// Members and elements are collected on these stacks and copied out once per container at its exact
	// size: growing a fresh slice per container was most of the allocation cost of loading a large log.
	mstack []Member
	vstack []Value
	limit  int // > 0: containers nested deeper are skipped, keeping only their Kind (canonical input only)
	// skip names members, at any depth, whose value is not materialized (canonical input only): a
	// container keeps only its Kind, a string its Kind with an empty Str.
	skip []string
	// strict refuses a repeated member name instead of letting the last one win (ParseStrict).
	strict bool
	// clip > 0 keeps only the first clip bytes of a longer string value (ParseClipped)
	clip int
}

// internKey returns a shared string for the member names every event repeats, without allocating;
// ok is false for other names.
func internKey(raw []byte) (string, bool) {
	switch string(raw) {
	case "type":
		return "type", true
	case "seq":
		return "seq", true
	case "time":
		return "time", true
	case "data":
		return "data", true
	case "turn":
		return "turn", true
	case "step":
		return "step", true
	case "chunk":
		return "chunk", true
	case "index":
		return "index", true
	case "text":
		return "text", true
	case "id":
		return "id", true
	case "role":
		return "role", true
	case "content":
		return "content", true
	case "source":
		return "source", true
	case "kind":
		return "kind", true
	case "message":
		return "message", true
	case "surfaceOp":
		return "surfaceOp", true
	case "sourceEventSeqs":
		return "sourceEventSeqs", true
	case "callId":
		return "callId", true
	case "name":
		return "name", true
	case "arguments":
		return "arguments", true
	case "toolCallId":
		return "toolCallId", true
	case "isError":
		return "isError", true
	case "provider":
		return "provider", true
	case "model":
		return "model", true
	case "usage":
		return "usage", true
	}
	return "", false
}

// key reads a member name, sharing the common ones.
func (p *parser) key() (string, error) {
	end := p.i + 1
	for end < len(p.s) && p.s[end] != '"' && p.s[end] != '\\' && p.s[end] >= 0x20 && p.s[end] < 0x80 {
		end++
	}
	if end < len(p.s) && p.s[end] == '"' {
		if k, ok := internKey(p.s[p.i+1 : end]); ok {
			p.i = end + 1
			return k, nil
		}
	}
	return p.str()
}

func (p *parser) errorf(format string, args ...any) error {
	return &SyntaxError{Offset: p.i, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) skipWS() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) literal(word string) bool {
	if len(p.s)-p.i >= len(word) && string(p.s[p.i:p.i+len(word)]) == word {
		p.i += len(word)
		return true
	}
	return false
}

func (p *parser) value(depth int) (Value, error) {
	if p.i >= len(p.s) {
		return Value{}, p.errorf("unexpected end of JSON input")
	}
	switch c := p.s[p.i]; {
	case (c == '{' || c == '[') && p.limit > 0 && depth >= p.limit:
		end := skipValue(p.s, p.i)
		if end < 0 {
			return Value{}, p.errorf("unexpected end of JSON input")
		}
		p.i = end
		if c == '{' {
			return Value{Kind: KindObject}, nil
		}
		return Value{Kind: KindArray}, nil
	case c == '{':
		if depth >= MaxDepth {
			return Value{}, ErrTooDeep
		}
		return p.object(depth + 1)
	case c == '[':
		if depth >= MaxDepth {
			return Value{}, ErrTooDeep
		}
		return p.array(depth + 1)
	case c == '"' && p.clip > 0:
		return p.clippedStr()
	case c == '"':
		s, err := p.str()
		if err != nil {
			return Value{}, err
		}
		return Value{Kind: KindString, Str: s}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		f, err := p.number()
		if err != nil {
			return Value{}, err
		}
		return Value{Kind: KindNumber, Num: f}, nil
	case p.literal("true"):
		return Value{Kind: KindBool, Bool: true}, nil
	case p.literal("false"):
		return Value{Kind: KindBool}, nil
	case p.literal("null"):
		return Value{}, nil
	}
	return Value{}, p.errorf("unexpected token")
}

func (p *parser) array(depth int) (Value, error) {
	p.i++ // '['
	p.skipWS()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return Value{Kind: KindArray, Arr: []Value{}}, nil
	}
	base := len(p.vstack)
	defer func() { p.vstack = p.vstack[:base] }()
	for {
		p.skipWS()
		v, err := p.value(depth)
		if err != nil {
			return Value{}, err
		}
		p.vstack = append(p.vstack, v)
		p.skipWS()
		if p.i >= len(p.s) {
			return Value{}, p.errorf("unexpected end of JSON input")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return Value{Kind: KindArray, Arr: append([]Value(nil), p.vstack[base:]...)}, nil
		default:
			return Value{}, p.errorf("expected ',' or ']'")
		}
	}
}

func (p *parser) object(depth int) (Value, error) {
	p.i++ // '{'
	var index map[string]int
	hasIndexKey := false
	p.skipWS()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return Value{Kind: KindObject, Obj: []Member{}}, nil
	}
	base := len(p.mstack)
	defer func() { p.mstack = p.mstack[:base] }()
	for {
		p.skipWS()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return Value{}, p.errorf("expected property name")
		}
		key, err := p.key()
		if err != nil {
			return Value{}, err
		}
		p.skipWS()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return Value{}, p.errorf("expected ':'")
		}
		p.i++
		p.skipWS()
		var v Value
		if len(p.skip) > 0 && p.i < len(p.s) && contains(p.skip, key) {
			v, err = p.skipped()
		} else {
			v, err = p.value(depth)
		}
		if err != nil {
			return Value{}, err
		}
		members := p.mstack[base:]
		pos := -1
		if index != nil {
			if q, ok := index[key]; ok {
				pos = q
			}
		} else {
			for j := range members {
				if members[j].Key == key {
					pos = j
					break
				}
			}
		}
		if pos >= 0 {
			if p.strict {
				return Value{}, p.errorf("duplicate key %s", Stringify(String(key)))
			}
			members[pos].Value = v
		} else {
			if !hasIndexKey && IsArrayIndexKey(key) {
				hasIndexKey = true
			}
			p.mstack = append(p.mstack, Member{Key: key, Value: v})
			if n := len(p.mstack) - base; index != nil {
				index[key] = n - 1
			} else if n > 16 {
				index = make(map[string]int, 32)
				for j, m := range p.mstack[base:] {
					index[m.Key] = j
				}
			}
		}
		p.skipWS()
		if p.i >= len(p.s) {
			return Value{}, p.errorf("unexpected end of JSON input")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			members := append([]Member(nil), p.mstack[base:]...)
			if hasIndexKey {
				sortIndexKeysFirst(members)
			}
			return Value{Kind: KindObject, Obj: members}, nil
		default:
			return Value{}, p.errorf("expected ',' or '}'")
		}
	}
}

// skipped passes over one canonical value, keeping only its Kind (strings become empty).
func (p *parser) skipped() (Value, error) {
	end := skipValue(p.s, p.i)
	if end < 0 {
		return Value{}, p.errorf("unexpected end of JSON input")
	}
	var v Value
	switch c := p.s[p.i]; {
	case c == '{':
		v.Kind = KindObject
	case c == '[':
		v.Kind = KindArray
	case c == '"':
		v.Kind = KindString
	default:
		return p.value(0) // scalars are cheap and may matter (numbers, booleans, null)
	}
	p.i = end
	return v, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
