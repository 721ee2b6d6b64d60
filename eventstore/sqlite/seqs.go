package sqlite

import (
	"errors"
)

// SeqsError is the harness's text for a malformed source_event_seqs value.
type SeqsError struct{ Why string }

func (e *SeqsError) Error() string { return "malformed source_event_seqs storage value: " + e.Why }

// EncodeSeqs encodes sourceEventSeqs (§2.4): the first value as an unsigned LEB128 varint, each later one
// as the ZigZag delta from the one before. An empty list is an empty, non-nil slice (an empty BLOB, which
// is not NULL).
func EncodeSeqs(seqs []int64) ([]byte, error) {
	out := make([]byte, 0, len(seqs)+1)
	var prev int64
	for i, v := range seqs {
		if v < 0 || v > maxSafe {
			return nil, errors.New("sourceEventSeqs must contain non-negative safe integers")
		}
		u := uint64(v)
		if i > 0 {
			if v >= prev {
				u = uint64(v-prev) * 2
			} else {
				u = uint64(prev-v)*2 - 1
			}
		}
		for u >= 0x80 {
			out = append(out, byte(u)|0x80)
			u >>= 7
		}
		out = append(out, byte(u))
		prev = v
	}
	return out, nil
}

// DecodeSeqs decodes a source_event_seqs BLOB, refusing what the harness's decoder refuses with its texts.
func DecodeSeqs(b []byte) ([]int64, error) {
	out := make([]int64, 0, len(b))
	var prev int64
	for off := 0; off < len(b); {
		first := len(out) == 0
		limit := uint64(maxSafe)
		if !first {
			limit = 2 * maxSafe
		}
		var u uint64
		shift := uint(0)
		done := false
		for off < len(b) {
			c := b[off]
			off++
			u |= uint64(c&0x7f) << shift
			if c&0x80 == 0 {
				if shift > 0 && c&0x7f == 0 {
					return nil, &SeqsError{"non-canonical varint"}
				}
				if u > limit {
					return nil, &SeqsError{"varint is out of range"}
				}
				done = true
				break
			}
			shift += 7
			if shift > 56 {
				return nil, &SeqsError{"varint is out of range"}
			}
		}
		if !done {
			return nil, &SeqsError{"truncated varint"}
		}
		v := int64(u)
		if !first {
			if u&1 == 0 {
				v = prev + int64(u/2)
			} else {
				v = prev - int64((u+1)/2)
			}
		}
		if v < 0 || v > maxSafe {
			return nil, &SeqsError{"decoded seq is out of range"}
		}
		out = append(out, v)
		prev = v
	}
	return out, nil
}
