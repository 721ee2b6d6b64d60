package views_test

import (
	"bytes"
	"context"
	"errors"
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

// WriteView writes what Render returns, streaming the views that are lists of the log's lines, and
// reports a failing writer as a *WriteError.
func TestWriteViewIsRender(t *testing.T) {
	st := store(t,
		`{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}`,
		`{"type":"user/message","seq":1,"time":5,"data":{"id":"u","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"user/message","seq":2,"time":6,"data":{"id":"u2","role":"user","content":[{"type":"text","text":"again"}],"source":{"kind":"user"}},"sourceEventSeqs":[1],"surfaceOp":{"op":"replace","start":1,"end":1}}`,
		`{"type":"turn/end","seq":3,"time":7,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
	)
	ctx := context.Background()
	s, err := views.Load(ctx, st, "s", views.Options{})
	if err != nil || s.Refusal != nil {
		t.Fatal(err, s.Refusal)
	}
	for _, view := range []views.View{views.Events, views.Surface, views.Shadowed, views.Turn(1), views.Messages, views.Header, views.Status, views.Event(2), views.Turn(9), views.Raw} {
		want, wantErr := s.Render(ctx, view)
		var got bytes.Buffer
		err := s.WriteView(ctx, &got, view)
		if !bytes.Equal(got.Bytes(), want) || (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Errorf("%s: WriteView %q, %v; Render %q, %v", view, got.Bytes(), err, want, wantErr)
		}
		if (view == views.Events || view == views.Shadowed || view == views.Surface || view == views.Raw) && got.Len() == 0 {
			t.Fatalf("empty %s view: the streamed path was not exercised", view)
		}
	}
	for _, view := range []views.View{views.Events, views.Raw, views.Messages} {
		err = s.WriteView(ctx, failingWriter{}, view)
		var we *views.WriteError
		if !errors.As(err, &we) || !errors.Is(err, errDiskFull) {
			t.Fatalf("%s, failing writer: %v", view, err)
		}
	}
}

var errDiskFull = errors.New("no space left on device")

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errDiskFull }
