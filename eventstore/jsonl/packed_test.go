package jsonl

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
)

// TestPackedLoadAgrees: a load keeps the chunk rows it can keep packed for InspectPacked, zstd and raw
// alike, and what it gives — events, closers, refusal — is what the same log read whole and checked after
// gives (no progress sink: nothing kept packed), expanded (Inspect) or materialized. A log ends inside a
// turn whose last line is a row, so that the repair's closers take the seq and time of a packed row's last
// member; others hold rows between other lines, a row after an event the checks upgrade, and a row the
// fast reader does not take.
func TestPackedLoadAgrees(t *testing.T) {
	ctx := context.Background()
	const (
		start = `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`
		step  = `{"type":"step/start","seq":1,"time":2,"data":{"turn":1,"step":1}}`
		row   = `{"type":"text-chunks","seq0":2,"time0":3,"data":{"turn":1,"step":1,"index":0,"dt":[1,5,-2],"texts":["a","b\n","\"c\"","d"]}}`
	)
	cases := map[string][]string{
		"ends in a row": {start, step, row},
		"rows between events": {start, step, row,
			`{"type":"assistant/chunk","seq":6,"time":9,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"e"}}}`,
			`{"type":"reasoning-chunks","seq0":7,"time0":10,"data":{"turn":1,"step":1,"index":1,"dt":[0,0],"texts":["x","y","z"]}}`,
			`{"type":"step/end","seq":10,"time":11,"data":{"turn":1,"step":1}}`,
			`{"type":"turn/end","seq":11,"time":12,"data":{"turn":1,"reason":{"kind":"completed"}}}`},
		// the checks upgrade the legacy turn/start into a copy of the list: the rows expand into both
		"an upgraded event before a row": {`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":"user"}}}`,
			step, row},
		// laid out other than the encoder lays it out: read the general way, expanded
		"a row the fast reader leaves": {start, step,
			`{"type":"text-chunks","seq0":2,"time0":3,"data":{"step":1,"turn":1,"index":0,"dt":[1],"texts":["a","b"]}}`},
	}
	for name, lines := range cases {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			zb, zst, h := zstdSession(t, "p")
			path, _ := zb.Locate(h)
			created, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			frames, _, _ := ScanFrames(created, 0)
			header, err := DecodeFrame(created, frames[0])
			if err != nil {
				t.Fatal(err)
			}
			artifact := created[:frames[0].End]
			for _, l := range lines {
				artifact = EncodeFrame(artifact, []byte(l+"\n"))
			}
			if err := os.WriteFile(path, artifact, 0o600); err != nil {
				t.Fatal(err)
			}
			rawRoot := t.TempDir()
			writeRawSession(t, rawRoot, "p", string(header)+strings.Join(lines, "\n")+"\n")
			rb, _ := Open(rawRoot, None)
			// the reference: the raw log read whole, then checked (no progress sink: nothing packed)
			want, werr := eventstore.New(wholeLoads{rb}).Inspect(ctx, "p")
			for _, st := range []*eventstore.Store{zst, eventstore.New(rb)} {
				got, gerr := st.Inspect(ctx, "p")
				if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
					t.Fatalf("%s: %v; the reference: %v", st.Backend().Name(), gerr, werr)
				}
				if werr != nil {
					return
				}
				checkPackedAgrees(t, st, name, lines, got, want)
			}
		})
	}
}

// wholeLoads hides a backend's progressive load: a Store then loads the log whole and checks it after.
type wholeLoads struct{ eventstore.Backend }

// checkPackedAgrees holds Inspect's result (got) and InspectPacked's to want.
func checkPackedAgrees(t *testing.T, st *eventstore.Store, name string, lines []string, got, want *eventstore.Inspection) {
	t.Helper()
	ctx := context.Background()
	if name == "ends in a row" && len(want.Closers) == 0 {
		t.Fatal("no closers: the turn must be open")
	}
	sameEvents(t, "Inspect", got.Events, want.Events)
	sameEvents(t, "closers", got.Closers, want.Closers)
	if len(got.Packed) != 0 {
		t.Errorf("Inspect kept %d rows packed", len(got.Packed))
	}
	// the stored list beside the checked one (its copy, where an event was upgraded) has every record too
	for i, e := range got.Prefix.Events {
		if e.IsHollow() || (e.Type == "assistant/chunk" && !bytes.Equal(e.Raw, want.Events[i].Raw)) {
			t.Fatalf("Inspect's stored list: event %d %s, want %s", i, e.Raw, want.Events[i].Raw)
		}
	}
	packed, err := st.InspectPacked(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	rows, hollow := 0, 0
	for _, l := range lines {
		if strings.Contains(l, `-chunks","seq0"`) && !strings.Contains(l, `{"step"`) {
			rows++
		}
	}
	for _, e := range packed.Events {
		if e.IsHollow() {
			hollow++
		}
	}
	if len(packed.Packed) != rows || (rows > 0) != (hollow > 0) {
		t.Fatalf("InspectPacked kept %d rows packed (%d hollow events); want %d", len(packed.Packed), hollow, rows)
	}
	whole, err := event.Materialize(packed.Events, packed.Packed)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, "InspectPacked, materialized", whole, want.Events)
	sameEvents(t, "InspectPacked closers", packed.Closers, want.Closers)
}

func sameEvents(t *testing.T, what string, got, want []event.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].Raw, want[i].Raw) || got[i].Type != want[i].Type || got[i].Seq != want[i].Seq {
			t.Fatalf("%s: event %d\n%s\nwant\n%s", what, i, got[i].Raw, want[i].Raw)
		}
	}
}
