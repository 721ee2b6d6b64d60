package generation_test

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
)

// These cases are decided by the framing rules (spec/jsonl.md) and by this package's own contract, not
// by the codec, so the reference decode tool cannot answer them: its framing reads complete lines and
// parses them all before the codec sees a row.

func frame(t *testing.T, text string) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll([]byte(text), nil)
}

func TestTornTails(t *testing.T) {
	for _, gen := range []int{2, 3} {
		s := loadSession(t, gen, crashID)
		intact := s.text("")
		whole, err := generation.Decode(gen, false, intact)
		if err != nil {
			t.Fatal(err)
		}

		torn := s.text(`{"type":"tool/result","seq":99,`)
		got, err := generation.Decode(gen, false, torn)
		if err != nil {
			t.Fatalf("v%d raw torn tail: %v", gen, err)
		}
		if !bytes.Equal(got.AppendRestored(nil), whole.AppendRestored(nil)) || got.Committed != int64(len(intact)) {
			t.Errorf("v%d raw: torn line not excluded (committed %d of %d)", gen, got.Committed, len(intact))
		}

		z := s.compressed(t, true, false)
		zt := append(append([]byte(nil), z...), frame(t, s.lines[len(s.lines)-1]+"\n")[:9]...)
		got, err = generation.Decode(gen, true, zt)
		if err != nil {
			t.Fatalf("v%d zstd torn frame: %v", gen, err)
		}
		if !bytes.Equal(got.AppendRestored(nil), whole.AppendRestored(nil)) || got.Committed != int64(len(z)) {
			t.Errorf("v%d zstd: torn frame not excluded (committed %d, frames end at %d)", gen, got.Committed, len(z))
		}
	}
}

func TestFramingRefusals(t *testing.T) {
	s := loadSession(t, 3, cleanID)
	header := s.lines[0] + "\n"
	body := strings.Join(s.lines[1:], "\n") + "\n"
	cases := []struct {
		name       string
		compressed bool
		b          []byte
		want       string
	}{
		{"raw empty", false, nil, "empty or header-less session log"},
		{"raw header without LF", false, []byte(s.lines[0]), "empty or header-less session log"},
		{"raw header not JSON", false, []byte("{\"type\":\n"), "corrupt session log: header line is not valid JSON"},
		{"zstd empty", true, nil, "empty or header-less Zstandard session log"},
		{"zstd torn header frame", true, frame(t, header)[:7], "empty or header-less Zstandard session log"},
		{"zstd bad magic", true, []byte("not a zstd frame"), "corrupt Zstandard session log: invalid frame magic at byte 0"},
		{"zstd header frame with two lines", true, frame(t, header+s.lines[1]+"\n"), "corrupt Zstandard session log: first frame is not exactly one header line"},
		{"zstd frame ends inside a line", true, append(frame(t, header), frame(t, strings.TrimSuffix(body, "\n"))...), "corrupt Zstandard session log: complete frame contains a torn JSONL record"},
		{"zstd corrupt frame", true, corruptChecksum(append(frame(t, header), frame(t, body)...)), "corrupt Zstandard session log: frame at byte "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := generation.Decode(3, c.compressed, c.b)
			var ce *generation.CorruptError
			if !errors.As(err, &ce) || !strings.HasPrefix(ce.Message, c.want) {
				t.Fatalf("got %T %v, want CorruptError %q", err, err, c.want)
			}
		})
	}
}

// corruptChecksum flips a bit of the last frame's content checksum.
func corruptChecksum(b []byte) []byte {
	out := append([]byte(nil), b...)
	out[len(out)-1] ^= 1
	return out
}

func TestGenerationRefusals(t *testing.T) {
	v3 := loadSession(t, 3, cleanID).text("")
	_, err := generation.Decode(2, false, v3)
	var me *generation.MismatchError
	if !errors.As(err, &me) || err.Error() != "resolved JSONL source filename identifies v2, but its header identifies v3" {
		t.Errorf("v3 artifact read as v2: %T %v", err, err)
	}
	for gen, want := range map[int]string{
		5: "stored Session uses newer format v5; this build writes v4",
		1: "format v1 is not decoded here (v2, v3 and v4 are)",
		0: "format v0 is not decoded here (v2, v3 and v4 are)",
	} {
		_, err := generation.Decode(gen, false, v3)
		var ue *generation.UnsupportedGenerationError
		if !errors.As(err, &ue) || err.Error() != want || !ue.Unsupported() {
			t.Errorf("generation %d: %T %v", gen, err, err)
		}
	}
}

func TestUnparsableLine(t *testing.T) {
	for _, gen := range []int{2, 3} {
		crash := loadSession(t, gen, crashID).clone()
		last := len(crash.lines) - 1
		crash.lines[last] = crash.lines[last][:20]
		b := crash.text("")

		_, err := generation.Decode(gen, false, b)
		var ce *generation.CorruptError
		if !errors.As(err, &ce) || ce.Message != "corrupt session log: unparsable committed event at line "+strconv.Itoa(last) {
			t.Errorf("v%d strict: %T %v", gen, err, err)
		}

		art, err := generation.DecodeWith(b, generation.Options{Generation: gen, Recovery: generation.Recoverable})
		if err != nil {
			t.Fatalf("v%d recoverable: %v", gen, err)
		}
		if len(art.Events) != last-1 || art.Committed != int64(len(b)-len(crash.lines[last])-1) {
			t.Errorf("v%d recoverable: %d events, committed %d", gen, len(art.Events), art.Committed)
		}

		// the same damage before a turn/end is inside committed history
		clean := loadSession(t, gen, cleanID).clone()
		clean.lines[3] = "{"
		if _, err := generation.DecodeWith(clean.text(""), generation.Options{Generation: gen, Recovery: generation.Recoverable}); !errors.As(err, &ce) {
			t.Errorf("v%d recoverable, damage before turn/end: %T %v", gen, err, err)
		}
	}
}

