package jsonl

import (
	"strconv"
	"strings"
)

// Generation is a session format generation as its file name states it: 0 for session.jsonl, N for
// session.vN.jsonl. Releases after 0.1.2 publish a newer generation as a new immutable file beside the
// older ones (fixtures/generations/README.md); the highest valid one is the session.
type Generation int

// GenerationFile is what a session directory entry's name says about it when it is a generation file.
type GenerationFile struct {
	Gen         Generation
	Compression Compression
}

// Name is the file name the harness gives this generation in this encoding.
func (g GenerationFile) Name() string {
	base := "session"
	if g.Gen > 0 {
		base += ".v" + strconv.Itoa(int(g.Gen))
	}
	return base + g.Compression.Suffix()
}

// ParseGenerationName reports whether name is a generation file exactly as the harness matches it,
// ^session(?:\.v([1-9][0-9]*))?\.jsonl$ with an optional .zstd: ".v0", upper case, leading zeros and
// temporaries (*.tmp, session.migration.*) are not generation files and ok is false for them.
func ParseGenerationName(name string) (GenerationFile, bool) {
	c := None
	if s, ok := strings.CutSuffix(name, ".zstd"); ok {
		name, c = s, Zstd
	}
	rest, ok := strings.CutSuffix(name, ".jsonl")
	if !ok {
		return GenerationFile{}, false
	}
	if rest == "session" {
		return GenerationFile{Gen: 0, Compression: c}, true
	}
	digits, ok := strings.CutPrefix(rest, "session.v")
	if !ok || digits == "" || digits[0] < '1' || digits[0] > '9' {
		return GenerationFile{}, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return GenerationFile{}, false
		}
	}
	n, err := strconv.Atoi(digits)
	if err != nil { // more digits than an int holds: no harness writes it, and it cannot be compared
		return GenerationFile{}, false
	}
	return GenerationFile{Gen: Generation(n), Compression: c}, true
}
