package jsonl_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/synth"
)

var (
	benchOnce sync.Once
	benchRoot string
	benchErr  error
)

// benchSession writes (once per process) a synthetic zstd session of about 100k events.
func benchSession(b *testing.B) string {
	benchOnce.Do(func() {
		dir, err := os.MkdirTemp("", "dshfs-bench-")
		if err != nil {
			benchErr = err
			return
		}
		benchRoot = filepath.Join(dir, "root")
		benchErr = synth.Write(benchRoot, jsonl.Zstd, "bench", 100_000)
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchRoot
}

// BenchmarkColdInspect measures what `dshfs cat --view events` does for a session nobody has opened: read
// the artifact, decode every frame, scan and validate every event, plan the repair. bench/load.sh runs the
// same operation against the harness's own inspect() for the ratio.
func BenchmarkColdInspect(b *testing.B) {
	root := benchSession(b)
	ctx := context.Background()
	var size int64
	if matches, _ := filepath.Glob(filepath.Join(root, "*", "*", "session.jsonl.zstd")); len(matches) == 1 {
		if buf, err := os.ReadFile(matches[0]); err == nil {
			if plain, err := jsonl.RawText(buf); err == nil {
				size = int64(len(plain))
			}
		}
	}
	b.SetBytes(size) // plaintext bytes per load
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bk, err := jsonl.Open(root, jsonl.Zstd)
		if err != nil {
			b.Fatal(err)
		}
		ins, err := eventstore.New(bk).Inspect(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if len(ins.Events) < 100_000 {
			b.Fatalf("%d events", len(ins.Events))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100_000, "ns/event")
}

// BenchmarkRawText is the decompression floor of a load: every frame decoded, nothing parsed.
func BenchmarkRawText(b *testing.B) {
	root := benchSession(b)
	matches, _ := filepath.Glob(filepath.Join(root, "*", "*", "session.jsonl.zstd"))
	buf, err := os.ReadFile(matches[0])
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		plain, err := jsonl.RawText(buf)
		if err != nil || !bytes.HasSuffix(plain, []byte("\n")) {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(plain)))
	}
}
