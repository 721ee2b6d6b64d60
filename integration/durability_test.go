package integration

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/harness"
)

// diskModel records, through the JSONL backend's test hook, what a power cut at any moment would leave:
// a file's content as of its last completed fsync (per inode), and a directory's entries as of its last
// completed fsync. Nothing else is durable.
type diskModel struct {
	mu      sync.Mutex
	content map[uint64][]byte          // inode → bytes at its last fsync
	entries map[string]map[string]bool // directory → names at its last fsync
}

func newDiskModel() *diskModel {
	return &diskModel{content: map[uint64][]byte{}, entries: map[string]map[string]bool{}}
}

func inode(t *testing.T, path string) uint64 {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return st.Ino
}

// hook is called before every durable step; the step's own success is checked by the flush that covers
// it, and the model is read only after an acknowledged flush, when every recorded step has completed.
func (d *diskModel) hook(t *testing.T) func(op jsonl.Op, path string) error {
	return func(op jsonl.Op, path string) error {
		d.mu.Lock()
		defer d.mu.Unlock()
		switch op {
		case jsonl.OpSync:
			b, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("model: read %s: %v", path, err)
				return nil
			}
			d.content[inode(t, path)] = b
		case jsonl.OpDirSync:
			ents, err := os.ReadDir(path)
			if err != nil {
				t.Errorf("model: readdir %s: %v", path, err)
				return nil
			}
			names := map[string]bool{}
			for _, e := range ents {
				names[e.Name()] = true
			}
			d.entries[path] = names
		}
		return nil
	}
}

