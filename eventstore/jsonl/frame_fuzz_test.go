package jsonl

import (
	"bytes"
	"slices"
	"sort"
	"testing"
)

// FuzzScanFrames checks the scanner's invariants on arbitrary bytes seeded with the harness's real files: it
// never panics, complete frames tile the input from byte 0, a torn start is where the last frame ended, cutting
// the input at the torn start leaves the same frames and no tail, and the decoders never panic either.
func FuzzScanFrames(f *testing.F) {
	files := zstdFixtureFiles(f)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		b := files[n]
		f.Add(b)
		if i%8 == 0 {
			f.Add(b[:len(b)/2])
			f.Add(b[:len(b)-1])
			f.Add(b[:7])
		}
	}
	f.Add([]byte{})
	f.Add(EncodeFrame(nil, zstText(140<<10)))
	f.Fuzz(func(t *testing.T, b []byte) {
		frames, torn, err := ScanFrames(b, 0)
		var next int64
		for i, fr := range frames {
			if fr.Start != next || fr.End <= fr.Start || fr.End > int64(len(b)) {
				t.Fatalf("frame %d = %+v after %d (len %d)", i, fr, next, len(b))
			}
			next = fr.End
			if i < 4 {
				_, _ = DecodeFrame(b, fr)
			}
		}
		if err != nil {
			if torn != -1 {
				t.Fatalf("error %v with torn start %d", err, torn)
			}
			return
		}
		if torn == -1 {
			if next != int64(len(b)) {
				t.Fatalf("frames end at %d of %d with no torn tail", next, len(b))
			}
		} else {
			if torn != next || torn >= int64(len(b)) {
				t.Fatalf("torn start %d, last frame ends at %d, len %d", torn, next, len(b))
			}
			again, torn2, err2 := ScanFrames(b[:torn], 0)
			if err2 != nil || torn2 != -1 || len(again) != len(frames) || (len(again) > 0 && !slices.Equal(again, frames)) {
				t.Fatalf("rescan of b[:%d]: %v %d %v", torn, again, torn2, err2)
			}
			rec := DecodeTornPrefix(b[torn:])
			if len(rec) > 0 && len(b)-int(torn) < 10 {
				t.Fatalf("recovered %d bytes from a %d-byte tail", len(rec), len(b)-int(torn))
			}
		}
		if len(frames) > 1 {
			one, torn1, err1 := ScanFrames(b, 1)
			if err1 != nil || torn1 != -1 || len(one) != 1 || one[0] != frames[0] {
				t.Fatalf("limit 1: %v %d %v", one, torn1, err1)
			}
		}
		// The decoder must also survive arbitrary "torn" input that is not a tail at all.
		_ = DecodeTornPrefix(b)
		if len(frames) == 1 && torn == -1 {
			if p, err := DecodeFrame(b, frames[0]); err == nil && len(p) <= 1<<20 {
				enc := EncodeFrame(nil, p)
				if q, err := DecodeFrame(enc, Frame{0, int64(len(enc))}); err != nil || !bytes.Equal(p, q) {
					t.Fatalf("re-encoding a decoded frame does not round-trip: %v", err)
				}
			}
		}
	})
}
