package event

import (
	"bytes"
	"unicode/utf8"
)

// Canonical returns JSON.stringify(JSON.parse(b)). When b is already canonical it returns b itself (same
// backing array) without allocating, which is the common case for harness-written lines.
//
// A single pass proves b canonical: no whitespace, every number spelled as FormatNumber spells it,
// strings escaped exactly as Stringify escapes them, valid UTF-8 without surrogates, no duplicate keys and
// array-index keys first in ascending order. Anything else takes the slow path through Parse and
// Stringify, so the two always agree (including on errors).
func Canonical(b []byte) ([]byte, error) {
	if isCanonical(b) {
		return b, nil
	}
	v, err := Parse(b)
	if err != nil {
		return nil, err
	}
	return Stringify(v), nil
}

// IsCanonical reports whether b is exactly JSON.stringify(JSON.parse(b)).
func IsCanonical(b []byte) bool { return isCanonical(b) }

func isCanonical(b []byte) bool {
	c := canonChecker{s: b}
	if !c.value(0) {
		return false
	}
	return c.i == len(b)
}

type canonChecker struct {
	s []byte
	i int
}

func (c *canonChecker) value(depth int) bool {
	if c.i >= len(c.s) {
		return false
	}
	switch ch := c.s[c.i]; {
	case ch == '"':
		_, ok := c.str()
		return ok
	case ch == '{':
		if depth >= MaxDepth {
			return false
		}
		return c.object(depth + 1)
	case ch == '[':
		if depth >= MaxDepth {
			return false
		}
		return c.array(depth + 1)
	case ch == '-' || (ch >= '0' && ch <= '9'):
		return c.number()
	case ch == 't':
		return c.word("true")
	case ch == 'f':
		return c.word("false")
	case ch == 'n':
		return c.word("null")
	}
	return false
}

func (c *canonChecker) word(w string) bool {
	if len(c.s)-c.i >= len(w) && string(c.s[c.i:c.i+len(w)]) == w {
		c.i += len(w)
		return true
	}
	return false
}

func (c *canonChecker) array(depth int) bool {
	c.i++
	if c.i < len(c.s) && c.s[c.i] == ']' {
		c.i++
		return true
	}
	for {
		if !c.value(depth) {
			return false
		}
		if c.i >= len(c.s) {
			return false
		}
		switch c.s[c.i] {
		case ',':
			c.i++
		case ']':
			c.i++
			return true
		default:
			return false
		}
	}
}

// smallKeys is how many keys per object are checked for duplicates by direct comparison before
// switching to a set; event objects rarely have more than a handful.
const smallKeys = 24

// ObjectKeys checks the member names of one object, in order, as a canonical record holds them: no name
// twice, and the array-index names first and ascending (JavaScript lists an object's integer keys first).
// Names are raw canonical string contents, all in one buffer: a canonical string has one spelling, so raw
// bytes compare like decoded names. The zero value is an object with no names yet. It is small (records
// hold many objects, and each one's checker is zeroed): a name is kept as its place in the buffer.
type ObjectKeys struct {
	small     [smallKeys]uint64 // the first non-index names, each start<<24 | length
	set       map[string]struct{}
	n, named  int // names, and non-index names, seen
	pastIndex bool
	lastIndex uint32
}

// Add takes the object's next name, s[start:end], and reports whether the names so far are still
// canonical. Every name of the object is in the same s.
func (k *ObjectKeys) Add(s []byte, start, end int) bool {
	key := s[start:end]
	first := k.n == 0
	k.n++
	if len(key) > 0 && key[0] >= '0' && key[0] <= '9' {
		if idx, isIdx := arrayIndex(key); isIdx {
			if k.pastIndex || (!first && idx <= k.lastIndex) {
				return false
			}
			k.lastIndex = idx
			return true
		}
	}
	k.pastIndex = true
	named := k.named
	k.named++
	if k.set == nil && len(key) >= 1<<24 {
		k.spill(s, named) // too long to be kept as a place
	}
	if k.set != nil {
		if _, dup := k.set[string(key)]; dup {
			return false
		}
		k.set[string(key)] = struct{}{}
		return true
	}
	n := uint64(len(key))
	for _, at := range k.small[:named] {
		if at&(1<<24-1) == n && string(s[at>>24:at>>24+n]) == string(key) {
			return false
		}
	}
	if named < smallKeys {
		k.small[named] = uint64(start)<<24 | uint64(len(key))
		return true
	}
	k.spill(s, named)
	k.set[string(key)] = struct{}{}
	return true
}

// spill moves the first named names to a set, which checks every later name.
func (k *ObjectKeys) spill(s []byte, named int) {
	k.set = make(map[string]struct{}, 2*smallKeys)
	for _, at := range k.small[:named] {
		k.set[string(s[at>>24:at>>24+at&(1<<24-1)])] = struct{}{}
	}
}

