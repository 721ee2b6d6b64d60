package spill

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
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
		{"a cut sequence is one U+FFFD", "a\xe4\xb8b", "a~FFFDb"},
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

// TestDecodeName: DecodeName inverts NameSegment, and refuses every name NameSegment never produces.
func TestDecodeName(t *testing.T) {
	for _, id := range []string{"a/b", "..", ".", "", "with space", "ünï", "😀astral", "a~b", "x\\y:z", "plain-id_1.2", "\xed\xa0\x80lone"} {
		got, ok := DecodeName(NameSegment(id))
		if !ok || got != id {
			t.Errorf("DecodeName(NameSegment(%q)) = %q, %v", id, got, ok)
		}
	}
	refused := []string{"", ".", "..", "a b", "a~002fb", "a~00", "a~ZZZZ", "x~0041", strings.Repeat("~0020", 41),
		NameSegment(strings.Repeat("a", 201))}
	for _, name := range refused {
		if id, ok := DecodeName(name); ok {
			t.Errorf("DecodeName(%q) = %q, want a refusal", name, id)
		}
	}
}
