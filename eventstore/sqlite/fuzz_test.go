package sqlite

import (
	"bytes"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
)

// FuzzDecodeSeqs: the varint decoder never panics, and what it accepts is exactly what the encoder writes
// for the decoded list (the encoding is canonical: one list, one byte string).
func FuzzDecodeSeqs(f *testing.F) {
	for _, seed := range [][]byte{{}, {2, 2, 2, 2, 2}, {0x0a, 0x05, 0xca, 0x04}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f},
		{0x80}, {0x80, 0x00}, {0x00, 0x03}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		seqs, err := DecodeSeqs(b)
		if err != nil {
			if _, ok := err.(*SeqsError); !ok {
				t.Fatalf("error of another kind: %v", err)
			}
			return
		}
		enc, err := EncodeSeqs(seqs)
		if err != nil || !bytes.Equal(enc, b) {
			t.Fatalf("%x decodes to %v, which encodes to %x (%v)", b, seqs, enc, err)
		}
	})
}

// FuzzPackedRow: packed-row decoding never panics; a row it accepts expands to 3..1024 chunk events with
// consecutive seqs, and packing those events again gives the same row when its data was canonical JSON.
func FuzzPackedRow(f *testing.F) {
	f.Add("text-chunks", int64(2), int64(1002), []byte(`{"turn":1,"step":1,"index":0,"dt":[1,0,2,-1],"texts":["Hel","lo",","," wor","ld"]}`))
	f.Add("tool-call-chunks", int64(8), int64(1007), []byte(`{"turn":1,"step":1,"index":1,"dt":[0,3],"id":"c1","args":["{\"pa","th\":\"a","\"}"]}`))
	f.Add("tool-call-chunks", int64(0), int64(0), []byte(`{"turn":1,"step":1,"index":1,"dt":[0,3],"id":"c1","name":"n","args":["a","b","c"]}`))
	f.Add("reasoning-chunks", int64(9007199254740990), int64(-5), []byte(`{"turn":1.5,"step":1,"index":0,"dt":[0,0],"texts":["a","b","c"]}`))
	f.Add("text-chunks", int64(0), int64(0), []byte(`{"turn":1,"step":1,"index":0,"dt":[0],"texts":["a","b"]}`))
	f.Fuzz(func(t *testing.T, tag string, seq0, time0 int64, data []byte) {
		if seq0 < 0 || seq0 > maxSafe || time0 > maxSafe || time0 < -maxSafe {
			return // the row's columns are validated before this decoder runs
		}
		r, err := newRow(seq0, tag, time0, string(data), nil, nil, int64(0))
		if err != nil {
			return
		}
		evs, err := decodeRow(&r)
		if err != nil {
			return
		}
		if len(evs) < MinPackedMembers || len(evs) > MaxPackedMembers {
			t.Fatalf("%d members", len(evs))
		}
		for i, e := range evs {
			want := seq0 + int64(i)
			if want > maxSafe {
				// the bound is checked in float64 as the harness does (seq0 + n - 1 may round back into
				// range), so a member past it is accepted and then has no valid seq: the scan refuses it
				want = -1
			}
			if e.Seq != want || e.Type != "assistant/chunk" {
				t.Fatalf("member %d: %s", i, e.Raw)
			}
		}
		if !event.IsCanonical(data) {
			return
		}
		recs := event.PackRecords(evs, nil, packLimits, 1)
		if len(recs) == 1 && recs[0].Data != nil && recs[0].Tag == tag && !bytes.Equal(recs[0].Data, data) {
			t.Fatalf("repacked as %s", recs[0].Data)
		}
	})
}
