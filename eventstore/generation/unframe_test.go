package generation

import (
	"bytes"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// FuzzUnframe holds unframe's segments to the plain text the frames hold: a header frame, then the rest
// cut into frames anywhere (inside lines, empty frames, one large frame), decoded on one worker and on
// two. Where the text frames validly, the segments are whole lines and joined are the text; where it does
// not, both decodes refuse it alike.
func FuzzUnframe(f *testing.F) {
	f.Add([]byte("a\nbb\nccc\n"), []byte{1, 3, 3, 200})
	f.Add([]byte("a\nbb\nccc"), []byte{2})
	f.Add([]byte(""), []byte{})
	f.Add(bytes.Repeat([]byte("line of some length\n"), 500), []byte{0, 7, 7, 255, 9})
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true))
	if err != nil {
		f.Fatal(err)
	}
	defer enc.Close()
	f.Fuzz(func(t *testing.T, body, cuts []byte) {
		const header = "{\"h\":1}\n"
		art := enc.EncodeAll([]byte(header), nil)
		at := 0
		for _, c := range cuts { // each cut: the next frame's length, a byte's worth of scaled steps
			n := min(len(body)-at, int(c)*int(c))
			art = enc.EncodeAll(body[at:at+n], art)
			at += n
		}
		art = enc.EncodeAll(body[at:], art)
		want := header + string(body)
		var first error
		for _, workers := range []int{1, 2} {
			segs, err := unframe(art, 0, workers)
			if workers == 1 {
				first = err
			} else if (err == nil) != (first == nil) || (err != nil && err.Error() != first.Error()) {
				t.Fatalf("one worker: %v; two: %v", first, err)
			}
			if err != nil {
				if bytes.HasSuffix([]byte(want), []byte("\n")) {
					t.Fatalf("%d workers: %v for a text that ends its last line", workers, err)
				}
				continue
			}
			var joined []byte
			for i, s := range segs {
				if !endsLine(s) {
					t.Fatalf("%d workers: segment %d of %d does not end a line: %q", workers, i, len(segs), s)
				}
				joined = append(joined, s...)
			}
			if string(joined) != want {
				t.Fatalf("%d workers: the segments hold %q, the frames %q", workers, joined, want)
			}
		}
	})
}
