package namecodec

import (
	"strings"
	"testing"
)

func TestEncodeSegment(t *testing.T) {
	tests := []struct{ in, want string }{
		// jsonl.spec.ts:137-161
		{"..", "~002E~002E"},
		{".", "~002E"},
		{"a/b", "a~002Fb"},
		{"/etc/passwd", "~002Fetc~002Fpasswd"},
		{"a\x00b", "a~0000b"},
		{"plain-ID_1.2", "plain-ID_1.2"},
		{"a~b", "a~007Eb"},
		{"\xed\xa0\x80", "~D800"}, // lone high surrogate (WTF-8)
		{"\xed\xb0\x80", "~DC00"}, // lone low surrogate
		// ours
		{"~", "~007E"},
		{"~002F", "~007E002F"},
		{"...", "..."},
		{"a.", "a."},
		{"has space", "has~0020space"},
		{"{{sessionId}}", "~007B~007BsessionId~007D~007D"},
		{"é", "~00E9"},
		{"开发", "~5F00~53D1"},
		{"😀", "~D83D~DE00"}, // astral: two escapes, one per surrogate half
		{"x\xed\xa0\xbdy", "x~D83Dy"},
		{"\xed\xa0\xbd\xed\xb8\x80", "~D83D~DE00"}, // two lone halves in sequence read as the pair they spell
		{"\uFFFD", "~FFFD"},
		// invalid UTF-8: one U+FFFD per WHATWG maximal subpart
		{"\xff", "~FFFD"},
		{"a\xe4\xb8b", "a~FFFDb"},
		{"\xed\xa0", "~FFFD~FFFD"},
		{"\xf0\x9f\x98", "~FFFD"},
		{"\xc0\xaf", "~FFFD~FFFD"},
		{"\xf4\x90\x80\x80", "~FFFD~FFFD~FFFD~FFFD"},
	}
	for _, tc := range tests {
		got, err := EncodeSegment(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("EncodeSegment(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := EncodeSegment(""); err == nil || err.Error() != "cannot encode an empty path segment" {
		t.Errorf("empty segment: %v", err)
	}
	hi, _ := EncodeSegment("\xed\xa0\x80")
	lo, _ := EncodeSegment("\xed\xb0\x80")
	if hi == lo {
		t.Error("lone surrogates collide")
	}
}

func TestDecodeSegment(t *testing.T) {
	for _, id := range []string{
		"a", ".", "..", "...", "a/b", "~", "~002F", "a b", "é", "开发", "😀", "\xed\xa0\x80", "\xed\xb0\x80",
		"\xed\xb8\x80\xed\xa0\xbd", // low then high: two lone surrogates, not a pair
		"x\x00y", "{{sessionId}}", "main-session-c652f155-0402-4151-9cf3-89ee925d873b", "\uFFFD",
	} {
		name, err := EncodeSegment(id)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := DecodeSegment(name)
		if !ok || got != id {
			t.Errorf("DecodeSegment(%q) = %q, %v; want %q", name, got, ok, id)
		}
	}
	for _, name := range []string{
		"", ".", "..", "~002e", "~0041", "~002Ea", "a~00", "a~00G0", "a/b", "a b", "é", "~", "~~0041",
	} {
		if got, ok := DecodeSegment(name); ok {
			t.Errorf("DecodeSegment(%q) = %q, accepted a name EncodeSegment never produces", name, got)
		}
	}
	// Escaped surrogate halves that pair decode to the astral character itself.
	if got, ok := DecodeSegment("~D83D~DE00"); !ok || got != "😀" {
		t.Errorf("pair decoded to %q, %v", got, ok)
	}
}

func TestProjectKey(t *testing.T) {
	tests := []struct{ in, want string }{
		// jsonl.spec.ts:163-171 and spec §1.2
		{"/Users/qyj/work/deepseek-harness", "--Users-qyj-work-deepseek-harness--"},
		{"/Users/dev/src/app", "--Users-dev-src-app--"},
		{"/a/b-c", "--a-b-c--"},
		{"/a-b/c", "--a-b-c--"},
		{`C:\work\agent`, "--C-work-agent--"},
		{"/开发/~agent", "--~5F00~53D1-~007Eagent--"},
		{"/", "--root--"},
		{"/a/", "--a---"},
		// ours
		{"///", "--root--"},
		{"a//b::c\\\\d", "--a-b-c-d--"},
		{"-x", "--x--"},
		{"/-x", "--x--"},      // leading dashes, separator or literal, all go
		{"/a-/b", "--a--b--"}, // a literal dash does not merge with a separator dash
		{".", "--.--"},
		{"..", "--..--"},
		{"~", "--~007E--"},
		{"/home/dev/my project", "--home-dev-my~0020project--"},
		{"/😀", "--~D83D~DE00--"},
		{"/\xed\xa0\x80", "--~D800--"},
		{"/\xff", "--~FFFD--"},
	}
	for _, tc := range tests {
		got, err := ProjectKey(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ProjectKey(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := ProjectKey(""); err == nil || err.Error() != "cannot encode an empty project path" {
		t.Errorf("empty project path: %v", err)
	}
	long, _ := ProjectKey("/" + strings.Repeat("x", 1000))
	if len(long) != 255 || long != "--"+strings.Repeat("x", 251)+"--" {
		t.Errorf("long key %d chars: %q", len(long), long)
	}
	// The 251 cut may land inside an escape; the harness keeps the fragment.
	cut, _ := ProjectKey("/" + strings.Repeat("x", 249) + "é")
	if cut != "--"+strings.Repeat("x", 249)+"~0--" {
		t.Errorf("cut key %q", cut)
	}
	exact, _ := ProjectKey(strings.Repeat("y", 251))
	if len(exact) != 255 {
		t.Errorf("251-char slug became %d chars", len(exact))
	}
}
