package integration

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/fixtures"
	"github.com/dshfs/dshfs/internal/harness"
)

// TestRepairMatchesHarness commits the crash repair of the crashed and torn fixture sessions twice — once
// with dshfs's Load, once with the harness's own load() on a second copy — and requires the same
// transcript: identical bytes in raw mode, identical decoded frames in zstd mode (our compressor is not
// libzstd, so compressed bytes may differ).
func TestRepairMatchesHarness(t *testing.T) {
	h := harness.Get(t)
	ids := []string{
		"main-session-30628611-e45f-4f98-9688-010e1428e585", // crash: open turn after a durable tool/call
		"main-session-c652f155-0402-4151-9cf3-89ee925d873b", // crash-torn: last batch cut in half
	}
	for _, mode := range []jsonl.Compression{jsonl.None, jsonl.Zstd} {
		set := map[jsonl.Compression]string{jsonl.None: "raw", jsonl.Zstd: "zstd"}[mode]
		t.Run(set, func(t *testing.T) {
			ours := fixtures.CopyTree(t, fixtures.Path(t, "generated", set))
			theirs := fixtures.CopyTree(t, fixtures.Path(t, "generated", set))
			b, err := jsonl.Open(ours, mode)
			if err != nil {
				t.Fatal(err)
			}
			st := eventstore.New(b)
			for _, id := range ids {
				if _, err := st.Load(context.Background(), id); err != nil {
					t.Fatalf("%s: %v", id, err)
				}
			}
			answers, err := h.Load(theirs, ids...)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range answers {
				if a.Error != "" {
					t.Fatalf("harness load %s: %s", a.ID, a.Error)
				}
			}
			for _, id := range ids {
				rel := filepath.Join("--home-dev-projects-acme-api--", id, "session"+mode.Suffix())
				got, err := os.ReadFile(filepath.Join(ours, rel))
				if err != nil {
					t.Fatal(err)
				}
				want, err := os.ReadFile(filepath.Join(theirs, rel))
				if err != nil {
					t.Fatal(err)
				}
				if mode == jsonl.Zstd {
					gf, _, err1 := jsonl.ScanFrames(got, 0)
					wf, _, err2 := jsonl.ScanFrames(want, 0)
					if err1 != nil || err2 != nil || len(gf) != len(wf) {
						t.Errorf("%s: %d frames, the harness wrote %d (%v %v)", id, len(gf), len(wf), err1, err2)
					}
					if got, err = jsonl.RawText(got); err != nil {
						t.Fatal(err)
					}
					if want, err = jsonl.RawText(want); err != nil {
						t.Fatal(err)
					}
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s: repaired transcript differs from the harness's\n got: %.300q\nwant: %.300q", id, tail(got), tail(want))
				}
				orig, _ := os.ReadFile(filepath.Join(fixtures.Path(t, "generated", set), rel))
				if bytes.Equal(orig, got) {
					t.Errorf("%s: nothing was repaired", id)
				}
			}
		})
	}
}

func tail(b []byte) []byte {
	if len(b) > 600 {
		return b[len(b)-600:]
	}
	return b
}