// TestStructuralRefusalIgnoresRecovery: v3 admits no retired system prompt even in the part of a log a
// recoverable read would drop.
func TestStructuralRefusalIgnoresRecovery(t *testing.T) {
	s := loadSession(t, 3, crashID)
	s = s.edit(t, len(s.lines)-1, func(v event.Value) event.Value { return set(v, "extra", event.Int(1)) })
	if _, err := generation.DecodeWith(s.text(""), generation.Options{Generation: 3, Recovery: generation.Recoverable}); err != nil {
		t.Fatalf("a damaged open tail is not dropped: %v", err)
	}
	s = s.appendEvent(t, "request/header", `{"header":{"system":"x"},"reason":"initial"}`)
	_, err := generation.DecodeWith(s.text(""), generation.Options{Generation: 3, Recovery: generation.Recoverable})
	var fe *generation.FormatError
	if !errors.As(err, &fe) || !fe.Unsupported() || fe.JSErrorName() != "SessionFormatUnsupportedMigrationError" ||
		fe.Message != "format v3 request/header rejects retired header.system" {
		t.Fatalf("got %T %v", err, err)
	}
}

// TestEventsAreCanonical: every event is JSON.stringify bytes whatever the row's spelling, with its seq.
func TestEventsAreCanonical(t *testing.T) {
	s := loadSession(t, 2, cleanID).clone()
	s.lines[1] = strings.Replace(s.lines[1], `"seq":0`, `"seq" : 0.0`, 1)
	art, err := generation.Decode(2, false, s.text(""))
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range art.Events {
		if !event.IsCanonical(e.Raw) || e.Seq != int64(i) {
			t.Fatalf("event %d: seq %d, canonical %v: %s", i, e.Seq, event.IsCanonical(e.Raw), e.Raw)
		}
	}
}

// rleBomb is a zstd frame of n RLE blocks of 128 KiB each: 4 bytes a block on disk.
func rleBomb(n int) []byte {
	b := []byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x58} // magic; no content size, no checksum; 2 MiB window
	for i := 0; i < n; i++ {
		h := 1<<1 | (128<<10)<<3
		if i == n-1 {
			h |= 1
		}
		b = append(b, byte(h), byte(h>>8), byte(h>>16), '\n')
	}
	return b
}

func TestFrameBomb(t *testing.T) {
	s := loadSession(t, 3, cleanID)
	b := append(frame(t, s.lines[0]+"\n"), rleBomb(8<<10)...) // a 1 GiB frame in 32 KiB
	_, err := generation.DecodeWith(b, generation.Options{Generation: 3, Compressed: true, MaxFrameBytes: 64 << 20})
	var ce *generation.CorruptError
	if !errors.As(err, &ce) || !strings.Contains(ce.Message, "can decode to 1073741824 bytes, over max_frame_bytes (67108864)") {
		t.Fatalf("got %T %v", err, err)
	}
	if _, err := generation.Decode(3, true, b); !errors.As(err, &ce) {
		t.Fatalf("Decode's default cap: %T %v", err, err)
	}
}

func TestWrittenBy(t *testing.T) {
	for gen, want := range map[int]string{
		0: "harness releases up to dsh-v0.1.2-rc.1",
		1: "no tagged harness release",
		2: "dsh-v0.1.3-alpha.1 and dsh-v0.1.3-alpha.2",
		3: "dsh-v0.1.5-alpha.1 up to dsh-v0.2.0-rc.1",
		4: "dsh-v0.2.0-rc.2 and later",
		5: "a harness release newer than dshfs knows (the latest writes v4)",
	} {
		if got := generation.WrittenBy(gen); got != want {
			t.Errorf("WrittenBy(%d) = %q, want %q", gen, got, want)
		}
	}
}

// TestRefusalLine: a refused row names its line, also when a recoverable read refuses later, at the
// turn/end that proves the damage committed.
func TestRefusalLine(t *testing.T) {
	for _, gen := range []int{2, 3} {
		s := loadSession(t, gen, cleanID)
		s = s.edit(t, 4, func(v event.Value) event.Value { return set(v, "extra", event.Int(1)) })
		for _, rec := range []generation.Recovery{generation.Strict, generation.Recoverable} {
			_, err := generation.DecodeWith(s.text(""), generation.Options{Generation: gen, Recovery: rec})
			var fe *generation.FormatError
			if !errors.As(err, &fe) || fe.Line != 4 || fe.Message != "released v2 row 3 has unexpected field extra" {
				t.Errorf("v%d recovery %d: %T %+v", gen, rec, err, err)
			}
		}
	}
}
