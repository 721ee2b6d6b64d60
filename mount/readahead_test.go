package mount

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/dshfs/dshfs/internal/storetest"
	"github.com/dshfs/dshfs/views"
)

// Two consecutive sessions' view asked for schedule the next ones; rendering them ahead serves the walk's
// next stats without a decode, with the same bytes as a request's own rendering.
func TestReadahead(t *testing.T) {
	ctx := context.Background()
	n := readaheadWindow + 4
	id := func(i int) string { return fmt.Sprintf("s%03d", i) } // in listing order
	st := storetest.Raw(t)
	for i := 0; i < n; i++ {
		storetest.Add(t, st, id(i), `{"type":"feedback/record","seq":0,"time":1000,"data":{"text":"hello"}}`)
	}
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
	attr(id(0), views.Events)
	attr(id(2), views.Events) // not the next one: no walk
	attr(id(0), views.Status) // not indexed
	attr(id(1), views.Status)
	if js := queued(); len(js) != 0 {
		t.Fatalf("scheduled without a walk: %v", js)
	}
	attr(id(3), views.Events) // 2, 3: a walk
	js := queued()
	if len(js) != readaheadWindow {
		t.Fatalf("scheduled %d, want %d", len(js), readaheadWindow)
	}
	for i, j := range js {
		if want := id(4 + i); j.id != want || j.view != views.Events {
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
	for _, s := range []string{id(4), id(5)} {
		size := attr(s, views.Events)
		r, err := f.Render(ctx, s, views.Events)
		if err != nil || int64(len(r.Data)) != size {
			t.Fatalf("%s: stat says %d bytes, a read %d (%v)", s, size, len(r.Data), err)
		}
		want, err := views.Load(ctx, st, s, views.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if w, _ := want.Render(ctx, views.Events); string(w) != string(r.Data) {
			t.Fatalf("%s: the view rendered ahead differs from a fresh rendering", s)
		}
	}
	if got := f.cache.Decodes(); got != decodes {
		t.Fatalf("the walk decoded %d sessions rendered ahead", got-decodes)
	}
	// the walk went on (4, 5), but everything to the end of the listing is scheduled already
	if js := queued(); len(js) != 0 {
		t.Fatalf("scheduled twice: %v", js)
	}
	// a walk backwards (a shell's glob expansion stats the entries last to first) is read ahead backwards
	attr(id(n-1), views.Surface)
	attr(id(n-2), views.Surface)
	if js := queued(); len(js) != readaheadWindow || js[0].id != id(n-3) || js[1].id != id(n-4) || js[0].view != views.Surface {
		t.Fatalf("backwards from %s: %v", id(n-2), js)
	}
	// a job for a view already known does nothing
	f.prefetchView(ctx, prefetch{id: id(4), view: views.Events})
	if got := f.ahead.done.Load(); got != 2 {
		t.Fatalf("rendered again: %d", got)
	}
}