func (c *canonChecker) object(depth int) bool {
	c.i++
	if c.i < len(c.s) && c.s[c.i] == '}' {
		c.i++
		return true
	}
	var keys ObjectKeys
	for {
		if c.i >= len(c.s) || c.s[c.i] != '"' {
			return false
		}
		start := c.i + 1
		if _, ok := c.str(); !ok || !keys.Add(c.s, start, c.i-1) {
			return false
		}
		if c.i >= len(c.s) || c.s[c.i] != ':' {
			return false
		}
		c.i++
		if !c.value(depth) {
			return false
		}
		if c.i >= len(c.s) {
			return false
		}
		switch c.s[c.i] {
		case ',':
			c.i++
		case '}':
			c.i++
			return true
		default:
			return false
		}
	}
}

// CheckValue proves the JSON value at s[i] canonical, as a part of a canonical record whose containers
// around it nest depth deep, and returns the index just past it; -1 when it is not canonical (or not a
// value). A reader that walks a record member by member checks the parts it does not read with it, and so
// proves the record canonical without a pass of its own (with ObjectKeys for the names of the objects it
// walks).
func CheckValue(s []byte, i, depth int) int {
	c := canonChecker{s: s, i: i}
	if !c.value(depth) {
		return -1
	}
	return c.i
}

// number accepts a number lexeme only if FormatNumber would print its value the same way.
func (c *canonChecker) number() bool {
	s := c.s
	start := c.i
	i := c.i
	neg := false
	if s[i] == '-' {
		neg = true
		i++
	}
	intStart := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	intLen := i - intStart
	if intLen == 0 {
		return false
	}
	plain := i >= len(s) || (s[i] != '.' && s[i] != 'e' && s[i] != 'E')
	// Fast path: integers below 1e15 are exact and print as their own digits; only "0" may start with 0,
	// and "-0" prints as "0".
	if plain && intLen <= 15 {
		if s[intStart] == '0' && (intLen > 1 || neg) {
			return false
		}
		c.i = i
		return true
	}
	// General path: scan the whole lexeme by the JSON grammar, then compare with the JS spelling.
	if s[intStart] == '0' && intLen > 1 {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == d {
			return false
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
			return false
		}
	}
	lexeme := s[start:i]
	if len(lexeme) > 40 {
		return false // longer than any FormatNumber output
	}
	f := parseNumber(lexeme)
	var buf [40]byte
	if f == 0 || f != f || f-f != 0 { // zero (sign or not: only "0" handled above), NaN, ±Inf
		return false
	}
	if !bytes.Equal(AppendNumber(buf[:0], f), lexeme) {
		return false
	}
	c.i = i
	return true
}

// plainASCII marks the bytes a canonical string holds verbatim with no further checks.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str validates a canonical string token at c.i and returns its raw contents (between the quotes).
func (c *canonChecker) str() ([]byte, bool) {
	s := c.s
	i := c.i + 1
	start := i
	for i < len(s) {
		ch := s[i]
		if plainASCII[ch] {
			i++
			continue
		}
		switch {
		case ch == '"':
			c.i = i + 1
			return s[start:i], true
		case ch == '\\':
			if i+1 >= len(s) {
				return nil, false
			}
			switch s[i+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(s) {
					return nil, false
				}
				h := s[i+2 : i+6]
				for _, x := range h {
					if !(x >= '0' && x <= '9' || x >= 'a' && x <= 'f') {
						return nil, false
					}
				}
				u, _ := hex4(h)
				switch {
				case u < 0x20:
					if u == '\b' || u == '\f' || u == '\n' || u == '\r' || u == '\t' {
						return nil, false
					}
				case u >= 0xD800 && u <= 0xDBFF:
					// A lone high surrogate: canonical only if no low surrogate escape follows.
					if i+12 <= len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
						if lo, ok := hex4(s[i+8 : i+12]); ok && lo >= 0xDC00 && lo <= 0xDFFF {
							return nil, false
						}
					}
				case u >= 0xDC00 && u <= 0xDFFF:
					// A low surrogate is lone here: a preceding high escape would have been rejected.
				default:
					return nil, false
				}
				i += 6
			default:
				return nil, false
			}
		case ch < 0x20:
			return nil, false
		case ch < 0x80:
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				return nil, false
			}
			i += size
		}
	}
	return nil, false
}

// Lookup returns the raw bytes of the member reached by following keys through objects of canonical JSON
// raw (as produced by Stringify/Canonical). No allocation. With no keys it returns raw itself.
func Lookup(raw []byte, keys ...string) ([]byte, bool) {
	cur := raw
	for _, key := range keys {
		v, ok := lookupMember(cur, key)
		if !ok {
			return nil, false
		}
		cur = v
	}
	return cur, true
}

// lookupMember finds key in the canonical object obj (which must span exactly the object).
func lookupMember(obj []byte, key string) ([]byte, bool) {
	if len(obj) < 2 || obj[0] != '{' {
		return nil, false
	}
	i := 1
	if obj[i] == '}' {
		return nil, false
	}
	for i < len(obj) {
		if obj[i] != '"' {
			return nil, false
		}
		kEnd := skipString(obj, i)
		if kEnd < 0 || kEnd >= len(obj) || obj[kEnd] != ':' {
			return nil, false
		}
		match := rawKeyEquals(obj[i+1:kEnd-1], key)
		vStart := kEnd + 1
		vEnd := skipValue(obj, vStart)
		if vEnd < 0 || vEnd >= len(obj) {
			return nil, false
		}
		if match {
			return obj[vStart:vEnd], true
		}
		switch obj[vEnd] {
		case ',':
			i = vEnd + 1
		default:
			return nil, false
		}
	}
	return nil, false
}

