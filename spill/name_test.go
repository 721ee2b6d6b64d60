package spill

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/jsonl"
)

func TestNameSegment(t *testing.T) {
	hash16 := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return hex.EncodeToString(sum[:])[:16]
	}
	long201 := strings.Repeat("a", 201)
	slashes41 := strings.Repeat("/", 41) // 41 × "~002F" = 205 bytes encoded
	cases := []struct {
		name, in, want string
	}{
		{"empty", "", "~"},
		{"dot", ".", "~002E"},
		{"dotdot", "..", "~002E~002E"},
		{"three dots are safe", "...", "..."},
		{"safe", "call_abc-1.2", "call_abc-1.2"},
		{"slash", "a/b", "a~002Fb"},
		{"traversal", "../etc/passwd", "..~002Fetc~002Fpasswd"},
		{"tilde", "~", "~007E"},
		{"space and colon", "call run:code:0", "call~0020run~003Acode~003A0"},
		{"latin", "é", "~00E9"},
		{"astral is two units", "😀", "~D83D~DE00"},
		{"lone surrogate (WTF-8)", "a\xed\xa0\x80b", "a~D800b"},
		{"invalid byte is U+FFFD", "a\xffb", "a~FFFDb"},
		{"exactly 200 bytes", strings.Repeat("x", 200), strings.Repeat("x", 200)},
		{"exactly 200 bytes encoded", strings.Repeat("/", 40), strings.Repeat("~002F", 40)},
		{"201 bytes", long201, strings.Repeat("a", 183) + "~" + hash16(long201)},
		{"cut inside an escape", slashes41, strings.Repeat("~002F", 36) + "~00" + "~" + hash16(slashes41)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := NameSegment(c.in)
			if got != c.want {
				t.Fatalf("NameSegment(%q) = %q, want %q", c.in, got, c.want)
			}
			if len(got) > MaxNameBytes {
				t.Fatalf("NameSegment(%q) is %d bytes", c.in, len(got))
			}
		})
	}
	if n := len(NameSegment(long201)); n != 200 {
		t.Fatalf("a cut name is %d bytes, want exactly 200", n)
	}
	if NameSegment(long201) == NameSegment(long201+"b") {
		t.Fatal("two long names that share a prefix collide")
	}
}

// TestNameSegmentMatchesJSONL keeps NameSegment equal to the JSONL backend's encodeSegment wherever no cap
// applies, so the mount's names and the store's directory names agree.
func TestNameSegmentMatchesJSONL(t *testing.T) {
	inputs := []string{
		".", "..", "...", "a", "call_1", "{{sessionId}}", "a/b\\c", "~007B", "é", "中文", "😀x", "\u2028",
		"a\xed\xb0\x80", "\xed\xa0\xbd\xed\xb8\x80", "sp ace", "%2F", "0123456789abcdefABCDEF._-",
		"6f1c2a8e-1b7d-4c1e-9a55-2f7e3d1c0b9a", "call_run:code:12", strings.Repeat("/", 40),
	}
	for _, in := range inputs {
		want, err := jsonl.EncodeSegment(in)
		if err != nil {
			t.Fatalf("EncodeSegment(%q): %v", in, err)
		}
		if len(want) > MaxNameBytes {
			t.Fatalf("test input %q needs the cap", in)
		}
		if got := NameSegment(in); got != want {
			t.Errorf("NameSegment(%q) = %q, jsonl.EncodeSegment = %q", in, got, want)
		}
	}
}

// TestDecodeName: DecodeName inverts NameSegment, and agrees with the JSONL backend's DecodeSegment (the
// mount decodes mkdir names without depending on a backend, as NameSegment encodes them).
func TestDecodeName(t *testing.T) {
	for _, id := range []string{"a/b", "..", ".", "", "with space", "ünï", "😀astral", "a~b", "x\\y:z", "plain-id_1.2", "\xed\xa0\x80lone"} {
		got, ok := DecodeName(NameSegment(id))
		if !ok || got != id {
			t.Errorf("DecodeName(NameSegment(%q)) = %q, %v", id, got, ok)
		}
		if id == "" {
			continue // "~" is the mount's name for the empty id, which the harness cannot store
		}
		if want, wok := jsonl.DecodeSegment(NameSegment(id)); wok != ok || want != got {
			t.Errorf("%q: DecodeName %q %v, jsonl.DecodeSegment %q %v", id, got, ok, want, wok)
		}
	}
	for _, name := range []string{"a b", "a~002fb", "a~00", "a~ZZZZ", "x~0041", strings.Repeat("~0020", 41)} {
		if id, ok := DecodeName(name); ok {
			t.Errorf("DecodeName(%q) = %q, want a refusal", name, id)
		}
		if id, ok := jsonl.DecodeSegment(name); ok && len(name) <= MaxNameBytes {
			t.Errorf("jsonl.DecodeSegment(%q) = %q, but DecodeName refuses it", name, id)
		}
	}
}
