package event

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

func TestCanonicalFixtureLinesAreFastPath(t *testing.T) {
	lines := allFixtureLines(t)
	if len(lines) < 1000 {
		t.Fatalf("only %d fixture lines", len(lines))
	}
	for _, line := range lines {
		got, err := Canonical(line)
		if err != nil {
			t.Fatalf("Canonical(%s): %v", line, err)
		}
		if &got[0] != &line[0] || len(got) != len(line) {
			t.Fatalf("harness-written line not returned as is: %s", line)
		}
		v, err := Parse(line)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(Stringify(v), line) {
			t.Fatalf("fixture line is not JSON.stringify output:\n%s\n%s", line, Stringify(v))
		}
	}
}

func TestCanonicalDoesNotAllocate(t *testing.T) {
	lines := allFixtureLines(t)
	allocs := testing.AllocsPerRun(5, func() {
		for _, line := range lines {
			if _, err := Canonical(line); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("Canonical allocated %v times over fixture lines", allocs)
	}
}

func TestCanonicalRewrites(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"a": 1}`, `{"a":1}`},
		{`{"a":1.0}`, `{"a":1}`},
		{`{"a":-0}`, `{"a":0}`},
		{`{"a":1E3}`, `{"a":1000}`},
		{`{"a":1e21}`, `{"a":1e+21}`},
		{`{"a":0.0000001}`, `{"a":1e-7}`},
		{`{"a":12345678901234567890}`, `{"a":12345678901234567000}`},
		{`{"a":"\u0041"}`, `{"a":"A"}`},
		{`{"a":"\/"}`, `{"a":"/"}`},
		{`{"a":"\u000A"}`, `{"a":"\n"}`},
		{`{"a":"\u001F"}`, `{"a":"\u001f"}`},
		{`{"a":"\uD800"}`, `{"a":"\ud800"}`},
		{`{"a":"\ud83d\ude00"}`, `{"a":"😀"}`},
		{`{"a":"\u2028"}`, "{\"a\":\"\u2028\"}"},
		{`{"a":1,"a":2}`, `{"a":2}`},
		{`{"b":1,"1":2}`, `{"1":2,"b":1}`},
		{`{"2":1,"1":2}`, `{"1":2,"2":1}`},
		{`{"1":1,"1":2}`, `{"1":2}`},
		{"{\"a\":\"\xe2\x82A\"}", "{\"a\":\"\uFFFDA\"}"},
		{`[1, 2]`, `[1,2]`},
		{" 1", "1"},
	}
	for _, c := range cases {
		if IsCanonical([]byte(c.want)) == false {
			t.Errorf("expected output %s is not recognized as canonical", c.want)
		}
		if IsCanonical([]byte(c.in)) {
			t.Errorf("%s wrongly recognized as canonical", c.in)
		}
		got, err := Canonical([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("Canonical(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
}

func TestCanonicalAcceptsStringifyOutput(t *testing.T) {
	cases := []string{
		`0`, `-1`, `1.5`, `1e+21`, `1e-7`, `0.000001`, `123456789012345680000`, `-1.7976931348623157e+308`,
		`"\ud800"`, `"\udc00x\ud800"`, `"\u0000\b"`, "\"\x7f\u2028😀\"", `{"0":1,"1":2,"4294967295":3,"a":4}`,
		`{"":1,"\"":2}`, `{"0":0,"":1}`, `{"0":0,"1":1,"":2,"a":3}`, `[[],{},null,true,false]`,
	}
	for _, c := range cases {
		v, err := Parse([]byte(c))
		if err != nil {
			t.Fatal(err)
		}
		if string(Stringify(v)) != c {
			t.Fatalf("test case %s is not canonical: %s", c, Stringify(v))
		}
		if !IsCanonical([]byte(c)) {
			t.Errorf("%s not recognized as canonical", c)
		}
	}
}

func TestCanonicalManyKeys(t *testing.T) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; i < 100; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + itoa(i) + `":1`)
	}
	unique := append([]byte(nil), b.Bytes()...)
	unique = append(unique, '}')
	if !IsCanonical(unique) {
		t.Error("100 distinct keys not canonical")
	}
	dup := append(b.Bytes(), `,"k3":2}`...)
	got, err := Canonical(dup)
	if err != nil || IsCanonical(dup) || bytes.Contains(got, []byte(`"k3":1`)) {
		t.Errorf("duplicate key among 100 not rewritten: %v", err)
	}
}

