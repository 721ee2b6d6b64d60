package viewcache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"testing"

	"github.com/dshfs/dshfs/compaction"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/storetest"
	"github.com/dshfs/dshfs/views"
)

// liveFixture is a store holding session id live in an engine, and a cache whose loader reads the
// engine's snapshots as the mount does (fs.load: the engine is the snapshot's lineage).
func liveFixture(t testing.TB, id string) (*eventstore.Store, *eventstore.Session, *Cache) {
	t.Helper()
	ctx := context.Background()
	st := storetest.Raw(t)
	t.Cleanup(func() { st.Close(ctx) })
	cwd := event.String("/p")
	if err := st.Create(ctx, event.Header{ID: id, CreatedAt: 1, Cwd: &cwd}); err != nil {
		t.Fatal(err)
	}
	w, err := st.Writer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	c := New(Config{SessionsBytes: 256 << 20, ViewsBytes: 16 << 20, IndexDir: t.TempDir(),
		Store: Store{Backend: st.Backend().Name(), Root: "test"},
		Load: func(ctx context.Context, id string) (*views.Session, error) {
			if w := st.Live(id); w != nil {
				s := views.FromSnapshot(st, w.Snapshot(), views.Options{})
				s.Lineage = w
				return s, nil
			}
			return views.Load(ctx, st, id, views.Options{})
		}})
	return st, w, c
}

// turnLines is one complete turn numbered n in the append syntax: a user message and an assistant
// message join the surface, the brackets do not.
func turnLines(n int) [][]byte {
	return [][]byte{
		fmt.Appendf(nil, `{"type":"turn/start","data":{"turn":%d}}`, n),
		fmt.Appendf(nil, `{"type":"step/start","data":{"turn":%d,"step":1}}`, n),
		fmt.Appendf(nil, `{"type":"user/message","data":{"id":"u%d","role":"user","content":[{"type":"text","text":"question"}],"source":{"kind":"user"}},"surfaceOp":"append"}`, n%10),
		fmt.Appendf(nil, `{"type":"assistant/message","data":{"turn":%d,"step":1,"message":{"id":"a%d","role":"assistant","content":[{"type":"text","text":"answer"}],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}`, n, n%10),
		fmt.Appendf(nil, `{"type":"step/end","data":{"turn":%d,"step":1}}`, n),
		fmt.Appendf(nil, `{"type":"turn/end","data":{"turn":%d,"reason":{"kind":"completed"}}}`, n),
	}
}

