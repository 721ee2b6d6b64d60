package eventstore

import (
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/surface"
)

// Folder plugs into the store's seed validation as its surface check: a surface failure comes back
// as the harness's "invalid seed event at index N: <reason>" inside the corruption error.
func TestInspectFoldsSurface(t *testing.T) {
	lines := []string{
		`{"type":"user/message","seq":0,"time":1,"data":{"id":"u","role":"user","content":[{"type":"text","text":"a"}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"user/message","seq":1,"time":2,"data":{"id":"v","role":"user","content":[{"type":"text","text":"b"}],"source":{"kind":"user"}},"surfaceOp":{"op":"replace","start":0,"end":0}}`,
	}
	var events []event.Event
	for _, l := range lines {
		e, err := event.ParseEvent([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	h := event.Header{ID: "s", CreatedAt: 1}
	_, _, err := Inspect("s", h, events, "")
	const want = "invalid seed event at index 1: surface replace: sourceEventSeqs must include every shadowed surface node; missing 0"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Inspect: %v\nwant it to contain %q", err, want)
	}
	ok := surface.NewFolder(0)
	if _, _, err := inspectWith("s", h, events[:1], "", ok); err != nil {
		t.Fatalf("valid log: %v", err)
	}
	if r := ok.Result(); len(r.Nodes) != 1 || r.Nodes[0] != 0 {
		t.Fatalf("checker state after Inspect: %s", r.JSON())
	}
}
