package generation_test

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
	"github.com/dshfs/dshfs/internal/fixtures"
	"github.com/dshfs/dshfs/surface"
)

func decodeFixture(t *testing.T, a artifactFile) *generation.Artifact {
	t.Helper()
	b, err := os.ReadFile(a.path)
	if err != nil {
		t.Fatal(err)
	}
	art, err := generation.Decode(a.gen, a.compressed, b)
	if err != nil {
		t.Fatal(err)
	}
	return art
}

// storedV0 is the harness's stored v0 events of the session a fixture artifact was migrated from.
func storedV0(t *testing.T, a artifactFile) []event.Event {
	t.Helper()
	set := "generated-raw"
	if a.compressed {
		set = "generated-zstd"
	}
	if a.id == "eb69342c-62b6-4320-a78b-961745f89333" { // the upstream snapshot session
		set = "upstream"
	}
	b, err := os.ReadFile(fixtures.Path(t, "golden", set, a.id, "stored.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []event.Event
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<26)
	for sc.Scan() {
		e, err := event.ParseEvent(bytes.Clone(sc.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func derive(t *testing.T, events []event.Event) ([][]byte, *surface.Result) {
	t.Helper()
	r, err := surface.Fold(events)
	if err != nil {
		t.Fatalf("fold: %v", err)
	}
	msgs, err := surface.DeriveMessages(events, r)
	if err != nil {
		t.Fatalf("deriveMessages: %v", err)
	}
	return msgs, r
}

// TestV2MessagesAreV0Messages: the v1-to-v2 migration keeps the derived model messages unchanged, so the
// messages of every v2 fixture are those of the v0 session it was migrated from.
func TestV2MessagesAreV0Messages(t *testing.T) {
	total := 0
	for _, a := range fixtureArtifacts(t) {
		if a.gen != 2 {
			continue
		}
		art := decodeFixture(t, a)
		evs, err := generation.MessageEvents(art)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := derive(t, evs)
		want, _ := derive(t, storedV0(t, a))
		if !slices.EqualFunc(got, want, bytes.Equal) {
			t.Errorf("%s (zstd %v): %d messages, the v0 session derives %d", a.id, a.compressed, len(got), len(want))
		}
		total += len(got)
	}
	if total < 40 {
		t.Fatalf("only %d messages over all v2 fixtures", total)
	}
}

// nodeIDs returns the message id of every current surface node of events, skipping system messages.
func nodeIDs(t *testing.T, events []event.Event, nodes []int64) []string {
	t.Helper()
	var ids []string
	for _, seq := range nodes {
		e := events[seq]
		v, err := e.Record()
		if err != nil {
			t.Fatal(err)
		}
		data, _ := v.Get("data")
		id, ok := data.Get("id")
		if e.Type != "user/message" {
			msg, _ := data.Get("message")
			id, ok = msg.Get("id")
		}
		if !ok {
			t.Fatalf("node %d (%s) has no message id", seq, e.Type)
		}
		if e.Type != "system/message" {
			ids = append(ids, id.Str)
		}
	}
	return ids
}

// TestV3SurfaceIsV2Surface: v3 only adds the system messages to the surface, so once they are left out
// the current nodes of every v3 fixture are the v2 fixture's, message for message.
func TestV3SurfaceIsV2Surface(t *testing.T) {
	v2 := map[string]artifactFile{}
	for _, a := range fixtureArtifacts(t) {
		if a.gen == 2 {
			v2[a.id+"/"+map[bool]string{false: "raw", true: "zstd"}[a.compressed]] = a
		}
	}
	checked := 0
	for _, a := range fixtureArtifacts(t) {
		if a.gen != 3 {
			continue
		}
		art := decodeFixture(t, a)
		view, err := generation.SurfaceEvents(art)
		if err != nil {
			t.Fatal(err)
		}
		r, err := surface.Fold(view)
		if err != nil {
			t.Fatalf("%s: fold of the v3 view: %v", a.id, err)
		}
		if _, err := generation.MessageEvents(art); !errors.Is(err, generation.ErrMessagesUndecided) {
			t.Errorf("v3 messages: %v", err)
		}
		b := v2[a.id+"/"+map[bool]string{false: "raw", true: "zstd"}[a.compressed]]
		art2 := decodeFixture(t, b)
		r2, err := surface.Fold(art2.Events)
		if err != nil {
			t.Fatal(err)
		}
		got, want := nodeIDs(t, art.Events, r.Nodes), nodeIDs(t, art2.Events, r2.Nodes)
		if !slices.Equal(got, want) {
			t.Errorf("%s: v3 surface %v, v2 surface %v", a.id, got, want)
		}
		if len(r.Nodes) == 0 { // the subagent snapshot has no surface at all, so no head either
			continue
		}
		heads := 0
		for _, seq := range r.Nodes {
			if art.Events[seq].Type == "system/message" {
				heads++
			}
		}
		if heads != 1 || art.Events[r.Nodes[0]].Type != "system/message" {
			t.Errorf("%s: %d system nodes, first node %s", a.id, heads, art.Events[r.Nodes[0]].Type)
		}
		checked++
	}
	if checked < 8 {
		t.Fatalf("only %d v3 fixtures", checked)
	}
}
