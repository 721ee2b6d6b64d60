package event

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"sync"
	"unicode/utf8"
)

// Kind is the JSON type of a Value.
type Kind uint8

// The JSON kinds; the zero Value is null so that an absent value prints as JSON null.
const (
	KindNull Kind = iota
	KindBool
	KindNumber
	KindString
	KindArray
	KindObject
)

// String names the kind the way the harness's `typeof`-style diagnostics would describe it.
func (k Kind) String() string {
	switch k {
	case KindNull:
		return "null"
	case KindBool:
		return "boolean"
	case KindNumber:
		return "number"
	case KindString:
		return "string"
	case KindArray:
		return "array"
	case KindObject:
		return "object"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// MaxDepth bounds array/object nesting accepted by Parse (and so by Canonical). V8's JSON.parse has no
// fixed limit; no harness-written log comes near this one, and a bound keeps a hostile line from
// exhausting memory through the parser's recursion.
const MaxDepth = 10000

// Member is one object property. Members are kept in the order a JavaScript object enumerates them,
// because JSON.stringify output (and so byte compatibility) depends on that order.
type Member struct {
	Key   string
	Value Value
}

// Value is a parsed JSON value exactly as JavaScript's JSON.parse would hold it.
//
// Strings (Str and member keys) are WTF-8: JS strings are UTF-16 and may hold lone surrogates, which are
// kept as their 3-byte generalized UTF-8 encoding so that they survive a parse/stringify round trip.
// Obj is in JS enumeration order: array-index keys ascending, then the rest in insertion order, with no
// duplicates.
type Value struct {
	Kind Kind
	Bool bool
	Num  float64
	Str  string
	Arr  []Value
	Obj  []Member
}

// Null returns JSON null (the zero Value).
func Null() Value { return Value{} }

// Bool returns a JSON boolean.
func Bool(b bool) Value { return Value{Kind: KindBool, Bool: b} }

// Number returns a JSON number; non-finite values are representable but Stringify prints them as null,
// as JS does.
func Number(f float64) Value { return Value{Kind: KindNumber, Num: f} }

// Int returns a JSON number holding an integer; callers use it for seq/time style fields.
func Int(i int64) Value { return Value{Kind: KindNumber, Num: float64(i)} }

// String returns a JSON string; s is taken as WTF-8.
func String(s string) Value { return Value{Kind: KindString, Str: s} }

// Array returns a JSON array of the given elements.
func Array(elems ...Value) Value {
	if elems == nil {
		elems = []Value{}
	}
	return Value{Kind: KindArray, Arr: elems}
}

// Object returns a JSON object built the way a JS object literal would be: a repeated key keeps its first
// position and its last value, and array-index keys move to the front in ascending order.
func Object(members ...Member) Value {
	return Value{Kind: KindObject, Obj: normalizeMembers(members)}
}

// Get returns the value of an object member.
func (v Value) Get(key string) (Value, bool) {
	if v.Kind != KindObject {
		return Value{}, false
	}
	for i := range v.Obj {
		if v.Obj[i].Key == key {
			return v.Obj[i].Value, true
		}
	}
	return Value{}, false
}

// Has reports whether v is an object with an own member named key (JS Object.hasOwn).
func (v Value) Has(key string) bool {
	_, ok := v.Get(key)
	return ok
}

// Keys returns the member names of an object in enumeration order (nil for non-objects).
func (v Value) Keys() []string {
	if v.Kind != KindObject {
		return nil
	}
	keys := make([]string, len(v.Obj))
	for i, m := range v.Obj {
		keys[i] = m.Key
	}
	return keys
}

// HasExactKeys reports whether v is an object whose member set is exactly keys (in any order); it is
// the harness's hasExactKeys shape test.
func (v Value) HasExactKeys(keys ...string) bool {
	if v.Kind != KindObject || len(v.Obj) != len(keys) {
		return false
	}
	for _, k := range keys {
		if !v.Has(k) {
			return false
		}
	}
	return true
}

// IsArrayIndexKey reports whether a property key is an ECMAScript array index (canonical decimal
// 0..2^32-2). Such keys enumerate before all others in ascending numeric order.
func IsArrayIndexKey(key string) bool {
	_, ok := arrayIndex(key)
	return ok
}

func arrayIndex[S string | []byte](key S) (uint32, bool) {
	n := len(key)
	if n == 0 || n > 10 {
		return 0, false
	}
	if key[0] == '0' {
		return 0, n == 1
	}
	var v uint64
	for i := 0; i < n; i++ {
		c := key[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if v > math.MaxUint32-1 {
		return 0, false
	}
	return uint32(v), true
}

// normalizeMembers applies JS object semantics to a member list in insertion order.
func normalizeMembers(members []Member) []Member {
	out := make([]Member, 0, len(members))
	var index map[string]int
	hasIndexKey := false
	for _, m := range members {
		pos := -1
		if index != nil {
			if p, ok := index[m.Key]; ok {
				pos = p
			}
		} else {
			for i := range out {
				if out[i].Key == m.Key {
					pos = i
					break
				}
			}
		}
		if pos >= 0 {
			out[pos].Value = m.Value
			continue
		}
		if !hasIndexKey && IsArrayIndexKey(m.Key) {
			hasIndexKey = true
		}
		out = append(out, m)
		if index == nil && len(out) > 16 {
			index = make(map[string]int, len(members))
			for i := range out {
				index[out[i].Key] = i
			}
		} else if index != nil {
			index[m.Key] = len(out) - 1
		}
	}
	if hasIndexKey {
		sortIndexKeysFirst(out)
	}
	return out
}

func sortIndexKeysFirst(ms []Member) {
	sort.SliceStable(ms, func(i, j int) bool {
		ai, aok := arrayIndex(ms[i].Key)
		bi, bok := arrayIndex(ms[j].Key)
		switch {
		case aok && bok:
			return ai < bi
		case aok:
			return true
		default:
			return false
		}
	})
}

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

// number scans the strict JSON number grammar and converts with round-to-nearest (overflow gives ±Inf
// like JS; "-0" keeps its sign).
func (p *parser) number() (float64, error) {
	start := p.i
	s := p.s
	i := p.i
	if s[i] == '-' {
		i++
	}
	if i >= len(s) {
		p.i = i
		return 0, p.errorf("no number after minus sign")
	}
	switch {
	case s[i] == '0':
		i++
	case s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		p.i = i
		return 0, p.errorf("no number after minus sign")
	}
	if i < len(s) && s[i] == '.' {
		i++
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == d {
			p.i = i
			return 0, p.errorf("unterminated fractional number")
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == d {
			p.i = i
			return 0, p.errorf("exponent part is missing a number")
		}
	}
	p.i = i
	f := parseNumber(s[start:i])
	if p.strict && math.Abs(f) >= 1<<53 && !math.IsInf(f, 0) && !sameInteger(s[start:i], f) {
		// JSON.parse would round it, so what the log keeps would not be what was written (as for -0 and
		// 1e400, which CheckLossless refuses)
		p.i = start
		return 0, p.errorf("integer %s is beyond JavaScript's safe integers and would be kept as %s (write it as a string)", s[start:i], FormatNumber(f))
	}
	return f, nil
}

// sameInteger reports whether lexeme, when written as an integer (digits only), is exactly f. A fraction
// or an exponent says the writer meant a double, which every JSON reader rounds alike.
func sameInteger(lexeme []byte, f float64) bool {
	for i, c := range lexeme {
		if (c < '0' || c > '9') && !(i == 0 && c == '-') {
			return true
		}
	}
	r, ok := new(big.Rat).SetString(string(lexeme))
	if !ok {
		return true
	}
	exact := new(big.Rat)
	exact.SetFloat64(f)
	return r.Cmp(exact) == 0
}

// parseNumber converts a lexeme already known to match the JSON number grammar.
func parseNumber(lexeme []byte) float64 {
	// Small integers are the overwhelming majority (seq, time, indexes): convert them directly.
	if len(lexeme) <= 15 {
		neg := lexeme[0] == '-'
		digits := lexeme
		if neg {
			digits = lexeme[1:]
		}
		var v int64
		simple := true
		for _, c := range digits {
			if c < '0' || c > '9' {
				simple = false
				break
			}
			v = v*10 + int64(c-'0')
		}
		if simple {
			f := float64(v)
			if neg {
				f = -f
			}
			return f
		}
	}
	f, err := strconv.ParseFloat(string(lexeme), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		// Unreachable for grammar-checked input; keep JS's NaN-free behaviour by failing loudly.
		panic("event: number lexeme rejected by strconv: " + string(lexeme))
	}
	return f
}

func hexVal(c byte) (uint16, bool) {
	switch {
	case c >= '0' && c <= '9':
		return uint16(c - '0'), true
	case c >= 'a' && c <= 'f':
		return uint16(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return uint16(c-'A') + 10, true
	}
	return 0, false
}

func hex4(s []byte) (uint16, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var u uint16
	for k := 0; k < 4; k++ {
		h, ok := hexVal(s[k])
		if !ok {
			return 0, false
		}
		u = u<<4 | h
	}
	return u, true
}

// appendWTF8 encodes one UTF-16 code unit or code point; surrogates get their generalized 3-byte form.
func appendWTF8(dst []byte, r rune) []byte {
	if r >= 0xD800 && r <= 0xDFFF {
		return append(dst, 0xED, byte(0x80|(r>>6)&0x3F), byte(0x80|r&0x3F))
	}
	return utf8.AppendRune(dst, r)
}

// str scans a string token starting at '"' and returns its WTF-8 contents.
func (p *parser) str() (string, error) {
	p.i++ // opening quote
	start := p.i
	s := p.s
	i := p.i
	for i < len(s) {
		c := s[i]
		if c == '"' {
			p.i = i + 1
			return string(s[start:i]), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			p.i = i
			return "", p.errorf("bad control character in string literal")
		}
		i++
	}
	buf := append(p.buf[:0], s[start:i]...)
	for {
		if i >= len(s) {
			p.i = i
			return "", p.errorf("unterminated string")
		}
		c := s[i]
		switch {
		case c == '"':
			p.i = i + 1
			p.buf = buf
			return string(buf), nil
		case c < 0x20:
			p.i = i
			return "", p.errorf("bad control character in string literal")
		case c != '\\':
			buf = append(buf, c)
			i++
			continue
		}
		// escape
		if i+1 >= len(s) {
			p.i = i
			return "", p.errorf("unterminated string")
		}
		e := s[i+1]
		i += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			u, ok := hex4(s[i:])
			if !ok {
				p.i = i
				return "", p.errorf("bad Unicode escape")
			}
			i += 4
			r := rune(u)
			if u >= 0xD800 && u <= 0xDBFF && i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
				if lo, ok := hex4(s[i+2:]); ok && lo >= 0xDC00 && lo <= 0xDFFF {
					r = 0x10000 + (rune(u)-0xD800)<<10 + (rune(lo) - 0xDC00)
					i += 6
				}
			}
			buf = appendWTF8(buf, r)
		default:
			p.i = i - 1
			return "", p.errorf("bad escaped character")
		}
	}
}

// Stringify returns JSON.stringify(v).
func Stringify(v Value) []byte {
	return AppendStringify(nil, v)
}

// AppendStringify appends JSON.stringify(v) to dst: no whitespace, numbers as FormatNumber with
// non-finite values as null, strings escaped the minimal JS way.
func AppendStringify(dst []byte, v Value) []byte {
	switch v.Kind {
	case KindNull:
		return append(dst, "null"...)
	case KindBool:
		if v.Bool {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case KindNumber:
		if math.IsInf(v.Num, 0) || math.IsNaN(v.Num) {
			return append(dst, "null"...)
		}
		return AppendNumber(dst, v.Num)
	case KindString:
		return AppendQuote(dst, v.Str)
	case KindArray:
		dst = append(dst, '[')
		for i := range v.Arr {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendStringify(dst, v.Arr[i])
		}
		return append(dst, ']')
	case KindObject:
		dst = append(dst, '{')
		for i := range v.Obj {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendQuote(dst, v.Obj[i].Key)
			dst = append(dst, ':')
			dst = AppendStringify(dst, v.Obj[i].Value)
		}
		return append(dst, '}')
	}
	return append(dst, "null"...)
}

const lowerHex = "0123456789abcdef"

// AppendQuote appends s (WTF-8) as JSON.stringify prints a string. A high surrogate immediately followed
// by a low one is one JS character and prints as such; other surrogates print as lowercase \u escapes.
// Bytes that are not WTF-8 at all (impossible in a JS string) print as U+FFFD.
func AppendQuote(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < 0x80 {
			i++
			continue
		}
		if c < 0x80 {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"':
				dst = append(dst, '\\', '"')
			case '\\':
				dst = append(dst, '\\', '\\')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', lowerHex[c>>4], lowerHex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError || size != 1 {
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		if u, ok := surrogateAt(s, i); ok {
			if u < 0xDC00 {
				if lo, ok := surrogateAt(s, i+3); ok && lo >= 0xDC00 {
					dst = utf8.AppendRune(dst, 0x10000+(rune(u)-0xD800)<<10+(rune(lo)-0xDC00))
					i += 6
					start = i
					continue
				}
			}
			dst = append(dst, '\\', 'u', lowerHex[u>>12], lowerHex[u>>8&0xF], lowerHex[u>>4&0xF], lowerHex[u&0xF])
			i += 3
		} else {
			dst = utf8.AppendRune(dst, utf8.RuneError)
			i++
		}
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// surrogateAt decodes the WTF-8 encoding of a surrogate code unit at s[i:], if there is one.
func surrogateAt[S string | []byte](s S, i int) (uint16, bool) {
	if i+3 > len(s) || s[i] != 0xED || s[i+1] < 0xA0 || s[i+1] > 0xBF || s[i+2] < 0x80 || s[i+2] > 0xBF {
		return 0, false
	}
	return 0xD000 | uint16(s[i+1]&0x3F)<<6 | uint16(s[i+2]&0x3F), true
}

// FormatNumber returns JS Number.prototype.toString() (radix 10) of f.
func FormatNumber(f float64) string {
	var buf [32]byte
	return string(AppendNumber(buf[:0], f))
}

// AppendNumber appends FormatNumber(f) to dst without allocating.
//
// The shortest round-trip digits come from strconv (the same digit choice ECMAScript Number::toString
// makes); only the layout is JS-specific: plain decimals for exponents in (-7, 21], exponent form
// "d.ddde+n" otherwise.
func AppendNumber(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	case f == 0:
		return append(dst, '0')
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	if f < 1e15 && f == math.Trunc(f) {
		return strconv.AppendInt(dst, int64(f), 10)
	}
	var tmp [32]byte
	e := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64) // d[.ddd]e±xx
	var digits [24]byte
	k := 0
	j := 0
	for ; e[j] != 'e'; j++ {
		if e[j] != '.' {
			digits[k] = e[j]
			k++
		}
	}
	j++
	expNeg := e[j] == '-'
	j++
	exp := 0
	for ; j < len(e); j++ {
		exp = exp*10 + int(e[j]-'0')
	}
	if expNeg {
		exp = -exp
	}
	n := exp + 1 // value = 0.d1d2...dk × 10^n
	d := digits[:k]
	switch {
	case k <= n && n <= 21:
		dst = append(dst, d...)
		for z := 0; z < n-k; z++ {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, d[:n]...)
		dst = append(dst, '.')
		dst = append(dst, d[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for z := 0; z < -n; z++ {
			dst = append(dst, '0')
		}
		dst = append(dst, d...)
	default:
		dst = append(dst, d[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, d[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}

// MaxSafeInteger is Number.MAX_SAFE_INTEGER.
const MaxSafeInteger = 1<<53 - 1

// IsSafeInteger is Number.isSafeInteger.
func IsSafeInteger(f float64) bool {
	return !math.IsInf(f, 0) && !math.IsNaN(f) && f == math.Trunc(f) && math.Abs(f) <= MaxSafeInteger
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
