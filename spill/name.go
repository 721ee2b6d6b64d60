package spill

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxNameBytes is the longest name NameSegment returns; longer encodings are cut and made unique again with
// a hash, so that any data-derived name fits NAME_MAX (255) with room for a prefix such as "<row>-".
const MaxNameBytes = 200

// nameHashHex is how many hex digits of SHA-256 close a cut name: 183 + "~" + 16 = 200.
const nameHashHex = 16

// NameSegment encodes a data-derived string (a session id, event type, call id, compaction id) as one file
// name, as docs/tree.md "Names" prescribes: upstream encodeSegment over UTF-16 code units — [A-Za-z0-9._-]
// kept, every other unit (including "~") written as "~" and four uppercase hex digits, "." and ".." escaped
// — with the empty string becoming "~"; an encoding longer than MaxNameBytes is cut to 183 bytes followed by
// "~" and the first 16 hex digits of the SHA-256 of s itself (its bytes as given, i.e. WTF-8 for event
// strings).
//
// s is read as WTF-8, the form event strings take, so a lone surrogate encodes as its own unit exactly as
// the harness would; any other invalid byte stands for U+FFFD. The mount uses this for every name it
// derives from data; it does not depend on the JSONL backend's EncodeSegment (spill sits below the
// backends), and a test keeps the two in agreement.
func NameSegment(s string) string {
	var enc string
	switch s {
	case "":
		return "~"
	case ".":
		enc = "~002E"
	case "..":
		enc = "~002E~002E"
	default:
		enc = escapeUnits(s)
	}
	if len(enc) <= MaxNameBytes {
		return enc
	}
	sum := sha256.Sum256([]byte(s))
	return enc[:MaxNameBytes-1-nameHashHex] + "~" + hex.EncodeToString(sum[:])[:nameHashHex]
}

func escapeUnits(s string) string {
	safe := true
	for i := 0; i < len(s) && safe; i++ {
		safe = isSafeByte(s[i])
	}
	if safe {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if isSafeByte(c) {
				b.WriteByte(c)
			} else {
				writeUnit(&b, uint16(c))
			}
			i++
			continue
		}
		// WTF-8 lone surrogate: ED A0..BF xx is one UTF-16 unit D800..DFFF.
		if c == 0xED && i+2 < len(s) && s[i+1] >= 0xA0 && s[i+1] <= 0xBF && s[i+2]&0xC0 == 0x80 {
			writeUnit(&b, 0xD000|uint16(s[i+1]&0x3F)<<6|uint16(s[i+2]&0x3F))
			i += 3
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			writeUnit(&b, uint16(hi))
			writeUnit(&b, uint16(lo))
		} else {
			writeUnit(&b, uint16(r)) // includes U+FFFD for an invalid byte
		}
		i += size
	}
	return b.String()
}

func isSafeByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

func writeUnit(b *strings.Builder, u uint16) {
	const hexDigits = "0123456789ABCDEF"
	b.WriteByte('~')
	b.WriteByte(hexDigits[u>>12])
	b.WriteByte(hexDigits[u>>8&0xF])
	b.WriteByte(hexDigits[u>>4&0xF])
	b.WriteByte(hexDigits[u&0xF])
}

// DecodeName inverts NameSegment for names it produced without cutting: "~XXXX" escapes are UTF-16 code
// units (a pair makes one astral character, a lone surrogate stays WTF-8), "~" alone is the empty
// string. ok is false for any name NameSegment would not produce from the result (a raw unsafe
// character, lowercase hex, a cut name), so a name that decodes is the name the decoded id is listed under.
func DecodeName(name string) (string, bool) {
	if name == "~" {
		return "", true
	}
	var units []uint16
	for i := 0; i < len(name); {
		c := name[i]
		if c != '~' {
			if !isSafeByte(c) {
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
			switch {
			case h >= '0' && h <= '9':
				u = u<<4 | uint16(h-'0')
			case h >= 'A' && h <= 'F':
				u = u<<4 | uint16(h-'A'+10)
			default:
				return "", false
			}
		}
		units = append(units, u)
		i += 5
	}
	var b strings.Builder
	for i := 0; i < len(units); i++ {
		u := units[i]
		switch {
		case utf16.IsSurrogate(rune(u)) && u < 0xDC00 && i+1 < len(units) && units[i+1] >= 0xDC00 && units[i+1] <= 0xDFFF:
			b.WriteRune(utf16.DecodeRune(rune(u), rune(units[i+1])))
			i++
		case utf16.IsSurrogate(rune(u)):
			b.WriteByte(0xED) // WTF-8 of a lone surrogate, as event strings keep it
			b.WriteByte(0x80 | byte(u>>6&0x3F))
			b.WriteByte(0x80 | byte(u&0x3F))
		default:
			b.WriteRune(rune(u))
		}
	}
	id := b.String()
	if NameSegment(id) != name {
		return "", false
	}
	return id, true
}
