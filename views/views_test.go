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
	for _, view := range []views.View{views.Header, views.Status, views.Raw} {
		if b, err := s.Render(ctx, view); err != nil || len(b) == 0 {
			t.Errorf("%s: %v", view, err)
		}
	}
	for _, view := range []views.View{views.Events, views.Surface, views.Messages, views.Event(0), views.Trace(0), views.Spill} {
		if _, err := s.Render(ctx, view); err == nil || !strings.Contains(err.Error(), "unknown to this harness") {
			t.Errorf("%s: %v", view, err)
		}
	}
}

func TestParseView(t *testing.T) {
	for text, want := range map[string]views.View{
		"events": views.Events, "spill": views.Spill, "event:0": views.Event(0), "turn:12": views.Turn(12),
		"trace:3": views.Trace(3), "event:-1": views.Event(-1),
	} {
		got, ok := views.ParseView(text)
		if !ok || got != want || got.String() != text {
			t.Errorf("ParseView(%q) = %+v %v, want %+v", text, got, ok, want)
		}
	}
	for _, text := range []string{"event:", "event:x", "nope", "turn", "surface:1", "events:1", ""} {
		if v, ok := views.ParseView(text); ok {
			t.Errorf("ParseView(%q) = %+v, want no view", text, v)
		}
	}
}
