package viewcache

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/dshfs/dshfs/internal/storetest"
	"github.com/dshfs/dshfs/spill"
	"github.com/dshfs/dshfs/views"
)

// TestVolatileRenderedPerState: a transcript (a view that shows what lies outside the store: its spill
// locators' statuses) is rendered once for askers at once and served again at the same revision, until a
// locator's target changes; then it is rendered again and shows the change. Only what the rendering
// depends on decides: never a stat or a read alone.
func TestVolatileRenderedPerState(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	target := filepath.Join(root, "out.txt")
	st := storetest.Raw(t)
	storetest.Add(t, st, "s",
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
		`{"type":"tool/result","seq":1,"time":2,"data":{"turn":1,"step":1,"message":{"id":"r","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"`+spill.Marker+target+`. done"}],"isError":false}],"source":{"kind":"tool","callId":"c1"}}},"surfaceOp":"append"}`,
		`{"type":"turn/end","seq":2,"time":3,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
	)
	roots := spill.NewRootsExact([]string{root})
	c := New(Config{SessionsBytes: 32 << 20, ViewsBytes: 16 << 20, Store: Store{Backend: st.Backend().Name(), Root: "test"},
		Load: func(ctx context.Context, id string) (*views.Session, error) {
			return views.Load(ctx, st, id, views.Options{Spill: roots})
		}})
	for _, view := range []views.View{views.Transcript, views.TranscriptHTML, views.Spill} {
		k := keyNow(t, st, "s", view)
		renders := c.Work().Renders
		get := func() string {
			t.Helper()
			r, err := c.Get(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			return string(r.Data)
		}
		got := make([]string, 8)
		var wg sync.WaitGroup
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i] = get()
			}()
		}
		wg.Wait()
		for _, g := range got[1:] {
			if g != got[0] {
				t.Fatalf("%s: askers at once got different bytes", view)
			}
		}
		if r, n, err := c.Stat(ctx, k); err != nil || n != int64(len(got[0])) || string(r.Data) != got[0] {
			t.Fatalf("%s: stat %d bytes, %v", view, n, err)
		}
		if n := c.Work().Renders - renders; n != 1 {
			t.Fatalf("%s: %d renderings for eight askers and a stat at one revision and state, want 1", view, n)
		}
		if !strings.Contains(got[0], "missing") {
			t.Fatalf("%s does not show the missing target:\n%s", view, got[0])
		}
		if err := os.WriteFile(target, []byte("the result\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		now := get()
		if !strings.Contains(now, "present") || c.Work().Renders-renders != 2 {
			t.Fatalf("%s: after its target appeared, %d renderings, shows:\n%s", view, c.Work().Renders-renders, now)
		}
		if get() != now || c.Work().Renders-renders != 2 {
			t.Fatalf("%s: rendered again with nothing changed", view)
		}
		if err := os.Remove(target); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Decodes(); n != 1 {
		t.Fatalf("%d decodes, want 1", n)
	}
}

// TestOversizedViewSharedWhileHeld: a rendering larger than the whole views budget is not kept, but while
// a reader holds its bytes (an open file), a stat or another reader at the same revision and state gets
// those bytes instead of a rendering of its own; once no reader holds them, the next asker renders again,
// and nothing of the rendering was kept meanwhile.
func TestOversizedViewSharedWhileHeld(t *testing.T) {
	ctx := context.Background()
	st := storetest.Raw(t)
	storetest.Add(t, st, "s",
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
		`{"type":"user/message","seq":1,"time":2,"data":{"id":"u","role":"user","content":[{"type":"text","text":"`+strings.Repeat("a long question ", 64)+`"}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"turn/end","seq":2,"time":3,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
	)
	c := New(Config{SessionsBytes: 32 << 20, ViewsBytes: 512, Store: Store{Backend: st.Backend().Name(), Root: "test"},
		Load: func(ctx context.Context, id string) (*views.Session, error) {
			return views.Load(ctx, st, id, views.Options{})
		}})
	k := keyNow(t, st, "s", views.TranscriptHTML)
	first, err := c.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Data) <= 512 {
		t.Fatalf("a page of %d bytes fits the budget of 512", len(first.Data))
	}
	renders := c.Work().Renders
	r, n, err := c.Stat(ctx, k)
	if err != nil || n != int64(len(first.Data)) {
		t.Fatalf("stat: %d bytes, %v", n, err)
	}
	again, err := c.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if c.Work().Renders != renders || unsafe.SliceData(again.Data) != unsafe.SliceData(first.Data) ||
		unsafe.SliceData(r.Data) != unsafe.SliceData(first.Data) {
		t.Fatalf("%d renderings while the first was held, want none", c.Work().Renders-renders)
	}
	if c.lru.viewBytes > 512 {
		t.Fatalf("%d bytes of views kept on a budget of 512", c.lru.viewBytes)
	}
	want := string(first.Data)
	first, again, r = Rendered{}, Rendered{}, Rendered{}
	runtime.GC()
	got, err := c.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if c.Work().Renders != renders+1 || string(got.Data) != want {
		t.Fatalf("%d renderings once no reader held the page, want 1", c.Work().Renders-renders)
	}
}
