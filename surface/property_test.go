package surface

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
)

// checkPartition asserts that Classify gives each seq exactly one class, current = Nodes and
// shadowed = the union of ShadowedSeqs (minus anything current, which a valid fold never has).
func checkPartition(t testing.TB, events []event.Event, r *Result, cls []Class) {
	t.Helper()
	if len(cls) != len(events) {
		t.Fatalf("%d classes for %d events", len(cls), len(events))
	}
	current := map[int64]bool{}
	for _, s := range r.Nodes {
		current[s] = true
	}
	shadowed := map[int64]bool{}
	for _, rep := range r.Replacements {
		for _, s := range rep.ShadowedSeqs {
			if current[s] || shadowed[s] {
				t.Fatalf("seq %d shadowed twice or still current", s)
			}
			shadowed[s] = true
		}
	}
	for i, c := range cls {
		seq := int64(i)
		want := LogOnly
		if current[seq] {
			want = Current
		} else if shadowed[seq] {
			want = Shadowed
		}
		if c != want {
			t.Fatalf("seq %d classified %s, want %s", seq, c, want)
		}
	}
}

// genLog builds a random valid log from appends, log-only events, positional replaces (nested ones
// whose start seq is numerically above the end seq included) and tool/result rewrites, and returns it
// with the surface an independent simulation expects.
func genLog(t testing.TB, rng *rand.Rand, n int) ([]event.Event, []int64) {
	var events []event.Event
	var nodes []int64
	types := map[int64]string{}
	tools := map[int64][2]string{} // seq -> message id, call id
	earlier := func(seq int64, k int) []int64 {
		var out []int64
		for range k {
			s := rng.Int64N(seq)
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		return out
	}
	for seq := int64(0); seq < int64(n); seq++ {
		var e event.Event
		kind := rng.IntN(10)
		switch {
		case kind < 3:
			e = ev(t, []string{"turn/start", "assistant/chunk", "tool/call", "step/end", "compaction/start"}[rng.IntN(5)], seq, `{"turn":1}`)
		case kind < 5:
			var extra []string
			if seq > 0 && rng.IntN(2) == 0 {
				extra = append(extra, "sourceEventSeqs", seqsJSON(earlier(seq, 1+rng.IntN(3))...))
			}
			e = userMsg(t, seq, fmt.Sprint("u", seq), "hi", append(extra, "surfaceOp", `"append"`)...)
			nodes = append(nodes, seq)
		case kind < 6:
			extra := []string{}
			switch rng.IntN(3) {
			case 0:
				extra = append(extra, "sourceEventSeqs", "[]")
			case 1:
				if seq > 0 {
					extra = append(extra, "sourceEventSeqs", seqsJSON(earlier(seq, 3)...))
				}
			}
			content := `[{"type":"tool-call","id":"c","name":"n","arguments":"{}"}]`
			if rng.IntN(4) == 0 {
				content = `[]`
			}
			e = asstMsg(t, seq, fmt.Sprint("a", seq), content, append(extra, "surfaceOp", `"append"`)...)
			nodes = append(nodes, seq)
		case kind < 7:
			id, call := fmt.Sprint("t", seq), fmt.Sprint("c", seq)
			tools[seq] = [2]string{id, call}
			e = toolRes(t, seq, id, call, "out", rng.IntN(2) == 0, "surfaceOp", `"append"`)
			nodes = append(nodes, seq)
		default:
			if len(nodes) == 0 {
				e = logOnly(t, "todo/write", seq)
				break
			}
			// Rewrite a current tool/result when one exists and the dice say so.
			var toolPos []int
			for i, s := range nodes {
				if types[s] == "tool/result" {
					toolPos = append(toolPos, i)
				}
			}
			if len(toolPos) > 0 && rng.IntN(2) == 0 {
				i := toolPos[rng.IntN(len(toolPos))]
				orig := nodes[i]
				ids := tools[orig]
				origEv := events[orig]
				isErr, _ := event.Lookup(origEv.Raw, "data", "message", "content")
				e = toolRes(t, seq, ids[0], ids[1], fmt.Sprint("pruned ", seq), bytes.Contains(isErr, []byte(`"isError":true`)),
					"sourceEventSeqs", seqsJSON(orig), "surfaceOp", replaceOpJSON(orig, orig))
				tools[seq] = ids
				nodes[i] = seq
				break
			}
			i := rng.IntN(len(nodes))
			j := i + rng.IntN(min(len(nodes)-i, 4))
			shadowed := slices.Clone(nodes[i : j+1])
			srcs := slices.Clone(shadowed)
			rng.Shuffle(len(srcs), func(a, b int) { srcs[a], srcs[b] = srcs[b], srcs[a] })
			for _, extra := range earlier(seq, 2) {
				if !slices.Contains(srcs, extra) {
					srcs = append(srcs, extra)
				}
			}
			op := replaceOpJSON(nodes[i], nodes[j])
			if rng.IntN(2) == 0 {
				e = userMsg(t, seq, fmt.Sprint("s", seq), "summary", "sourceEventSeqs", seqsJSON(srcs...), "surfaceOp", op)
			} else {
				e = asstMsg(t, seq, fmt.Sprint("s", seq), `[{"type":"text","text":"s"}]`, "sourceEventSeqs", seqsJSON(srcs...), "surfaceOp", op)
			}
			nodes = append(nodes[:i], append([]int64{seq}, nodes[j+1:]...)...)
		}
		types[seq] = e.Type
		events = append(events, e)
	}
	return events, nodes
}

func TestPropertyIncrementalEqualsFold(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	nested := 0
	for iter := range 300 {
		n := 1 + rng.IntN(120)
		if iter%50 == 0 {
			n = 2000 // long enough to exercise the position map
		}
		events, wantNodes := genLog(t, rng, n)
		r, err := Fold(events)
		if err != nil {
			t.Fatalf("iter %d: Fold: %v", iter, err)
		}
		if !slices.Equal(r.Nodes, wantNodes) {
			t.Fatalf("iter %d: nodes %v, simulation %v", iter, r.Nodes, wantNodes)
		}
		f := NewFolder(0)
		for k, e := range events {
			if err := f.Push(e); err != nil {
				t.Fatalf("iter %d: Push: %v", iter, err)
			}
			// Spot-check prefixes: the incremental state equals a fold of the prefix at every point.
			if k%17 == 0 {
				if got, want := f.Result().JSON(), mustFold(t, events[:k+1]).JSON(); !bytes.Equal(got, want) {
					t.Fatalf("iter %d prefix %d: %s != %s", iter, k, got, want)
				}
			}
		}
		if got := f.Result(); !bytes.Equal(got.JSON(), r.JSON()) || got.Generation != r.Generation {
			t.Fatalf("iter %d: folder %s != fold %s", iter, got.JSON(), r.JSON())
		}
		for _, rep := range r.Replacements {
			if rep.Start > rep.End {
				nested++
			}
		}
		checkPartition(t, events, r, Classify(events, r))
		if _, err := DeriveMessages(events, r); err != nil {
			t.Fatal(err)
		}
	}
	if nested == 0 {
		t.Fatal("generator produced no replace whose start seq exceeds its end seq")
	}
}

// TestFolderSnapshot: a Result is a snapshot that later pushes never change — appends past its end, and
// replaces (which write inside the nodes it shares, and so work on a copy: a one-node prune in place, a
// range replace that moves the nodes after it) — and a fold of every prefix, taken while the folder moves
// on, reads as Fold of that prefix.
func TestFolderSnapshot(t *testing.T) {
	events := []event.Event{
		userMsg(t, 0, "a", "a", "surfaceOp", `"append"`),
		userMsg(t, 1, "b", "b", "sourceEventSeqs", "[0]", "surfaceOp", replaceOpJSON(0, 0)),
		userMsg(t, 2, "c", "c", "surfaceOp", `"append"`),
		userMsg(t, 3, "d", "d", "surfaceOp", `"append"`),
		userMsg(t, 4, "e", "e", "sourceEventSeqs", "[2]", "surfaceOp", replaceOpJSON(2, 2)),
		userMsg(t, 5, "f", "f", "surfaceOp", `"append"`),
		userMsg(t, 6, "g", "g", "sourceEventSeqs", "[1,4]", "surfaceOp", replaceOpJSON(1, 4)),
		userMsg(t, 7, "h", "h", "surfaceOp", `"append"`),
	}
	f := NewFolder(0)
	var held []*Result
	var want []string
	for i, e := range events {
		if err := f.Push(e); err != nil {
			t.Fatal(err)
		}
		r := f.Result()
		whole, err := Fold(events[:i+1])
		if err != nil {
			t.Fatal(err)
		}
		held, want = append(held, r), append(want, string(whole.JSON()))
	}
	for i, r := range held {
		if got := string(r.JSON()); got != want[i] {
			t.Fatalf("the snapshot after event %d changed as the folder moved on: %s, want %s", i, got, want[i])
		}
	}
}

// TestFolderWindow mirrors the harness's windowed SurfaceManager tests (baseSeq 400000).
func TestFolderWindow(t *testing.T) {
	const base = 400_000
	f := NewFolder(base)
	for _, e := range []event.Event{
		userMsg(t, base, "a", "a", "surfaceOp", `"append"`),
		userMsg(t, base+1, "b", "b", "surfaceOp", `"append"`),
		userMsg(t, base+2, "c", "c", "sourceEventSeqs", seqsJSON(base), "surfaceOp", replaceOpJSON(base, base)),
	} {
		if err := f.Push(e); err != nil {
			t.Fatal(err)
		}
	}
	if r := f.Result(); !slices.Equal(r.Nodes, []int64{base + 2, base + 1}) || r.Generation != 1 {
		t.Fatalf("window fold %s", r.JSON())
	}

	g := NewFolder(base)
	orig := toolRes(t, base, "t", "call", "x", false, "surfaceOp", `"append"`)
	if err := g.Push(orig); err != nil {
		t.Fatal(err)
	}
	if err := g.Push(toolRes(t, base+1, "t", "call", "y", false, "sourceEventSeqs", seqsJSON(base), "surfaceOp", replaceOpJSON(base, base))); err != nil {
		t.Fatalf("tool rewrite in a window: %v", err)
	}

	h := NewFolder(base)
	if err := h.Push(userMsg(t, base, "a", "a", "surfaceOp", `"append"`)); err != nil {
		t.Fatal(err)
	}
	err := h.Push(userMsg(t, base+1, "b", "b", "sourceEventSeqs", seqsJSON(base-1, base), "surfaceOp", replaceOpJSON(base-1, base)))
	if err == nil || err.Error() != "surface replace: start seq 399999 not found in surface" {
		t.Fatalf("crossing the window head: %v", err)
	}
	if err := h.Push(userMsg(t, base, "a", "a", "surfaceOp", `"append"`)); err == nil || err.Error() != "session event seq 400000 is not contiguous; expected 400001" {
		t.Fatalf("repeat seq: %v", err)
	}
}
