package event

import (
	"bytes"
	"errors"
	"testing"
)

// fuzzSeeds adds a spread of real fixture lines (plain events and packed rows) plus the Node-checked
// JSON cases. Missing fixtures fail the fuzz target rather than silently fuzzing an empty corpus.
func fuzzSeeds(f *testing.F) {
	lines := allFixtureLines(f)
	step := len(lines)/40 + 1
	rows := 0
	for i, line := range lines {
		if len(line) > 1500 {
			continue // long seeds make the fuzzer's minimization crawl
		}
		isRow := bytes.Contains(line, []byte(`-chunks","seq0"`))
		if i%step == 0 || (isRow && rows < 10) {
			f.Add(line)
			if isRow {
				rows++
			}
		}
	}
	for _, row := range readTSV(f, "json.tsv") {
		in := make([]byte, len(row[0])/2)
		for i := range in {
			hi, _ := hexVal(row[0][2*i])
			lo, _ := hexVal(row[0][2*i+1])
			in[i] = byte(hi<<4 | lo)
		}
		f.Add(in)
	}
}

func FuzzCanonical(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		c, cerr := Canonical(b)
		v, perr := Parse(b)
		if (cerr == nil) != (perr == nil) {
			t.Fatalf("Canonical err %v, Parse err %v", cerr, perr)
		}
		if perr != nil {
			return
		}
		s := Stringify(v)
		if !bytes.Equal(c, s) {
			t.Fatalf("Canonical = %q, Stringify(Parse) = %q", c, s)
		}
		// The output is a fixed point and recognized as such.
		if !IsCanonical(s) {
			t.Fatalf("Stringify output %q not recognized as canonical", s)
		}
		v2, err := Parse(s)
		if err != nil || !bytes.Equal(Stringify(v2), s) {
			t.Fatalf("round trip of %q: %v", s, err)
		}
	})
}

func FuzzDecodeRecord(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		raw, err := Canonical(b)
		if err != nil {
			return
		}
		checkPacked(t, raw, nil)
		evs, err := DecodeRecord(raw)
		if err != nil {
			var me *MalformedRowError
			if !errors.As(err, &me) {
				t.Fatalf("non-row error %v", err)
			}
			return
		}
		if len(evs) == 0 {
			t.Fatal("no events")
		}
		if len(evs) == 1 && bytes.Equal(evs[0].Raw, raw) {
			return
		}
		// An expanded row: every member is a canonical assistant/chunk with consecutive seqs, and
		// packing the members again (all eligible, one run) must decode to the same events.
		for i, e := range evs {
			if !IsCanonical(e.Raw) || e.Type != "assistant/chunk" {
				t.Fatalf("member %d: %s", i, e.Raw)
			}
			if i > 0 && evs[i-1].Seq >= 0 && e.Seq >= 0 && e.Seq != evs[i-1].Seq+1 {
				t.Fatalf("member seqs not consecutive: %d, %d", evs[i-1].Seq, e.Seq)
			}
		}
		var back []Event
		for _, line := range PackBatch(evs, 1) {
			more, err := DecodeRecord(line)
			if err != nil {
				t.Fatalf("re-decoding packed %s: %v", line, err)
			}
			back = append(back, more...)
		}
		if len(back) != len(evs) {
			t.Fatalf("repack changed the member count %d -> %d", len(evs), len(back))
		}
		for i := range evs {
			if !bytes.Equal(back[i].Raw, evs[i].Raw) {
				t.Fatalf("repack changed member %d:\n%s\n%s", i, evs[i].Raw, back[i].Raw)
			}
		}
	})
}

// FuzzEventTime: Time reads the time member exactly as a lookup does, on any canonical record (the
// fixture lines and the harness's envelope with every kind of type and seq spelling among the seeds).
func FuzzEventTime(f *testing.F) {
	fuzzSeeds(f)
	for _, s := range []string{
		`{"type":"a","seq":1,"time":2,"data":{}}`, `{"type":"a\"","seq":1,"time":2}`, `{"type":"a\\","seq":1,"time":2}`,
		`{"type":"","seq":1,"time":2}`, `{"type":"a","seq":-1,"time":2}`, `{"type":"a","seq":1,"time":-2}`,
		`{"type":"a","seq":1,"time":1e+21}`, `{"type":"a","seq":1.5,"time":2}`, `{"type":"a","seq":1,"time":2.5}`,
		`{"type":"a","seq":1,"time":"2"}`, `{"type":"a","seq":1}`, `{"type":"a","time":3,"seq":1}`,
		`{"type":"a","seq":1,"time":2,"time":3}`, `{"type":"a","seq":1,"time":20}`, `[1]`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		raw, err := Canonical(b)
		if err != nil {
			return
		}
		e := Event{Raw: raw}
		got, gotOK := e.Time()
		want, wantOK := e.Member("time")
		if gotOK != wantOK || !bytes.Equal(got, want) {
			t.Fatalf("%s: Time %q %v, lookup %q %v", raw, got, gotOK, want, wantOK)
		}
	})
}

// FuzzCanonicalString: the contents of a canonical string token decode, by CanonicalString, to the string
// Parse reads from the token (escapes, control characters and lone surrogates among the seeds).
func FuzzCanonicalString(f *testing.F) {
	for _, s := range []string{`"a"`, `"a\"b\\c\n\t\r\b\f"`, `"\u0001\u001f"`, `"\ud800x"`, `"x\udfff"`, `"é😀"`, `""`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := Parse(b)
		if err != nil || v.Kind != KindString {
			return
		}
		tok := Stringify(v)
		if got := CanonicalString(tok[1 : len(tok)-1]); got != v.Str {
			t.Fatalf("%s: CanonicalString %q, Parse %q", tok, got, v.Str)
		}
	})
}
