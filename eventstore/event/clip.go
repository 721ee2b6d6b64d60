package event

// ParseClipped parses b like Parse, except that a string value (never a member name) longer than limit
// bytes keeps only its first limit bytes, and its whole length in Num. The parse reads every byte but
// decodes only what it keeps, so a record holding a 50 MB message costs its reader the head it shows,
// not the 50 MB of a Go string. limit <= 0 keeps every string whole.
//
// The head is cut at a byte, not a character: it may end inside a character (or inside what one escape
// decodes to), and a reader that shows it cuts it again where it likes. A clipped Value is for reading
// texts; re-encoded, it would say something other than the log.
func ParseClipped(b []byte, limit int) (Value, error) {
	p := getParser(parser{s: DecodeUTF8(b), clip: limit})
	defer putParser(p)
	return p.whole()
}

// Clipped parses the record like ParseClipped: strings longer than limit bytes keep their first limit
// bytes and their whole length (StrLen).
func (e Event) Clipped(limit int) (Value, error) { return ParseClipped(e.Raw, limit) }

// StrLen is the length in bytes of a string value's whole text: len(v.Str), or for a string
// ParseClipped cut, the length it had. 0 for a value that is no string.
func StrLen(v Value) int {
	if v.Kind != KindString {
		return 0
	}
	return max(len(v.Str), int(v.Num))
}

// clippedStr scans the string token at p.i as str does, keeping the first p.clip bytes of its contents
// and counting the rest.
func (p *parser) clippedStr() (Value, error) {
	s := p.s
	i := p.i + 1
	buf := p.buf[:0]
	total := 0
	var one [utfMax]byte
	for {
		// the bytes up to the next quote, backslash or control character are taken as they are
		j := i
		for j < len(s) && !strSpecial[s[j]] {
			j++
		}
		if room := p.clip - len(buf); room > 0 {
			buf = append(buf, s[i:min(j, i+room)]...)
		}
		total += j - i
		i = j
		if i >= len(s) {
			p.i = i
			return Value{}, p.errorf("unterminated string")
		}
		switch c := s[i]; {
		case c == '"':
			p.i = i + 1
			p.buf = buf
			v := Value{Kind: KindString, Str: string(buf)}
			if total > p.clip {
				v.Num = float64(total)
			}
			return v, nil
		case c < 0x20:
			p.i = i
			return Value{}, p.errorf("bad control character in string literal")
		}
		dec, next, err := p.escape(one[:0], i)
		if err != nil {
			return Value{}, err
		}
		if room := p.clip - len(buf); room > 0 {
			buf = append(buf, dec[:min(len(dec), room)]...)
		}
		total += len(dec)
		i = next
	}
}

// utfMax is the most bytes one escape decodes to: a surrogate pair's code point.
const utfMax = 4

// strSpecial are the bytes that end a run of a string's contents taken as they are.
var strSpecial = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// escape decodes the escape starting at s[i] == '\\' onto dst, as str does, and returns the index past it.
func (p *parser) escape(dst []byte, i int) ([]byte, int, error) {
	s := p.s
	if i+1 >= len(s) {
		p.i = i
		return nil, 0, p.errorf("unterminated string")
	}
	e := s[i+1]
	i += 2
	switch e {
	case '"', '\\', '/':
		return append(dst, e), i, nil
	case 'b':
		return append(dst, '\b'), i, nil
	case 'f':
		return append(dst, '\f'), i, nil
	case 'n':
		return append(dst, '\n'), i, nil
	case 'r':
		return append(dst, '\r'), i, nil
	case 't':
		return append(dst, '\t'), i, nil
	case 'u':
		u, ok := hex4(s[i:])
		if !ok {
			p.i = i
			return nil, 0, p.errorf("bad Unicode escape")
		}
		i += 4
		r := rune(u)
		if u >= 0xD800 && u <= 0xDBFF && i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
			if lo, ok := hex4(s[i+2:]); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				r = 0x10000 + (rune(u)-0xD800)<<10 + (rune(lo) - 0xDC00)
				i += 6
			}
		}
		return appendWTF8(dst, r), i, nil
	}
	p.i = i - 1
	return nil, 0, p.errorf("bad escaped character")
}
