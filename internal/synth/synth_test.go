package synth

import (
	"context"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/jsonl"
)

// TestWriteChunks: a session written with k chunks per first step holds k + 3k/4 streamed chunks a turn,
// none for k = 0, and loads without a refusal or a repair; the default is DefaultChunks.
func TestWriteChunks(t *testing.T) {
	for _, tc := range []struct{ chunks, perTurn int }{{0, 0}, {2, 3}, {DefaultChunks, 35}} {
		root := t.TempDir()
		if err := WriteChunks(root, jsonl.None, "s", 100, tc.chunks); err != nil {
			t.Fatal(err)
		}
		b, err := jsonl.Open(root, jsonl.None)
		if err != nil {
			t.Fatal(err)
		}
		st := eventstore.New(b)
		ins, err := st.Inspect(context.Background(), "s")
		if err != nil || len(ins.Closers) != 0 {
			t.Fatalf("chunks %d: %v, %d closers", tc.chunks, err, len(ins.Closers))
		}
		turns, chunks := 0, 0
		for _, e := range ins.Events {
			switch e.Type {
			case "turn/start":
				turns++
			case "assistant/chunk":
				chunks++
			}
		}
		if len(ins.Events) < 100 || turns == 0 || chunks != turns*tc.perTurn {
			t.Errorf("chunks %d: %d events, %d turns, %d chunks, want %d a turn", tc.chunks, len(ins.Events), turns, chunks, tc.perTurn)
		}
		st.Close(context.Background())
	}
	if err := WriteChunks(t.TempDir(), jsonl.None, "s", 10, -1); err == nil {
		t.Error("a negative chunk count was taken")
	}
}