// grow appends turns [from, to) to the live session in one request and flushes them, as `append` and
// `echo flush > ctl` do.
func grow(t *testing.T, w *eventstore.Session, from, to int) {
	t.Helper()
	var lines [][]byte
	for n := from; n < to; n++ {
		lines = append(lines, turnLines(n)...)
	}
	if err := w.Accept(lines); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// liveKey is the key of a view of the live session at its revision now.
func liveKey(w *eventstore.Session, view views.View) Key {
	return Key{Session: w.ID(), View: view, Revision: w.Revision(), Live: true}
}

// bytesOf reads a rendering whole, from memory or its Blob.
func bytesOf(t *testing.T, r Rendered) []byte {
	t.Helper()
	if r.Blob == nil {
		return r.Data
	}
	b, err := io.ReadAll(io.NewSectionReader(r.Blob, 0, r.Blob.Size()))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fresh is view rendered whole from the engine's snapshot now, by a session that shares nothing with
// the cache's renderings (no lineage, nothing kept): what `dshfs cat --view` of a live session renders.
func fresh(t *testing.T, st *eventstore.Store, w *eventstore.Session, view views.View) []byte {
	t.Helper()
	b, err := views.FromSnapshot(st, w.Snapshot(), views.Options{}).Render(context.Background(), view)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var growViews = []views.View{views.Events, views.Surface, views.Messages}

// batchWork appends batches of k turns to a live session first grown to n turns, reading every growable
// view after each batch, and returns the work the cache did per batch for each view: what a batch costs.
func batchWork(t *testing.T, n, k, batches int) map[views.View]Work {
	ctx := context.Background()
	st, w, c := liveFixture(t, fmt.Sprintf("work-%d", n))
	for done := 1; done <= n; done += 1000 {
		grow(t, w, done, min(done+1000, n+1))
	}
	for _, v := range growViews {
		if _, err := c.Get(ctx, liveKey(w, v)); err != nil {
			t.Fatal(err)
		}
	}
	per := map[views.View]Work{}
	next := n + 1
	for b := 0; b < batches; b++ {
		before := len(w.Snapshot().Events)
		grow(t, w, next, next+k)
		next += k
		added := w.Snapshot().Events[before:]
		for _, v := range growViews {
			was := c.Work()
			r, err := c.Get(ctx, liveKey(w, v))
			if err != nil {
				t.Fatal(err)
			}
			now := c.Work()
			d := Work{Renders: now.Renders - was.Renders, RenderedBytes: now.RenderedBytes - was.RenderedBytes,
				Extends: now.Extends - was.Extends, ExtendedBytes: now.ExtendedBytes - was.ExtendedBytes}
			if d.Renders != 0 || d.Extends != 1 {
				t.Fatalf("n=%d %s batch %d: %d whole renderings and %d extensions, want none and one", n, v, b, d.Renders, d.Extends)
			}
			if v == views.Events && r.Size() >= blobMin && r.Blob == nil {
				t.Fatalf("n=%d: events.jsonl of %d bytes is held in memory, not in its file", n, r.Size())
			}
			if v == views.Events {
				var want int64
				for _, e := range added {
					want += int64(len(e.Raw)) + 1
				}
				if d.ExtendedBytes != want {
					t.Fatalf("n=%d batch %d: events.jsonl grew by %d bytes rendered, want the batch's %d", n, b, d.ExtendedBytes, want)
				}
			}
			if got, want := bytesOf(t, r), fresh(t, st, w, v); !bytes.Equal(got, want) {
				t.Fatalf("n=%d %s batch %d: the extended view (%d bytes) differs from a whole rendering (%d bytes)", n, v, b, len(got), len(want))
			}
			p := per[v]
			p.Extends += d.Extends
			p.ExtendedBytes += d.ExtendedBytes
			per[v] = p
		}
	}
	return per
}

// TestLiveBatchWorkIsFlat: a batch appended to a live session costs the cache the batch's lines, whatever
// the session's length — the same work, byte for byte up to the width of the numbers in the lines, at 400
// and at 4,000 turns (2,400 and 24,000 events; the larger one's events.jsonl is past blobMin, so it grows
// in its file) — and never a whole rendering of the view. It counts the work rather than timing it.
func TestLiveBatchWorkIsFlat(t *testing.T) {
	const k, batches = 5, 4
	small := batchWork(t, 400, k, batches)
	large := batchWork(t, 4000, k, batches)
	for _, v := range growViews {
		s, l := small[v].ExtendedBytes, large[v].ExtendedBytes
		if s == 0 {
			t.Fatalf("%s: nothing rendered for %d batches", v, batches)
		}
		// the larger session's seqs and turn numbers are a digit longer: at most two per line
		slack := int64(2 * batches * k * len(turnLines(0)))
		if l < s || l > s+slack {
			t.Fatalf("%s: %d bytes rendered for %d batches at 24k events, %d at 2.4k: the work grew with the session", v, l, batches, s)
		}
		t.Logf("%s: %d bytes rendered for %d batches at 2.4k events, %d at 24k", v, s, batches, l)
	}
}

// TestLiveViewsMatchWholeRenderings: after every batch — appends, an edit that replaces a surface node,
// a compaction — each growable view of the live session reads exactly as a whole rendering of the same
// snapshot; a batch that replaces part of the surface renders surface.jsonl and messages.jsonl whole
// (the fallback) while events.jsonl is still extended; and once the session is closed, the views read from
// the stored log are the bytes the live ones were.
func TestLiveViewsMatchWholeRenderings(t *testing.T) {
	ctx := context.Background()
	st, w, c := liveFixture(t, "match")
	edit := func(seq int64) [][]byte {
		return [][]byte{fmt.Appendf(nil, `{"type":"user/message","data":{"id":"e%d","role":"user","content":[{"type":"text","text":"edited"}],"source":{"kind":"user"}},"sourceEventSeqs":[%d],"surfaceOp":{"op":"replace","start":%d,"end":%d}}`, seq, seq, seq, seq)}
	}
	steps := []struct {
		name     string
		do       func()
		rewrites bool // the batch replaces part of the surface
	}{
		{"first turns", func() { grow(t, w, 1, 4) }, false},
		{"one turn", func() { grow(t, w, 4, 5) }, false},
		{"nothing new, flushed again", func() {
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"an edit replacing the first user message", func() {
			if err := w.Accept(edit(2)); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"turns after the edit", func() { grow(t, w, 5, 8) }, false},
		{"a compaction", func() {
			out, err := compaction.Compact(ctx, w, compaction.Request{Summarizer: &compaction.Extractive{}})
			if err != nil || out.Nothing {
				t.Fatalf("compaction: %v %+v", err, out)
			}
		}, true},
		{"turns after the compaction", func() { grow(t, w, 8, 12) }, false},
		{"an edit and turns in one request", func() {
			lines := append(turnLines(12), edit(int64(len(w.Snapshot().Events)+2))...)
			if err := w.Accept(lines); err != nil {
				t.Fatal(err)
			}
		}, true},
	}
	for _, step := range steps {
		step.do()
		// status.json scans only the batch (views.Session.Continue) and must read as a whole scan does
		r, err := c.Get(ctx, liveKey(w, views.Status))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := bytesOf(t, r), fresh(t, st, w, views.Status); !bytes.Equal(got, want) {
			t.Fatalf("%s: status.json differs from a whole rendering:\n%s\nwant\n%s", step.name, got, want)
		}
		for _, v := range growViews {
			was := c.Work()
			r, err := c.Get(ctx, liveKey(w, v))
			if err != nil {
				t.Fatalf("%s: %s: %v", step.name, v, err)
			}
			if got, want := bytesOf(t, r), fresh(t, st, w, v); !bytes.Equal(got, want) {
				t.Fatalf("%s: %s differs from a whole rendering:\n%s\nwant\n%s", step.name, v, got, want)
			}
			now := c.Work()
			whole := now.Renders > was.Renders
			if want := step.rewrites && v != views.Events; whole != want && step.name != "first turns" {
				t.Errorf("%s: %s rendered whole: %v, want %v", step.name, v, whole, want)
			}
		}
	}
	// a turn's file follows its turn across batches: extended while it is open, by nothing once it ended
	open := turnLines(13)
	for i, part := range [][][]byte{open[:3], open[3:5], open[5:], turnLines(14)} {
		if err := w.Accept(part); err != nil {
			t.Fatal(err)
		}
		for _, n := range []int64{13, 1} {
			v := views.Turn(n)
			was := c.Work()
			r, err := c.Get(ctx, liveKey(w, v))
			if err != nil {
				t.Fatalf("turn %d after part %d: %v", n, i, err)
			}
			if got, want := bytesOf(t, r), fresh(t, st, w, v); !bytes.Equal(got, want) {
				t.Fatalf("turn %d after part %d differs from a whole rendering:\n%s\nwant\n%s", n, i, got, want)
			}
			if now := c.Work(); i > 0 && (now.Renders != was.Renders || now.Extends != was.Extends+1) {
				t.Fatalf("turn %d after part %d: %d whole renderings and %d extensions, want none and one", n, i, now.Renders-was.Renders, now.Extends-was.Extends)
			}
		}
	}
	live := map[views.View][]byte{}
	for _, v := range growViews {
		r, err := c.Get(ctx, liveKey(w, v))
		if err != nil {
			t.Fatal(err)
		}
		live[v] = bytesOf(t, r)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	stored, err := views.Load(ctx, st, "match", views.Options{})
	if err != nil || stored.Refusal != nil {
		t.Fatalf("load: %v %v", err, stored.Refusal)
	}
	for _, v := range growViews {
		b, err := stored.Render(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, live[v]) {
			t.Fatalf("%s read from the stored log differs from the live view", v)
		}
	}

	// written again, the session has a new engine: its first reading is whole (the old growing rendering
	// is of another lineage and is replaced), the next batch extends the new one
	w2, err := st.Writer(ctx, "match")
	if err != nil {
		t.Fatal(err)
	}
	for i, wantWhole := range []bool{true, false} {
		if i > 0 {
			grow(t, w2, 15, 17)
		}
		was := c.Work()
		r, err := c.Get(ctx, liveKey(w2, views.Events))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := bytesOf(t, r), fresh(t, st, w2, views.Events); !bytes.Equal(got, want) {
			t.Fatalf("reopened, reading %d: events.jsonl differs from a whole rendering", i)
		}
		if whole := c.Work().Renders > was.Renders; whole != wantWhole {
			t.Fatalf("reopened, reading %d: rendered whole %v, want %v", i, whole, wantWhole)
		}
	}
}

// BenchmarkLiveBatch is the cost of one batch appended to a live session of 10k and of 500k events: the
// engine accepting one turn (6 events, not flushed: an fsync would drown the rest), then events.jsonl,
// surface.jsonl, messages.jsonl and status.json read at the new revision. Flat across the sizes means
// the views cost the batch, not the session (docs/performance.md).
func BenchmarkLiveBatch(b *testing.B) {
	for _, events := range []int{10_000, 500_000} {
		turns := events / 6
		b.Run(fmt.Sprintf("events=%dk", events/1000), func(b *testing.B) {
			ctx := context.Background()
			_, w, c := liveFixture(b, "bench")
			for done := 1; done <= turns; done += 2000 {
				var lines [][]byte
				for n := done; n < min(done+2000, turns+1); n++ {
					lines = append(lines, turnLines(n)...)
				}
				if err := w.Accept(lines); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			read := []views.View{views.Events, views.Surface, views.Messages, views.Status}
			for _, v := range read {
				if _, err := c.Get(ctx, liveKey(w, v)); err != nil {
					b.Fatal(err)
				}
			}
			next := turns + 1
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := w.Accept(turnLines(next)); err != nil {
					b.Fatal(err)
				}
				next++
				for _, v := range read {
					if _, err := c.Get(ctx, liveKey(w, v)); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// TestLiveViewsConcurrentReaders: readers of the growing events.jsonl at whatever revision they see,
// while batches land, each get bytes that are exactly a whole-line prefix of the final view — never a mix
// (run with -race; the view is past blobMin, so it grows in its file).
func TestLiveViewsConcurrentReaders(t *testing.T) {
	ctx := context.Background()
	st, w, c := liveFixture(t, "readers")
	grow(t, w, 1, 1500)
	type read struct {
		n   int
		sum [32]byte
	}
	done := make(chan struct{})
	errs := make(chan error, 4)
	var seen [4][]read
	for i := range 4 {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				r, err := c.Get(ctx, liveKey(w, views.Events))
				if err != nil {
					errs <- err
					return
				}
				b, err := io.ReadAll(io.NewSectionReader(readerOf(r), 0, r.Size()))
				if err != nil {
					errs <- err
					return
				}
				if len(b) == 0 || b[len(b)-1] != '\n' {
					errs <- fmt.Errorf("a reader got %d bytes, not whole lines", len(b))
					return
				}
				seen[i] = append(seen[i], read{len(b), sha256.Sum256(b)})
			}
		}()
	}
	for n := 1500; n < 1530; n += 3 {
		grow(t, w, n, n+3)
	}
	close(done)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	final := fresh(t, st, w, views.Events)
	if len(final) < blobMin {
		t.Fatalf("events.jsonl is %d bytes: the test needs it past blobMin", len(final))
	}
	reads := 0
	for _, rs := range seen {
		for _, r := range rs {
			reads++
			if r.n > len(final) || sha256.Sum256(final[:r.n]) != r.sum {
				t.Fatalf("a reader got %d bytes that are not a prefix of the final view", r.n)
			}
		}
	}
	if reads == 0 {
		t.Fatal("no reader read")
	}
}

// readerOf is a rendering's bytes as a ReaderAt.
func readerOf(r Rendered) io.ReaderAt {
	if r.Blob != nil {
		return r.Blob
	}
	return bytes.NewReader(r.Data)
}
