package fs

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/dshfs/dshfs/views"
)

// Two consecutive sessions' view asked for schedule the next ones; rendering them ahead serves the walk's
// next stats without a decode, with the same bytes as a request's own rendering.
func TestReadahead(t *testing.T) {
	ctx := context.Background()
	st := testStore(t, 20) // sessions a..t, in listing order
	cfg := testConfig(t)
	f, err := New(Options{Store: st, Root: "test", Config: cfg, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	queued := func() []prefetch {
		var js []prefetch
		for len(f.ahead.jobs) > 0 {
			js = append(js, <-f.ahead.jobs)
		}
		return js
	}
	attr := func(id string, view views.View) int64 {
		t.Helper()
		_, n, err := f.Attr(ctx, id, view)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	attr("a", views.Events)
	attr("c", views.Events) // not the next one: no walk
	attr("a", views.Status) // not indexed
	attr("b", views.Status)
	if js := queued(); len(js) != 0 {
		t.Fatalf("scheduled without a walk: %v", js)
	}
	attr("d", views.Events) // c, d: a walk
	js := queued()
	if len(js) != readaheadWindow {
		t.Fatalf("scheduled %d, want %d", len(js), readaheadWindow)
	}
	for i, j := range js {
		if want := string(rune('e' + i)); j.id != want || j.view != views.Events {
			t.Fatalf("job %d: %v, want %s events", i, j, want)
		}
	}
	for _, j := range js[:2] {
		f.prefetchView(ctx, j)
	}
	if got := f.ahead.done.Load(); got != 2 {
		t.Fatalf("rendered ahead: %d, want 2", got)
	}
	decodes := f.decodes.Load()
	for _, id := range []string{"e", "f"} {
		n := attr(id, views.Events)
		r, err := f.Render(ctx, id, views.Events)
		if err != nil || int64(len(r.Data)) != n {
			t.Fatalf("%s: stat says %d bytes, a read %d (%v)", id, n, len(r.Data), err)
		}
		want, err := views.Load(ctx, st, id, views.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if w, _ := want.Render(ctx, views.Events); string(w) != string(r.Data) {
			t.Fatalf("%s: the view rendered ahead differs from a fresh rendering", id)
		}
	}
	if got := f.decodes.Load(); got != decodes {
		t.Fatalf("the walk decoded %d sessions rendered ahead", got-decodes)
	}
	// the walk went on (e, f), but everything to the end of the listing (t) is scheduled already
	if js := queued(); len(js) != 0 {
		t.Fatalf("scheduled twice: %v", js)
	}
	// a walk backwards (a shell's glob expansion stats the entries last to first) is read ahead backwards
	attr("t", views.Surface)
	attr("s", views.Surface)
	if js := queued(); len(js) != readaheadWindow || js[0].id != "r" || js[1].id != "q" || js[0].view != views.Surface {
		t.Fatalf("backwards from s: %v", js)
	}
	// a job for a view already known does nothing
	f.prefetchView(ctx, prefetch{id: "e", view: views.Events})
	if got := f.ahead.done.Load(); got != 2 {
		t.Fatalf("rendered again: %d", got)
	}
}

// TestRenderOnce: askers of one view at once render it once — the others wait and take the first's
// rendering — and all of them get the same bytes.
func TestRenderOnce(t *testing.T) {
	var fl flights
	done, first := fl.join("k")
	if !first || done != nil {
		t.Fatal("the first to join is not first")
	}
	wait, first := fl.join("k")
	if first {
		t.Fatal("a second asker is first too")
	}
	if _, other := fl.join("other key"); !other {
		t.Fatal("another key waits on this one")
	}
	select {
	case <-wait:
		t.Fatal("done before the first left")
	default:
	}
	fl.leave("k")
	<-wait
	if _, first := fl.join("k"); !first {
		t.Fatal("after the first left, the next is not first")
	}

	ctx := context.Background()
	st := testStore(t, 2)
	cfg := testConfig(t)
	f, err := New(Options{Store: st, Root: "test", Config: cfg, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	got := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := f.Render(ctx, "a", views.Events)
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = r.Data
		}()
	}
	wg.Wait()
	want, err := views.Load(ctx, st, "a", views.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := want.Render(ctx, views.Events)
	for i, b := range got {
		if string(b) != string(w) {
			t.Fatalf("asker %d: %d bytes, want the %d of a fresh rendering", i, len(b), len(w))
		}
	}
	if len(f.renders.m) != 0 {
		t.Fatalf("renderings left under way: %v", f.renders.m)
	}
}
