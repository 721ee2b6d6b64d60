package event

import (
	"math"
	"strconv"
	"unicode/utf8"
)

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
