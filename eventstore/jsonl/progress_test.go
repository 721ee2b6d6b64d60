package jsonl

import (
	"context"
	"fmt"
	"testing"

	"github.com/dshfs/dshfs/eventstore/storetest"
	"github.com/dshfs/dshfs/internal/eventtest"
)

// TestProgressReportsRows: a zstd load of frames holding chunk rows, a piece per frame, reports a
// growing list at lengths that are not multiples of 64, each a prefix of the loaded one with the row
// words it covers final.
func TestProgressReportsRows(t *testing.T) {
	ctx := context.Background()
	_, st, _ := zstdSession(t, "rows")
	seq := 0
	for n := 1; n <= 40; n++ {
		var lines []string
		add := func(typ, data string) {
			lines = append(lines, fmt.Sprintf(`{"type":"%s","seq":%d,"time":1,"data":%s}`, typ, seq, data))
			seq++
		}
		add("turn/start", fmt.Sprintf(`{"turn":%d}`, n))
		add("step/start", fmt.Sprintf(`{"turn":%d,"step":1}`, n))
		for k := range 29 {
			add("assistant/chunk", fmt.Sprintf(`{"turn":%d,"step":1,"chunk":{"type":"text-delta","index":0,"text":"w%d "}}`, n, k))
		}
		add("step/end", fmt.Sprintf(`{"turn":%d,"step":1}`, n))
		add("turn/end", fmt.Sprintf(`{"turn":%d,"reason":{"kind":"completed"}}`, n))
		if err := st.Append(ctx, "rows", eventtest.Events(t, lines...)); err != nil {
			t.Fatal(err)
		}
	}
	b := st.Backend().(*Backend)
	defer func(old int64) { zstdPieceBytes = old }(zstdPieceBytes)
	zstdPieceBytes = 1
	rec := &storetest.ProgressRecorder{}
	p, err := b.LoadStoredProgress(ctx, "rows", rec)
	if err != nil {
		t.Fatal(err)
	}
	rec.Check(t, "rows", p)
	members := 0
	for _, w := range p.RowMembers {
		for ; w != 0; w &= w - 1 {
			members++
		}
	}
	unaligned := 0
	for _, r := range rec.Reports {
		if len(r)%64 != 0 {
			unaligned++
		}
	}
	if len(p.Events) != seq || members < 40*29 || len(rec.Reports) < 40 || unaligned < 30 {
		t.Fatalf("%d events (want %d), %d row members, %d reports (%d of unaligned length): the test proves little",
			len(p.Events), seq, members, len(rec.Reports), unaligned)
	}
}
