// The Go half of bench/surface.sh. It lives in the external test package because loading a stored
// session needs eventstore, which imports surface.
package surface_test

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/synth"
	"github.com/dshfs/dshfs/surface"
)

// compareLog is the stored log both sides of bench/surface.sh fold: the session DSHFS_BENCH_ID in the
// JSONL root DSHFS_BENCH_ROOT when both are set (the harness reads the very same file), otherwise a fresh
// synthetic session of DSHFS_BENCH_EVENTS (default 500000) events written by internal/synth. It is
// loaded once per test binary, as the Node side loads once and then repeats the fold in-process.
var compareLog = sync.OnceValues(func() ([]event.Event, error) {
	root, id := os.Getenv("DSHFS_BENCH_ROOT"), os.Getenv("DSHFS_BENCH_ID")
	if root == "" || id == "" {
		n := 500_000
		if s := os.Getenv("DSHFS_BENCH_EVENTS"); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil || v < 1 {
				return nil, &os.PathError{Op: "DSHFS_BENCH_EVENTS", Path: s, Err: os.ErrInvalid}
			}
			n = v
		}
		dir, err := os.MkdirTemp("", "dshfs-bench-surface-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		root, id = dir, "bench"
		if err := synth.Write(root, jsonl.Zstd, id, n); err != nil {
			return nil, err
		}
	}
	b, err := jsonl.Open(root, "")
	if err != nil {
		return nil, err
	}
	// Inspect, never Load: the benchmark must not repair (write to) a store the harness also reads.
	ins, err := eventstore.New(b).Inspect(context.Background(), id)
	if err != nil {
		return nil, err
	}
	return ins.Events, nil
})

func loadCompareLog(b *testing.B) []event.Event {
	b.Helper()
	events, err := compareLog()
	if err != nil {
		b.Fatal(err)
	}
	return events
}

// BenchmarkCompareFoldDerive is what bench/surface.sh sets against the harness's foldSurface followed by
// Session.create(...).deriveMessages(): one Fold and one DeriveMessages over an already-loaded log.
func BenchmarkCompareFoldDerive(b *testing.B) {
	events := loadCompareLog(b)
	var messages int
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r, err := surface.Fold(events)
		if err != nil {
			b.Fatal(err)
		}
		msgs, err := surface.DeriveMessages(events, r)
		if err != nil {
			b.Fatal(err)
		}
		messages = len(msgs)
	}
	b.ReportMetric(float64(len(events)), "events")
	b.ReportMetric(float64(messages), "messages")
}

// BenchmarkCompareFold is the fold alone, set against foldSurface alone, so a gap in the combined figure
// can be attributed to one half.
func BenchmarkCompareFold(b *testing.B) {
	events := loadCompareLog(b)
	var nodes int
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r, err := surface.Fold(events)
		if err != nil {
			b.Fatal(err)
		}
		nodes = len(r.Nodes)
	}
	b.ReportMetric(float64(nodes), "nodes")
}