// rebuild writes into dst the store under root as the model says it would survive a power cut now.
func (d *diskModel) rebuild(t *testing.T, root, dst string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var walk func(dir, out string)
	walk = func(dir, out string) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if !d.entries[dir][e.Name()] {
				continue // the name was never made durable by a directory fsync
			}
			p := filepath.Join(dir, e.Name())
			if e.IsDir() {
				if err := os.MkdirAll(filepath.Join(out, e.Name()), 0o700); err != nil {
					t.Fatal(err)
				}
				walk(p, filepath.Join(out, e.Name()))
				continue
			}
			if err := os.WriteFile(filepath.Join(out, e.Name()), d.content[inode(t, p)], 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !d.entries[filepath.Dir(root)][filepath.Base(root)] {
		return // the root itself is not durable yet
	}
	walk(root, dst)
}

// TestDurabilityProof: with the backend hook recording every write, fsync and link, at each acknowledged
// flush (and fork, and resume) a root rebuilt from only the bytes covered by completed fsyncs — of the
// files and of their directories — opens with every acknowledged event, in dshfs and (at sampled points)
// in the harness.
func TestDurabilityProof(t *testing.T) {
	t.Parallel()
	h := harness.Get(t)
	for _, mode := range []jsonl.Compression{jsonl.None, jsonl.Zstd} {
		t.Run(string(mode), func(t *testing.T) {
			ctx := context.Background()
			base := t.TempDir()
			root := filepath.Join(base, "store", "sessions")
			b, err := jsonl.Open(root, mode)
			if err != nil {
				t.Fatal(err)
			}
			model := newDiskModel()
			b.SetHook(model.hook(t))
			st := eventstore.New(b)
			defer st.Close(ctx)
			rng := rand.New(rand.NewSource(time.Now().UnixNano()))
			acked := map[string][]string{} // session → acknowledged event lines
			type sample struct {
				dir   string
				acked map[string][]string
			}
			var samples []sample // rebuilt roots kept for the harness, with what was acknowledged then
			checked := 0
			check := func(what string) {
				t.Helper()
				dst := filepath.Join(base, fmt.Sprintf("rebuilt-%d", len(samples)))
				model.rebuild(t, root, dst)
				re, err := jsonl.Open(dst, mode)
				if err != nil {
					t.Fatal(err)
				}
				rst := eventstore.New(re)
				for id, want := range acked {
					p, err := rst.ReadFrom(ctx, id, 0)
					if err != nil {
						t.Fatalf("%s: %s does not survive a power cut: %v", what, id, err)
					}
					if len(p.Events) < len(want) {
						t.Fatalf("%s: %s keeps %d of %d acknowledged events", what, id, len(p.Events), len(want))
					}
					for i, l := range want {
						if string(p.Events[i].Raw) != l {
							t.Fatalf("%s: %s event %d differs", what, id, i)
						}
					}
				}
				if rng.Intn(8) == 0 || len(samples) == 0 {
					copied := map[string][]string{}
					for id, l := range acked {
						copied[id] = append([]string(nil), l...)
					}
					samples = append(samples, sample{dst, copied})
				} else {
					os.RemoveAll(dst)
				}
				checked++
			}
			cwd := event.String("/srv/durable")
			if err := st.Create(ctx, event.Header{ID: "s", CreatedAt: 1, Cwd: &cwd}); err != nil {
				t.Fatal(err)
			}
			acked["s"] = nil
			check("create")
			w, err := st.Writer(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			next := 0
			var rest []string // the end of a turn an earlier step left open, which this one finishes first
			for step := 0; step < 60; step++ {
				var in [][]byte
				for _, l := range rest {
					in = append(in, []byte(l))
				}
				turn := turnLines(step+1, int64(next+len(rest)), false)
				k := len(turn) // mostly whole turns, sometimes a turn left open
				if rng.Intn(3) == 0 {
					k = 1 + rng.Intn(len(turn))
				}
				for _, l := range turn[:k] {
					in = append(in, []byte(l))
				}
				rest = turn[k:]
				if err := w.Accept(in); err != nil {
					t.Fatalf("accept: %v", err)
				}
				next += len(in)
				if rng.Intn(3) > 0 {
					continue
				}
				if err := w.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				snap := w.Snapshot()
				acked["s"] = nil
				for _, e := range snap.Events {
					acked["s"] = append(acked["s"], string(e.Raw))
				}
				check(fmt.Sprintf("flush at step %d", step))
			}
			// a fork is acknowledged when Fork returns: the child must survive with its whole seed
			snap := w.Snapshot()
			boundary := -1
			for i, e := range snap.Events {
				if e.Type == "turn/end" {
					boundary = i
				}
			}
			if boundary < 0 {
				boundary = 0
				for i, e := range snap.Events {
					if e.Type == "turn/start" {
						break
					}
					boundary = i
				}
			}
			at := int64(boundary)
			child, err := st.Fork(ctx, "s", &at, "child")
			if err != nil {
				t.Fatal(err)
			}
			ins, err := st.Inspect(ctx, child)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ins.Events {
				acked[child] = append(acked[child], string(e.Raw))
			}
			snap = w.Snapshot()
			acked["s"] = nil
			for _, e := range snap.Events {
				acked["s"] = append(acked["s"], string(e.Raw))
			}
			check("fork")
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			// a resume commits a repair (a cut, a sidecar, an append) and an end-seed
			if _, err := st.Resume(ctx, "s"); err != nil {
				t.Fatal(err)
			}
			ins, err = st.Inspect(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			acked["s"] = nil
			for _, e := range ins.Events {
				acked["s"] = append(acked["s"], string(e.Raw))
			}
			check("resume")
			// the harness opens the sampled rebuilt roots with every event acknowledged at that point
			for _, smp := range samples {
				for id, want := range smp.acked {
					answers, err := h.Dump(smp.dir, id)
					if err != nil {
						t.Fatal(err)
					}
					if len(answers) != 1 || answers[0].StoredError != "" {
						t.Fatalf("%s: the harness does not read %s: %+v", smp.dir, id, answers)
					}
					if got := answers[0].Stored; len(got) < len(want) || diff(got[:len(want)], want) != "" {
						t.Fatalf("%s: the harness reads %d events of %s, not the %d acknowledged", smp.dir, len(got), id, len(want))
					}
				}
			}
			t.Logf("%s: %d rebuilt roots checked by dshfs, %d of them by the harness", mode, checked, len(samples))
		})
	}
}