// rawKeyEquals compares the canonical (escaped) contents of a JSON string with a WTF-8 key.
func rawKeyEquals(raw []byte, key string) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == key
	}
	var tmp [64]byte
	dec := unescapeCanonical(tmp[:0], raw)
	return string(dec) == key
}

// CanonicalString is the string that the contents (between the quotes) of a canonical string token
// stand for, as Parse decodes it: a reader that has proved a token canonical decodes it without Parse.
func CanonicalString(body []byte) string {
	return string(unescapeCanonical(make([]byte, 0, len(body)), body))
}

// unescapeCanonical decodes the escapes a canonical string may contain.
func unescapeCanonical(dst, raw []byte) []byte {
	for i := 0; i < len(raw); i++ {
		ch := raw[i]
		if ch != '\\' || i+1 >= len(raw) {
			dst = append(dst, ch)
			continue
		}
		i++
		switch raw[i] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			if u, ok := hex4(raw[i+1:]); ok {
				dst = appendWTF8(dst, rune(u))
				i += 4
			}
		default:
			dst = append(dst, raw[i])
		}
	}
	return dst
}

// skipString returns the index just past the string token starting at s[i] == '"', or -1.
//
// It looks for the closing quote with bytes.IndexByte, which scans many bytes at a time: message texts
// and tool arguments are most of a log's bytes, and a loop over them byte by byte was most of the cost
// of skipping a value. A quote preceded by an odd run of backslashes is escaped, and the search goes on.
func skipString(s []byte, i int) int {
	for j := i + 1; j < len(s); {
		k := bytes.IndexByte(s[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		bs := 0
		for b := j - 1; b > i && s[b] == '\\'; b-- {
			bs++
		}
		if bs%2 == 0 {
			return j + 1
		}
		j++
	}
	return -1
}

// SkipValue returns the index just past the canonical JSON value starting at s[i], or -1.
func SkipValue(s []byte, i int) int { return skipValue(s, i) }

// skipValue returns the index just past the canonical JSON value starting at s[i], or -1.
func skipValue(s []byte, i int) int {
	if i >= len(s) {
		return -1
	}
	switch s[i] {
	case '"':
		return skipString(s, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(s); j++ {
			switch s[j] {
			case '"':
				j = skipString(s, j)
				if j < 0 {
					return -1
				}
				j--
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default:
		j := i
		for j < len(s) && s[j] != ',' && s[j] != '}' && s[j] != ']' {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// Members walks the members of the canonical object starting at raw[at]: fn gets each member's raw
// (still escaped) name and the index where its value starts (an index of raw), and returns the index just past the value
// (SkipValue, or whatever reading it found) or -1 to stop. Members returns the index just past the
// object, or -1 when fn stopped or raw holds no object there. Unlike EachMember it lets fn read a value
// as it goes, so that a reader descending into nested objects reads each byte once.
func Members(raw []byte, at int, fn func(name []byte, value int) int) int {
	if at+1 >= len(raw) || raw[at] != '{' {
		return -1
	}
	if raw[at+1] == '}' {
		return at + 2
	}
	for i := at + 1; i < len(raw); {
		if raw[i] != '"' {
			return -1
		}
		kEnd := skipString(raw, i)
		if kEnd < 0 || kEnd+1 >= len(raw) || raw[kEnd] != ':' {
			return -1 // fn is never given an index past raw
		}
		vEnd := fn(raw[i+1:kEnd-1], kEnd+1)
		if vEnd <= kEnd || vEnd >= len(raw) {
			return -1
		}
		switch raw[vEnd] {
		case ',':
			i = vEnd + 1
		case '}':
			return vEnd + 1
		default:
			return -1
		}
	}
	return -1
}

// EachMember calls fn with the raw (still escaped) name and the raw value of each member of the canonical
// object raw, in order, without allocating; it stops early when fn returns false. It reports false when raw
// is not an object.
func EachMember(raw []byte, fn func(name, value []byte) bool) bool {
	if len(raw) < 2 || raw[0] != '{' {
		return false
	}
	if raw[1] == '}' {
		return true
	}
	for i := 1; i < len(raw); {
		if raw[i] != '"' {
			return false
		}
		kEnd := skipString(raw, i)
		if kEnd < 0 || kEnd >= len(raw) || raw[kEnd] != ':' {
			return false
		}
		vEnd := skipValue(raw, kEnd+1)
		if vEnd < 0 || vEnd >= len(raw) {
			return false
		}
		if !fn(raw[i+1:kEnd-1], raw[kEnd+1:vEnd]) {
			return true
		}
		if raw[vEnd] != ',' {
			return true
		}
		i = vEnd + 1
	}
	return true
}
