package spill

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/dshfs/dshfs/internal/namecodec"
)

// MaxNameBytes is the longest name NameSegment returns; longer encodings are cut and made unique again with
// a hash, so that any data-derived name fits NAME_MAX (255) with room for a prefix such as "<row>-".
const MaxNameBytes = 200

// nameHashHex is how many hex digits of SHA-256 close a cut name: 183 + "~" + 16 = 200.
const nameHashHex = 16

// NameSegment encodes a data-derived string (a session id, event type, call id, compaction id) as one file
// name, as docs/tree.md "Names" prescribes: the harness's own segment encoding (namecodec.EncodeSegment,
// the name the JSONL store gives a session's directory), with the empty string becoming "~" (which that
// encoding never produces); an encoding longer than MaxNameBytes is cut to 183 bytes followed by "~" and
// the first 16 hex digits of the SHA-256 of s itself (its bytes as given, i.e. WTF-8 for event strings).
func NameSegment(s string) string {
	if s == "" {
		return "~"
	}
	enc, _ := namecodec.EncodeSegment(s) // only the empty string errs
	if len(enc) <= MaxNameBytes {
		return enc
	}
	sum := sha256.Sum256([]byte(s))
	return enc[:MaxNameBytes-1-nameHashHex] + "~" + hex.EncodeToString(sum[:])[:nameHashHex]
}

// DecodeName inverts NameSegment for names it produced without cutting: "~" alone is the empty string,
// any other name decodes as namecodec.DecodeSegment does. ok is false for any name NameSegment would not
// produce from the result (a raw unsafe character, lowercase hex, a cut name), so a name that decodes is
// the name the decoded id is listed under.
func DecodeName(name string) (string, bool) {
	if name == "~" {
		return "", true
	}
	if len(name) > MaxNameBytes {
		return "", false // NameSegment would have cut it
	}
	return namecodec.DecodeSegment(name)
}
