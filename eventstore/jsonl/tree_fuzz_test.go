package jsonl

import (
	"context"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/internal/storetree"
)

// FuzzStoreTree builds a whole store tree from the input (storetree.Build) — session directories with
// arbitrary names, transcripts with arbitrary bytes in either encoding, FIFOs, symlinks in and out of the
// root, directories where files belong — and asserts what no store may break: listing and inspecting every
// session finishes within a deadline, without a panic, and every session is either readable or refused
// with a reason. The caps keep memory bounded (a tiny max_frame_bytes and max_line_bytes).
func FuzzStoreTree(f *testing.F) {
	header := headerLine("s") + "\n"
	f.Add([]byte("\x00s\x00" + header + lines(turn(1, 0))))
	f.Add([]byte("\x01s\x00" + string(EncodeFrame(nil, []byte(header)))))
	f.Add([]byte("\x02s\x00\x03t\x00/dev/zero\x04u\x00\x05v\x00" + header))
	f.Add(append([]byte("\x01bomb\x00"), append(EncodeFrame(nil, []byte(headerLine("bomb")+"\n")), Bomb(64)...)...))
	f.Add([]byte("\x00a\nb\x00" + header + "\x00a~000Ab\x00" + header))
	f.Fuzz(func(t *testing.T, data []byte) {
		root := storetree.TempDir(t)
		storetree.Build(t, root, data)
		for _, mode := range []Compression{None, Zstd} {
			b, err := Open(root, mode)
			if err != nil {
				t.Fatal(err)
			}
			b.SetLimits(1<<16, 1<<20)
			st := eventstore.New(b)
			done := make(chan struct{})
			go func() {
				defer close(done)
				l, err := st.List(context.Background())
				if err != nil {
					t.Errorf("list: %v", err)
					return
				}
				for _, e := range l.Entries {
					if e.Refusal != nil {
						if e.Refusal.Error() == "" {
							t.Errorf("%q refused without a reason", e.ID)
						}
						continue
					}
					if _, err := st.Inspect(context.Background(), e.ID); err != nil && err.Error() == "" {
						t.Errorf("%q refused without a reason", e.ID)
					}
					st.ReadRaw(context.Background(), e.ID)
				}
			}()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("%s: listing and inspecting the tree did not finish", mode)
			}
		}
	})
}
