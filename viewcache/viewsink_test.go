package viewcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"testing"
)

// TestViewSinkChecksum: the checksum a sink takes in bulk is the SHA-256 of every byte written, whether the
// view stays in memory or goes to a file, in small writes, across the file threshold, or in one large write;
// and what reaches the file and the buffer is the view.
func TestViewSinkChecksum(t *testing.T) {
	line := bytes.Repeat([]byte("0123456789abcdef"), 5) // 80 bytes, a short event line
	cases := []struct {
		name   string
		writes [][]byte
	}{
		{"empty", nil},
		{"small writes in memory", repeatWrites(line, 300)},
		{"small writes past blobMin", repeatWrites(line, (blobMin+3*viewWriteBuffer)/len(line)+7)},
		{"one write past blobMin", [][]byte{bytes.Repeat(line, blobMin/len(line)+5)}},
		{"small then a large write", append(repeatWrites(line, blobMin/len(line)+1), bytes.Repeat([]byte{'x'}, viewWriteBuffer+9))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sink := newViewSink(func() (*os.File, error) { return os.CreateTemp(dir, "view-*") })
			defer sink.release()
			var all []byte
			for _, w := range tc.writes {
				if _, err := sink.Write(w); err != nil {
					t.Fatal(err)
				}
				all = append(all, w...)
			}
			want := sha256.Sum256(all)
			if got := sink.checksum(); got != hex.EncodeToString(want[:]) {
				t.Fatalf("checksum %s, want %x", got, want)
			}
			var kept []byte
			if sink.file != nil {
				if err := sink.flush(); err != nil {
					t.Fatal(err)
				}
				defer sink.file.Close()
				var err error
				if kept, err = os.ReadFile(sink.file.Name()); err != nil {
					t.Fatal(err)
				}
			} else {
				kept = sink.buf
			}
			if !bytes.Equal(kept, all) || sink.n != int64(len(all)) {
				t.Fatalf("kept %d bytes (n %d), want the %d written", len(kept), sink.n, len(all))
			}
			if got := sink.checksum(); got != hex.EncodeToString(want[:]) {
				t.Fatalf("checksum after the flush %s, want %x", got, want)
			}
		})
	}
}

func repeatWrites(p []byte, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = p
	}
	return out
}
