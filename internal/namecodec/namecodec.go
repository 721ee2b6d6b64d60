// Package namecodec is the harness's escaping of strings into path segments (spec/jsonl.md §1.2-1.3):
// encodeSegment, which names a session's directory after its id, and projectKey, which names a project's
// directory after its cwd. The harness derives them from JavaScript strings, i.e. sequences of UTF-16 code
// units, and a reader that computes them differently would not find, or would refuse, the harness's
// sessions; so both walk UTF-16 units, not bytes or runes. The JSONL backend names its directories with
// it, the store watcher decodes them, and the mount names everything it derives from data with it (through
// spill.NameSegment, which adds the mount's cap), so the store's names and the mount's always agree.
package namecodec

import (
	"errors"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// projectKeyMax is the slug length the harness keeps: with the `--` wrapping the name stays within the
// 255-byte component limit of common filesystems.
const projectKeyMax = 251

var (
	errEmptySegment     = errors.New("cannot encode an empty path segment")
	errEmptyProjectPath = errors.New("cannot encode an empty project path")
)

// forEachUnit feeds fn the UTF-16 code units of s as JavaScript would hold them. s may carry lone surrogates
// in WTF-8 form (their generalized 3-byte UTF-8 encoding, e.g. "\xed\xa0\x80" for U+D800), which is how this
// project keeps JS strings that are not valid Unicode; each stands for its one unit. Any other invalid byte
// sequence becomes U+FFFD per maximal subpart, as the harness's UTF-8 decoding (WHATWG) would have made it.
func forEachUnit(s string, fn func(u uint16)) {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			fn(uint16(c))
			i++
			continue
		}
		if c == 0xED && i+2 < len(s) && s[i+1] >= 0xA0 && s[i+1] <= 0xBF && s[i+2]&0xC0 == 0x80 {
			fn(0xD000 | uint16(s[i+1]&0x3F)<<6 | uint16(s[i+2]&0x3F))
			i += 3
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			fn(utf8.RuneError)
			i += maximalSubpart(s[i:])
			continue
		}
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			fn(uint16(hi))
			fn(uint16(lo))
		} else {
			fn(uint16(r))
		}
		i += size
	}
}

// maximalSubpart is how many bytes of the invalid sequence at the start of s one U+FFFD replaces under the
// WHATWG UTF-8 decoder: the lead byte plus the continuation bytes that were still acceptable for it.
func maximalSubpart(s string) int {
	lo, hi, need := byte(0x80), byte(0xBF), 0
	switch c := s[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		lo, need = 0xA0, 2
	case c == 0xED:
		hi, need = 0x9F, 2
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		lo, need = 0x90, 3
	case c == 0xF4:
		hi, need = 0x8F, 3
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	default:
		return 1
	}
	n := 1
	for ; n <= need && n < len(s); n++ {
		if s[n] < lo || s[n] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return n
}

// isSafeUnit is the harness's /^[A-Za-z0-9._-]$/ (which never matches `~`, the escape character).
func isSafeUnit(u uint16) bool {
	return u >= 'a' && u <= 'z' || u >= 'A' && u <= 'Z' || u >= '0' && u <= '9' || u == '.' || u == '_' || u == '-'
}

const upperHex = "0123456789ABCDEF"

// appendEscape writes the harness's `~XXXX` (4 uppercase hex digits) for one code unit.
func appendEscape(b *strings.Builder, u uint16) {
	b.WriteByte('~')
	b.WriteByte(upperHex[u>>12])
	b.WriteByte(upperHex[u>>8&0xF])
	b.WriteByte(upperHex[u>>4&0xF])
	b.WriteByte(upperHex[u&0xF])
}

// allSafe reports whether s needs no escaping at all, the common case for ids.
func allSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isSafeUnit(uint16(s[i])) {
			return false
		}
	}
	return true
}

