package postgres

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/eventtest"
)

// TestSameTextAsJSONL writes the same batches through a raw JSONL store and the fleet store: the fleet
// store's ReadRaw is byte for byte the JSONL artifact (packed chunk rows, a line long enough to be
// compressed), and a load gives back the same events.
func TestSameTextAsJSONL(t *testing.T) {
	_, _, dsn := newDB(t)
	ctx := context.Background()
	jb, err := jsonl.Open(t.TempDir(), jsonl.None)
	if err != nil {
		t.Fatal(err)
	}
	pb := open(t, dsn, Options{})
	long := strings.Repeat("lorem ipsum ☃ \\u00e9 ", 600) // > 4096 bytes, compressible
	specs := []string{
		`turn/start {"turn":1}`,
		`step/start {"turn":1,"step":1}`,
		fmt.Sprintf(`user/message {"id":"u1","role":"user","content":[{"type":"text","text":%q}],"source":{"kind":"user"}} + "surfaceOp":"append"`, long),
	}
	for i := range 40 {
		specs = append(specs, fmt.Sprintf(`assistant/chunk {"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"t%d é"}}`, i))
	}
	specs = append(specs,
		`assistant/message {"turn":1,"step":1,"message":{"id":"a1","role":"assistant","content":[{"type":"text","text":"x"}],"source":{"kind":"model","provider":"p","model":"m"}}} + "surfaceOp":"append"`,
		`step/end {"turn":1,"step":1}`,
		`turn/end {"turn":1,"reason":{"kind":"completed"}}`)
	log := eventtest.Log(t, specs...)
	for _, b := range []eventstore.Backend{jb, pb} {
		st := eventstore.New(b)
		if err := st.Create(ctx, contractHeader("s")); err != nil {
			t.Fatal(err)
		}
		for _, cut := range [][2]int{{0, 3}, {3, 30}, {30, len(log)}} {
			if err := st.Append(ctx, "s", log[cut[0]:cut[1]]); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want, err := jb.ReadRaw(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pb.ReadRaw(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("fleet text differs from the JSONL artifact:\n%s\n---\n%s", got, want)
	}
	if !bytes.Contains(want, []byte(`"text-chunks"`)) {
		t.Fatal("the batches were not packed: the test proves less than it says")
	}
	if c := query[int64](t, dsn, `SELECT count(*) FROM events WHERE compressed`); c != 1 {
		t.Fatalf("%d compressed rows, want 1", c)
	}
	art, _ := pb.Stat(ctx, "s", "")
	if art.Size != int64(len(want)) {
		t.Fatalf("size %d, text %d bytes", art.Size, len(want))
	}
	jp, _ := jb.LoadStored(ctx, "s")
	pp, err := pb.LoadStored(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(pp.Events) != len(jp.Events) || len(pp.Events) != len(log) {
		t.Fatalf("%d events, JSONL %d, written %d", len(pp.Events), len(jp.Events), len(log))
	}
	for i := range pp.Events {
		if !bytes.Equal(pp.Events[i].Raw, jp.Events[i].Raw) {
			t.Fatalf("event %d:\n%s\n%s", i, pp.Events[i].Raw, jp.Events[i].Raw)
		}
	}
}

// TestIngestKeepsLinesVerbatim: a line synced as the harness wrote it — whatever its spelling — comes back
// in ReadRaw exactly, and decodes as the JSONL scan decodes it.
func TestIngestKeepsLinesVerbatim(t *testing.T) {
	_, _, dsn := newDB(t)
	b := open(t, dsn, Options{})
	ctx := context.Background()
	hdr := header("v")
	in := [][]byte{
		[]byte(`{"type":"turn/start","seq":0,"time":1.0e3,"data":{"turn":1}}`),
		[]byte(`{"type":"plugin/x","seq":1,"time":2,"data":{"s":"\u00e9\ud83d\ude00"},"ignorable":true}`),
		[]byte(`{"type":"turn/end","seq":2,"time":3,"data":{"turn":1,"reason":{"kind":"completed"}}}`),
	}
	if err := b.Ingest(ctx, "h", "v", hdr, 0, in); err != nil {
		t.Fatal(err)
	}
	raw, err := b.ReadRaw(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	want := string(hdr) + "\n" + string(bytes.Join(in, []byte("\n"))) + "\n"
	if string(raw) != want {
		t.Fatalf("raw:\n%s\nwant:\n%s", raw, want)
	}
	p, err := b.LoadStored(ctx, "v")
	if err != nil || len(p.Events) != 3 || p.Torn != nil {
		t.Fatalf("load: %v %+v", err, p)
	}
	if got := string(p.Events[0].Raw); got != `{"type":"turn/start","seq":0,"time":1000,"data":{"turn":1}}` {
		t.Fatalf("decoded %s", got)
	}
}
