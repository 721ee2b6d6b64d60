package nodes

import (
	"bytes"
	"context"
	"testing"

	"github.com/dshfs/dshfs/command"
)

// lineWriter is a Writer that records the input of each append.
type lineWriter struct {
	inputs [][]byte
	limit  int64
}

func (w *lineWriter) Append(ctx context.Context, id string, input []byte) error {
	w.inputs = append(w.inputs, bytes.Clone(input))
	return nil
}
func (w *lineWriter) Flush(ctx context.Context, id string) error { return nil }
func (w *lineWriter) Command(ctx context.Context, id, line string) command.Result {
	return command.Result{}
}
func (w *lineWriter) Mkdir(ctx context.Context, name string) (string, error) { return name, nil }
func (w *lineWriter) Refuse(id, message string)                              {}
func (w *lineWriter) LineLimit() int64                                       { return w.limit }

// TestAppendScansLinear: a long line arriving in many writes is searched for its newline once, byte by
// byte, not once per write: the work is linear in what was written (a 64 MiB line in 64 KiB writes used
// to rescan the whole buffered line at every write, 36.7 s of it).
func TestAppendScansLinear(t *testing.T) {
	w := &lineWriter{limit: 64 << 20}
	f := &appendFile{control{w: w, id: "s"}}
	h := &appendHandle{}
	const piece, pieces = 64 << 10, 256 // a 16 MiB line
	chunk := bytes.Repeat([]byte("a"), piece)
	total := 0
	for i := 0; i < pieces; i++ {
		data := chunk
		if i == pieces-1 {
			data = append(bytes.Clone(chunk[:piece-2]), '\n', 'b') // the line ends; "b" starts the next
		}
		if n, errno := f.Write(context.Background(), h, data, 0); errno != 0 || int(n) != len(data) {
			t.Fatalf("write %d: %d, %v", i, n, errno)
		}
		total += len(data)
	}
	if h.scanned != int64(total) {
		t.Fatalf("%d bytes scanned for newlines, for %d written", h.scanned, total)
	}
	if len(w.inputs) != 1 || len(w.inputs[0]) != piece*pieces-2 || string(h.partial) != "b" {
		t.Fatalf("%d appends (first %d bytes), partial %q", len(w.inputs), len(w.inputs[0]), h.partial)
	}
}