// EncodeSegment is upstream encodeSegment over UTF-16 code units (spec §1.3): an injective escape of a session
// id into one path segment that can never be `.` or `..`. It errors "cannot encode an empty path segment".
func EncodeSegment(raw string) (string, error) {
	switch raw {
	case "":
		return "", errEmptySegment
	case ".":
		return "~002E", nil
	case "..":
		return "~002E~002E", nil
	}
	if allSafe(raw) {
		return raw, nil
	}
	var b strings.Builder
	b.Grow(len(raw) + 8)
	forEachUnit(raw, func(u uint16) {
		if isSafeUnit(u) {
			b.WriteByte(byte(u))
		} else {
			appendEscape(&b, u)
		}
	})
	return b.String(), nil
}

// DecodeSegment inverts EncodeSegment: it returns ok=false for names EncodeSegment could never produce
// (empty, stray characters, lowercase or short escapes, escapes of safe characters, a bare `.`), which
// discovery must skip rather than misattribute. Lone surrogates come back in WTF-8 form.
func DecodeSegment(name string) (string, bool) {
	if name == "" {
		return "", false
	}
	if allSafe(name) {
		return name, name != "." && name != ".."
	}
	units := make([]uint16, 0, len(name))
	for i := 0; i < len(name); {
		c := name[i]
		if c != '~' {
			if !isSafeUnit(uint16(c)) {
				return "", false
			}
			units = append(units, uint16(c))
			i++
			continue
		}
		if i+5 > len(name) {
			return "", false
		}
		var u uint16
		for _, h := range []byte(name[i+1 : i+5]) {
			d := strings.IndexByte(upperHex, h)
			if d < 0 {
				return "", false
			}
			u = u<<4 | uint16(d)
		}
		units = append(units, u)
		i += 5
	}
	s := unitsToWTF8(units)
	if again, err := EncodeSegment(s); err != nil || again != name {
		return "", false
	}
	return s, true
}

// unitsToWTF8 turns UTF-16 units into a Go string, pairing surrogates where they pair and keeping lone ones
// as their 3-byte generalized UTF-8 form, the representation forEachUnit reads back.
func unitsToWTF8(units []uint16) string {
	var b strings.Builder
	b.Grow(len(units))
	for i := 0; i < len(units); i++ {
		u := units[i]
		switch {
		case u < 0xD800 || u > 0xDFFF:
			b.WriteRune(rune(u))
		case u <= 0xDBFF && i+1 < len(units) && units[i+1] >= 0xDC00 && units[i+1] <= 0xDFFF:
			b.WriteRune(utf16.DecodeRune(rune(u), rune(units[i+1])))
			i++
		default:
			b.WriteByte(0xE0 | byte(u>>12))
			b.WriteByte(0x80 | byte(u>>6&0x3F))
			b.WriteByte(0x80 | byte(u&0x3F))
		}
	}
	return b.String()
}

// ProjectKey is upstream projectKey(cwd) (spec §1.2): separators `/`, `\` and `:` collapse into one `-` per
// run, other unsafe units are `~XXXX`-escaped, leading dashes go (an empty result is `root`), and the slug is
// cut to 251 characters, possibly inside an escape, before the `--...--` wrap. It is lossy by design. It
// errors "cannot encode an empty project path".
func ProjectKey(cwd string) (string, error) {
	if cwd == "" {
		return "", errEmptyProjectPath
	}
	var b strings.Builder
	b.Grow(len(cwd) + 8)
	sepRun := false
	forEachUnit(cwd, func(u uint16) {
		switch {
		case u == '/' || u == '\\' || u == ':':
			if !sepRun {
				b.WriteByte('-')
			}
			sepRun = true
		case isSafeUnit(u):
			b.WriteByte(byte(u))
			sepRun = false
		default:
			appendEscape(&b, u)
			sepRun = false
		}
	})
	slug := strings.TrimLeft(b.String(), "-")
	if slug == "" {
		slug = "root"
	}
	if len(slug) > projectKeyMax {
		slug = slug[:projectKeyMax]
	}
	return "--" + slug + "--", nil
}
