package mount

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/dshfs/dshfs/views"
)

// Two consecutive sessions' view asked for schedule the next ones; rendering them ahead serves the walk's
// next stats without a decode, with the same bytes as a request's own rendering.
func TestReadahead(t *testing.T) {
	ctx := context.Background()
	st := testStore(t, 20) // sessions a..t, in listing order
	f, err := New(Options{Store: st, Root: "test", Config: testConfig(t), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
	decodes := f.cache.Decodes()
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
	if got := f.cache.Decodes(); got != decodes {
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