func TestLookup(t *testing.T) {
	raw := []byte(`{"type":"a/b","seq":3,"data":{"x":[1,{"y":"}"}],"k\"q":"v","z":{"w":null}},"esc\n":true,"\ud800":1}`)
	cases := []struct {
		keys []string
		want string
		ok   bool
	}{
		{[]string{"type"}, `"a/b"`, true},
		{[]string{"seq"}, `3`, true},
		{[]string{"data", "x"}, `[1,{"y":"}"}]`, true},
		{[]string{"data", "k\"q"}, `"v"`, true},
		{[]string{"data", "z", "w"}, `null`, true},
		{[]string{"esc\n"}, `true`, true},
		{[]string{"\xed\xa0\x80"}, `1`, true},
		{[]string{"data", "missing"}, "", false},
		{[]string{"seq", "x"}, "", false},
		{[]string{"nope"}, "", false},
		{nil, string(raw), true},
	}
	for _, c := range cases {
		got, ok := Lookup(raw, c.keys...)
		if ok != c.ok || string(got) != c.want {
			t.Errorf("Lookup(%q) = %s, %v; want %s, %v", c.keys, got, ok, c.want, c.ok)
		}
	}
	if _, ok := Lookup([]byte(`[1]`), "a"); ok {
		t.Error("Lookup into an array succeeded")
	}
	if _, ok := Lookup([]byte(`{}`), "a"); ok {
		t.Error("Lookup into {} succeeded")
	}
	allocs := testing.AllocsPerRun(10, func() { Lookup(raw, "data", "z", "w") })
	if allocs != 0 {
		t.Errorf("Lookup allocated %v times", allocs)
	}
}

func BenchmarkCanonical(b *testing.B) {
	lines := allFixtureLines(b)
	var size int64
	for _, l := range lines {
		size += int64(len(l))
	}
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, l := range lines {
			if _, err := Canonical(l); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// skipString finds the closing quote by searching for quotes; it must agree with a byte-by-byte scan
// that steps over every escape, on any input.
func TestSkipStringAgreesWithAScan(t *testing.T) {
	scan := func(s []byte, i int) int {
		for j := i + 1; j < len(s); j++ {
			switch s[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return -1
	}
	rng := rand.New(rand.NewPCG(5, 9))
	alphabet := []byte{'"', '\\', 'a', 'x', ' ', 'u', '0'}
	for range 200000 {
		s := make([]byte, 1+rng.IntN(24))
		s[0] = '"'
		for k := 1; k < len(s); k++ {
			s[k] = alphabet[rng.IntN(len(alphabet))]
		}
		if got, want := skipString(s, 0), scan(s, 0); got != want {
			t.Fatalf("%q: %d, want %d", s, got, want)
		}
	}
}

// TestObjectKeys: the names of one object are canonical when none repeats and the array-index names come
// first, ascending — whether the object's names are few, more than it keeps in place, or too long to keep
// as a place.
func TestObjectKeys(t *testing.T) {
	many := func(n int, extra ...string) []string {
		var names []string
		for i := range n {
			names = append(names, "k"+strconv.Itoa(i))
		}
		return append(names, extra...)
	}
	long := strings.Repeat("x", 1<<24)
	for _, tt := range []struct {
		name  string
		names []string
		want  bool
	}{
		{"distinct", []string{"a", "b", "c"}, true},
		{"repeated", []string{"a", "b", "a"}, false},
		{"indexes first ascending", []string{"0", "2", "10", "a"}, true},
		{"index after a name", []string{"a", "1"}, false},
		{"indexes descending", []string{"2", "1"}, false},
		{"index repeated", []string{"1", "1"}, false},
		{"not an index", []string{"01", "a", "4294967295"}, true},
		{"many distinct", many(60), true},
		{"repeat past the kept ones", many(40, "k3"), false},
		{"repeat of a late one", many(40, "k39"), false},
		{"repeat at the edge", many(smallKeys, "k0"), false},
		{"long names", []string{"a", long, "b", long[1:]}, true},
		{"long name repeated", []string{long, "a", long}, false},
		{"short repeated after a long one", []string{"a", long, "a"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var buf []byte
			var spans [][2]int
			for _, n := range tt.names {
				spans = append(spans, [2]int{len(buf), len(buf) + len(n)})
				buf = append(buf, n...)
			}
			var k ObjectKeys
			got := true
			for _, sp := range spans {
				if !k.Add(buf, sp[0], sp[1]) {
					got = false
					break
				}
			}
			if got != tt.want {
				t.Fatalf("canonical: %v, want %v", got, tt.want)
			}
		})
	}
}
