package jsonl_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/synth"
)

// TestRowMembers: a load marks in Prefix.RowMembers exactly the events that are members of chunk rows,
// from a zstd artifact (frames in pieces) and from a raw one, as re-decoding the plaintext line by line
// says.
func TestRowMembers(t *testing.T) {
	for _, mode := range []jsonl.Compression{jsonl.Zstd, jsonl.None} {
		root := filepath.Join(t.TempDir(), "root")
		if err := synth.Write(root, mode, "rows", 3000); err != nil {
			t.Fatal(err)
		}
		b, err := jsonl.Open(root, mode)
		if err != nil {
			t.Fatal(err)
		}
		p, err := b.LoadStored(context.Background(), "rows")
		if err != nil {
			t.Fatal(err)
		}
		paths, _ := filepath.Glob(filepath.Join(root, "*", "rows", "session.jsonl*"))
		if len(paths) != 1 {
			t.Fatalf("%s: artifacts %v", mode, paths)
		}
		file, err := os.ReadFile(paths[0])
		if err != nil {
			t.Fatal(err)
		}
		plain := file
		if mode == jsonl.Zstd {
			if plain, err = jsonl.RawText(file); err != nil {
				t.Fatal(err)
			}
		}
		var want []bool
		for _, line := range bytes.Split(plain, []byte("\n"))[1:] { // after the header
			if len(line) == 0 {
				continue
			}
			raw, err := event.Canonical(line)
			if err != nil {
				t.Fatal(err)
			}
			evs, row, err := event.DecodeStored(raw)
			if err != nil {
				t.Fatal(err)
			}
			for range evs {
				want = append(want, row)
			}
		}
		if len(want) != len(p.Events) {
			t.Fatalf("%s: %d events loaded, %d decoded", mode, len(p.Events), len(want))
		}
		marked := 0
		for i, w := range want {
			got := i/64 < len(p.RowMembers) && p.RowMembers[i/64]&(1<<(i%64)) != 0
			if got != w {
				t.Fatalf("%s: event %d (%s) marked %v, a row member %v", mode, i, p.Events[i].Raw, got, w)
			}
			if got {
				marked++
			}
		}
		if marked == 0 || marked == len(want) {
			t.Fatalf("%s: %d of %d events marked: the test exercises too little", mode, marked, len(want))
		}
	}
}
