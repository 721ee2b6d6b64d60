package event

import (
	"bytes"
	"strconv"
	"testing"
)

// checkPacked holds the packed form of a canonical line to what AppendStored makes of it: a row the fast
// reader takes is kept packed, its hollow members carry the expanded members' types and seqs, and
// ExpandPacked, AppendPackedLines and Materialize give back exactly their records; its Bytes and Newest are
// their total size and latest time. Any other line decodes as AppendStored decodes it. It reports whether
// the line was kept packed.
func checkPacked(t *testing.T, raw []byte, sc *RowScratch) bool {
	t.Helper()
	want, wantRow, wantErr := AppendStored(nil, raw, nil)
	lead := Event{Raw: []byte(`{}`), Seq: -1} // a list the row is appended to: First counts it
	got, row, pr, packed, err := AppendStoredPacked([]Event{lead}, raw, sc)
	if (err == nil) != (wantErr == nil) || row != wantRow {
		t.Fatalf("%s: packed decode (row %v, %v), AppendStored (row %v, %v)", raw, row, err, wantRow, wantErr)
	}
	if err != nil {
		return false
	}
	got = got[1:]
	if len(got) != len(want) {
		t.Fatalf("%s: %d events packed, %d expanded", raw, len(got), len(want))
	}
	if !packed {
		for k := range got {
			if !bytes.Equal(got[k].Raw, want[k].Raw) || got[k].Type != want[k].Type || got[k].Seq != want[k].Seq {
				t.Fatalf("%s: event %d not packed but different", raw, k)
			}
		}
		return false
	}
	if pr.First != 1 || pr.Members != len(want) || !bytes.Equal(pr.Raw, raw) {
		t.Fatalf("%s: row %+v for %d members", raw, pr, len(want))
	}
	var size int64
	newest := int64(-1 << 62)
	var lines []byte
	for k := range got {
		if !got[k].IsHollow() || got[k].Type != want[k].Type || got[k].Seq != want[k].Seq {
			t.Fatalf("%s: member %d is %+v, expanded %+v", raw, k, got[k], want[k])
		}
		size += int64(len(want[k].Raw))
		tm, ok := want[k].Time()
		n, perr := strconv.ParseInt(string(tm), 10, 64)
		if !ok || perr != nil {
			t.Fatalf("%s: member %d has no whole time", raw, k)
		}
		newest = max(newest, n)
		lines = append(append(lines, want[k].Raw...), '\n')
	}
	if pr.Bytes != size || pr.Newest != newest {
		t.Fatalf("%s: row says %d bytes, newest %d; its members hold %d bytes, newest %d", raw, pr.Bytes, pr.Newest, size, newest)
	}
	expanded, err := ExpandPacked(nil, pr, sc)
	if err != nil || len(expanded) != len(want) {
		t.Fatalf("%s: ExpandPacked %d events, %v", raw, len(expanded), err)
	}
	for k := range want {
		if !bytes.Equal(expanded[k].Raw, want[k].Raw) || expanded[k].Seq != want[k].Seq || expanded[k].Type != want[k].Type {
			t.Fatalf("%s: ExpandPacked member %d\n%s\n%s", raw, k, expanded[k].Raw, want[k].Raw)
		}
	}
	printed, err := AppendPackedLines([]byte("x\n"), pr, sc)
	if err != nil || !bytes.Equal(printed, append([]byte("x\n"), lines...)) {
		t.Fatalf("%s: AppendPackedLines %v\n%s\nwant\n%s", raw, err, printed, lines)
	}
	list := append([]Event{lead}, got...)
	whole, err := Materialize(list, []PackedRow{pr})
	if err != nil || !bytes.Equal(whole[0].Raw, lead.Raw) {
		t.Fatalf("%s: Materialize %v", raw, err)
	}
	for k := range want {
		if !bytes.Equal(whole[1+k].Raw, want[k].Raw) || !list[1+k].IsHollow() {
			t.Fatalf("%s: Materialize member %d %s (the list it read must stay hollow)", raw, k, whole[1+k].Raw)
		}
	}
	if err := MaterializeInPlace(list, []PackedRow{pr}); err != nil {
		t.Fatal(err)
	}
	for k := range want {
		if !bytes.Equal(list[1+k].Raw, want[k].Raw) {
			t.Fatalf("%s: MaterializeInPlace member %d %s", raw, k, list[1+k].Raw)
		}
	}
	return true
}

// TestPackedRowChanged: a row whose bytes no longer read as the row it was is refused, not expanded into
// something else.
func TestPackedRowChanged(t *testing.T) {
	raw := []byte(`{"type":"text-chunks","seq0":4,"time0":10,"data":{"turn":1,"step":0,"index":0,"dt":[3],"texts":["a","b"]}}`)
	_, _, pr, packed, err := AppendStoredPacked(nil, raw, nil)
	if err != nil || !packed {
		t.Fatalf("not packed: %v", err)
	}
	short := pr
	short.Members = 3
	broken := pr
	broken.Raw = []byte(`{"type":"text-chunks"}`)
	for _, r := range []PackedRow{short, broken} {
		if _, err := ExpandPacked(nil, r, nil); err != errPackedRow {
			t.Errorf("%+v expands: %v", r, err)
		}
		if _, err := AppendPackedLines(nil, r, nil); err != errPackedRow {
			t.Errorf("%+v prints: %v", r, err)
		}
	}
	if _, err := Materialize(make([]Event, 1), []PackedRow{pr}); err != errPackedRow {
		t.Errorf("a row past the list's end materializes: %v", err)
	}
}

// TestRowScratchRelease: a released scratch holds no token of the rows it read, so a pooled one keeps no
// old row's text alive.
func TestRowScratchRelease(t *testing.T) {
	var sc RowScratch
	raw := []byte(`{"type":"text-chunks","seq0":4,"time0":10,"data":{"turn":1,"step":0,"index":0,"dt":[3,1],"texts":["a","b","c"]}}`)
	if _, row, err := AppendStored(nil, raw, &sc); err != nil || !row {
		t.Fatalf("not a row: %v", err)
	}
	held := 0
	for _, q := range sc.quoted[:cap(sc.quoted)] {
		if q != nil {
			held++
		}
	}
	if held == 0 {
		t.Fatal("the scratch holds no token: the test reads nothing")
	}
	sc.Release()
	for i, q := range sc.quoted[:cap(sc.quoted)] {
		if q != nil {
			t.Fatalf("token %d still held after Release: %q", i, q)
		}
	}
}
