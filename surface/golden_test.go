package surface

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/fixtures"
)

// TestGolden replays every golden session through Fold, Folder and DeriveMessages and compares with
// the harness's own foldSurface and deriveMessages answers byte for byte.
func TestGolden(t *testing.T) {
	total := 0
	for _, set := range []string{"upstream", "colliders", "generated-raw", "generated-zstd"} {
		root := fixtures.Path(t, "golden", set)
		entries, err := os.ReadDir(root)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, d := range entries {
			if !d.IsDir() {
				continue
			}
			n++
			dir := filepath.Join(root, d.Name())
			t.Run(set+"/"+d.Name(), func(t *testing.T) { checkGolden(t, dir) })
		}
		if n == 0 {
			t.Fatalf("no golden sessions under %s", root)
		}
		total += n
	}
	if total < 100 {
		t.Fatalf("only %d golden sessions found", total)
	}
}

func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		return nil
	}
	if b[len(b)-1] != '\n' {
		t.Fatalf("%s: no trailing LF", path)
	}
	return bytes.Split(b[:len(b)-1], []byte("\n"))
}

func checkGolden(t *testing.T, dir string) {
	var events []event.Event
	for _, l := range readLines(t, filepath.Join(dir, "events.jsonl")) {
		e, err := event.ParseEvent(l)
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	r, err := Fold(events)
	if err != nil {
		t.Fatalf("Fold: %v", err)
	}
	want, err := os.ReadFile(filepath.Join(dir, "surface.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := append(r.JSON(), '\n'); !bytes.Equal(got, want) {
		t.Fatalf("surface:\n got %s\nwant %s", got, want)
	}
	if r.Generation != len(r.Replacements) {
		t.Fatalf("generation %d, %d replacements", r.Generation, len(r.Replacements))
	}

	f := NewFolder(0)
	for _, e := range events {
		if err := f.Push(e); err != nil {
			t.Fatalf("Push %d: %v", e.Seq, err)
		}
	}
	if got := f.Result().JSON(); !bytes.Equal(got, r.JSON()) {
		t.Fatalf("incremental %s != fold %s", got, r.JSON())
	}

	msgs, err := DeriveMessages(events, r)
	if err != nil {
		t.Fatalf("DeriveMessages: %v", err)
	}
	wantMsgs := readLines(t, filepath.Join(dir, "messages.jsonl"))
	if len(msgs) != len(wantMsgs) {
		t.Fatalf("%d messages, want %d", len(msgs), len(wantMsgs))
	}
	for i := range msgs {
		if !bytes.Equal(msgs[i], wantMsgs[i]) {
			t.Fatalf("message %d:\n got %s\nwant %s", i, msgs[i], wantMsgs[i])
		}
	}

	// Classification partitions the log; balance and traces are computable on every real session.
	cls := Classify(events, r)
	checkPartition(t, events, r, cls)
	if _, err := Balance(events, r); err != nil {
		t.Fatalf("Balance: %v", err)
	}
	tr, err := NewTracer(events)
	if err != nil {
		t.Fatal(err)
	}
	for _, rep := range r.Replacements {
		got, err := tr.Trace(rep.Seq)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.ReplacedEventSeqs, rep.ShadowedSeqs) {
			t.Fatalf("trace %d replaced %v, want %v", rep.Seq, got.ReplacedEventSeqs, rep.ShadowedSeqs)
		}
	}
}
