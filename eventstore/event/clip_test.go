package event

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestParseClippedIsPrefix: for every cut, a clipped string is exactly the first bytes of what Parse
// decodes, and StrLen its whole length — through escapes, surrogate pairs and lone surrogates, \u0000,
// multi-byte characters, and cuts falling inside any of them.
func TestParseClippedIsPrefix(t *testing.T) {
	tests := []struct{ name, tok string }{
		{"plain", `"hello, world"`},
		{"empty", `""`},
		{"short escapes", `"a\"b\\c\/d\be\ff\ng\rh\ti"`},
		{"nul and controls", `"\u0000x\u001f\u0007"`},
		{"surrogate pair", `"ab\ud83d\ude00cd\uD83D\uDE00"`},
		{"lone high surrogate", `"x\ud800y\ud800"`},
		{"lone low surrogate", `"\udc00\udfff z"`},
		{"high then non-low escape", `"\ud83d\u0041"`},
		{"multi-byte raw", `"é€😀 é€😀"`},
		{"escaped multi-byte", `"\u00e9\u20ac\u00E9"`},
		{"only escapes", `"\n\n\n\n\n\n"`},
		{"invalid utf-8", "\"a\xffb\xe2\x82c\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			whole, err := Parse([]byte(tc.tok))
			if err != nil {
				t.Fatal(err)
			}
			for limit := 1; limit <= len(whole.Str)+2; limit++ {
				got, err := ParseClipped([]byte(tc.tok), limit)
				if err != nil {
					t.Fatalf("limit %d: %v", limit, err)
				}
				want := whole.Str[:min(limit, len(whole.Str))]
				if got.Kind != KindString || got.Str != want || StrLen(got) != len(whole.Str) {
					t.Fatalf("limit %d: %q of %d bytes, want %q of %d", limit, got.Str, StrLen(got), want, len(whole.Str))
				}
			}
		})
	}
}

// TestParseClippedRecord: only string values are cut, member names and every other value are what
// Parse makes, and a string within the limit is whole.
func TestParseClippedRecord(t *testing.T) {
	long := strings.Repeat("x", 100)
	raw := `{"type":"user/message","` + long + `":1,"data":{"content":[{"type":"text","text":"` + long + `"}],"n":-1.5e3,"b":true,"z":null}}`
	whole, err := Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	got, err := (Event{Raw: []byte(raw)}).Clipped(20)
	if err != nil {
		t.Fatal(err)
	}
	if keys := got.Keys(); len(keys) != 3 || keys[1] != long {
		t.Fatalf("member names %q", keys)
	}
	if typ, _ := got.Get("type"); typ.Str != "user/message" || typ.Num != 0 {
		t.Fatalf("type %+v", typ)
	}
	data, _ := got.Get("data")
	content, _ := data.Get("content")
	text, _ := content.Arr[0].Get("text")
	if text.Str != long[:20] || StrLen(text) != 100 {
		t.Fatalf("text %q of %d", text.Str, StrLen(text))
	}
	wdata, _ := whole.Get("data")
	for _, k := range []string{"n", "b", "z"} {
		a, _ := data.Get(k)
		b, _ := wdata.Get(k)
		if string(Stringify(a)) != string(Stringify(b)) {
			t.Errorf("%s: %s, want %s", k, Stringify(a), Stringify(b))
		}
	}
}

// TestParseClippedRefuses what Parse refuses, wherever the cut falls.
func TestParseClippedRefuses(t *testing.T) {
	for _, tok := range []string{`"abc`, `"a\`, `"a\x"`, `"\u12"`, "\"a\x01\"", `"abc\"`} {
		_, want := Parse([]byte(tok))
		for _, limit := range []int{1, 2, 10} {
			_, err := ParseClipped([]byte(tok), limit)
			var se, we *SyntaxError
			if !errors.As(err, &se) || !errors.As(want, &we) || se.Offset != we.Offset {
				t.Errorf("%q limit %d: %v, want %v", tok, limit, err, want)
			}
		}
	}
}

// FuzzParseClipped: whatever the input, a clipped parse fails where Parse fails, and otherwise holds the
// same tree with each string the first bytes of Parse's and StrLen its whole length.
func FuzzParseClipped(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		whole, werr := Parse(b)
		for _, limit := range []int{1, 3, 16} {
			got, err := ParseClipped(b, limit)
			if (err == nil) != (werr == nil) {
				t.Fatalf("limit %d: ParseClipped err %v, Parse err %v", limit, err, werr)
			}
			if err == nil {
				sameClipped(t, whole, got, limit)
			}
		}
	})
}

// sameClipped fails t unless got is whole with every string value cut at limit bytes.
func sameClipped(t *testing.T, whole, got Value, limit int) {
	t.Helper()
	if whole.Kind != got.Kind || len(whole.Arr) != len(got.Arr) || len(whole.Obj) != len(got.Obj) {
		t.Fatalf("%s became %s", Stringify(whole), Stringify(got))
	}
	switch whole.Kind {
	case KindString:
		if got.Str != whole.Str[:min(limit, len(whole.Str))] || StrLen(got) != len(whole.Str) {
			t.Fatalf("%q cut at %d: %q of %d", whole.Str, limit, got.Str, StrLen(got))
		}
	case KindArray:
		for i := range whole.Arr {
			sameClipped(t, whole.Arr[i], got.Arr[i], limit)
		}
	case KindObject:
		for i := range whole.Obj {
			if whole.Obj[i].Key != got.Obj[i].Key {
				t.Fatalf("member %q became %q", whole.Obj[i].Key, got.Obj[i].Key)
			}
			sameClipped(t, whole.Obj[i].Value, got.Obj[i].Value, limit)
		}
	default:
		if !bytes.Equal(Stringify(whole), Stringify(got)) {
			t.Fatalf("%s became %s", Stringify(whole), Stringify(got))
		}
	}
}
