package views_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/storetest"
	"github.com/dshfs/dshfs/views"
)

// store writes one raw session "s" with the given event lines.
func store(t *testing.T, lines ...string) *eventstore.Store {
	st := storetest.Raw(t)
	storetest.Add(t, st, "s", lines...)
	return st
}

func TestActiveCompactionInStatus(t *testing.T) {
	st := store(t,
		`{"type":"user/message","seq":0,"time":5,"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"compaction/start","seq":1,"time":6,"data":{"compactionId":"c1","turn":null}}`,
	)
	s, err := views.Load(context.Background(), st, "s", views.Options{})
	if err != nil || s.Refusal != nil {
		t.Fatal(err, s.Refusal)
	}
	v, err := event.Parse(s.Status())
	if err != nil {
		t.Fatal(err)
	}
	active, _ := v.Get("activeCompaction")
	if state, _ := active.Get("state"); state.Str != "open" {
		t.Fatalf("activeCompaction %s", event.Stringify(active))
	}
}

func TestRefusedSessionRendersOnlyHeaderStatusRaw(t *testing.T) {
	st := store(t,
		`{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}`,
		`{"type":"plugin/unknown","seq":1,"time":6,"data":null}`,
	)
	ctx := context.Background()
	s, err := views.Load(ctx, st, "s", views.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Refusal == nil || eventstore.Classify(s.Refusal) != eventstore.KindUnsupported {
		t.Fatalf("refusal %v", s.Refusal)
	}
	for _, view := range []string{views.ViewHeader, views.ViewStatus, views.ViewRaw} {
		if b, err := s.Render(ctx, view); err != nil || len(b) == 0 {
			t.Errorf("%s: %v", view, err)
		}
	}
	for _, view := range []string{views.ViewEvents, views.ViewSurface, views.ViewMessages, "event:0", "trace:0", views.ViewSpill} {
		if _, err := s.Render(ctx, view); err == nil || !strings.Contains(err.Error(), "unknown to this harness") {
			t.Errorf("%s: %v", view, err)
		}
	}
}

func TestValid(t *testing.T) {
	for view, want := range map[string]bool{
		"events": true, "spill": true, "event:0": true, "turn:12": true, "trace:3": true,
		"event:": false, "event:x": false, "nope": false, "turn": false, "surface:1": false,
	} {
		if views.Valid(view) != want {
			t.Errorf("Valid(%q) != %v", view, want)
		}
	}
}
