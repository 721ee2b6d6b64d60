package event

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"unicode/utf8"
)

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
		var err error
		if buf, i, err = p.escape(buf, i); err != nil {
			return "", err
		}
	}
}
