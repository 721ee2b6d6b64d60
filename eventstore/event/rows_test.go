package event

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// decodeLog decodes every complete event line of a raw log (the torn LF-less tail excluded) and
// returns the decoded events grouped per stored line.
func decodeLog(t *testing.T, path string) [][]Event {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, lines, _ := splitRecords(t, data)
	out := make([][]Event, len(lines))
	for i, line := range lines {
		raw, err := Canonical(line)
		if err != nil {
			t.Fatalf("%s line %d: %v", path, i+1, err)
		}
		evs, err := DecodeRecord(raw)
		if err != nil {
			t.Fatalf("%s line %d: %v", path, i+1, err)
		}
		out[i] = evs
	}
	return out
}

// TestDecodeRecordGoldenStored: expanding every stored line reproduces the harness's readFrom(id, 0).
func TestDecodeRecordGoldenStored(t *testing.T) {
	fx := fixturesDir(t)
	sets := []struct{ store, golden string }{
		{"upstream/raw", "golden/upstream"},
		{"generated/raw", "golden/generated-raw"},
	}
	rows := 0
	for _, s := range sets {
		files := sessionFiles(t, filepath.Join(fx, s.store))
		for _, name := range sortedKeys(files) {
			want, err := os.ReadFile(filepath.Join(fx, s.golden, name, "stored.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			for i, evs := range decodeLog(t, files[name]) {
				if len(evs) > 1 {
					rows++
				}
				for k, e := range evs {
					if e.Seq != int64(len(bytes.Split(got, []byte("\n"))))-1 {
						t.Errorf("%s: line %d member %d has Seq %d", name, i+1, k, e.Seq)
					}
					got = append(got, e.Raw...)
					got = append(got, '\n')
				}
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s/%s: stored events differ at %s", s.golden, name, firstDiff(got, want))
			}
		}
	}
	if rows == 0 {
		t.Fatal("fixtures contain no packed rows")
	}
}

// batches groups a log's lines (each with its decoded events) into durable write batches: a batch ends
// after a step/end, turn/end or session/end-seed line, as the zstd fixtures' frames show.
func batches(lines [][]Event) [][]int {
	var out [][]int
	var cur []int
	for i, evs := range lines {
		cur = append(cur, i)
		if len(evs) == 1 {
			switch evs[0].Type {
			case "step/end", "turn/end", "session/end-seed":
				out = append(out, cur)
				cur = nil
			}
		}
	}
	if cur != nil {
		out = append(out, cur)
	}
	return out
}

// TestPackBatchReproducesFixtureBatches: packing each batch's expanded events yields the batch's lines.
func TestPackBatchReproducesFixtureBatches(t *testing.T) {
	fx := fixturesDir(t)
	frames := readFrames(t, filepath.Join(fx, "upstream/zstd-FRAMES.tsv"))
	for _, store := range []string{"upstream/raw", "generated/raw"} {
		files := sessionFiles(t, filepath.Join(fx, store))
		for _, name := range sortedKeys(files) {
			data, err := os.ReadFile(files[name])
			if err != nil {
				t.Fatal(err)
			}
			_, lines, _ := splitRecords(t, data)
			decoded := decodeLog(t, files[name])
			bs := batches(decoded)
			if n, ok := frames[name]; ok && len(decoded) > 0 && n != len(bs)+1 {
				t.Errorf("%s: %d batches but the zstd copy has %d frames", name, len(bs), n)
			}
			for _, b := range bs {
				var evs []Event
				for _, i := range b {
					evs = append(evs, decoded[i]...)
				}
				packed := PackBatch(evs, 4)
				if len(packed) != len(b) {
					t.Errorf("%s: batch at line %d packs into %d lines, stored %d", name, b[0]+1, len(packed), len(b))
					continue
				}
				for k, i := range b {
					if !bytes.Equal(packed[k], lines[i]) {
						t.Errorf("%s line %d:\n got: %s\nwant: %s", name, i+1, packed[k], lines[i])
					}
				}
			}
		}
	}
}

// readFrames reads zstd-FRAMES.tsv: encoded id → frame count.
func readFrames(t *testing.T, path string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n")[1:] {
		f := strings.Split(line, "\t")
		n := 0
		for _, c := range f[2] {
			n = n*10 + int(c-'0')
		}
		out[f[0]] = n
	}
	if len(out) == 0 {
		t.Fatal("empty zstd-FRAMES.tsv")
	}
	return out
}

// chunk builds an assistant/chunk event line; body is the chunk object JSON.
func chunk(seq, time int, body string) Event {
	return mustEvent(`{"type":"assistant/chunk","seq":` + itoa(seq) + `,"time":` + itoa(time) + `,"data":{"turn":1,"step":0,"chunk":` + body + `}}`)
}

func mustEvent(s string) Event {
	raw, err := Canonical([]byte(s))
	if err != nil {
		panic(err)
	}
	e, err := NewEvent(raw)
	if err != nil {
		panic(err)
	}
	return e
}

func text(seq, time int, s string) Event {
	return chunk(seq, time, `{"type":"text-delta","index":0,"text":"`+s+`"}`)
}

func TestPackBatchEligibility(t *testing.T) {
	three := func(mk func(i int) Event) []Event { return []Event{mk(0), mk(1), mk(2)} }
	cases := []struct {
		name   string
		events []Event
		want   []string // expected lines; "=N" means events[N].Raw verbatim
	}{
		{"text run packs", three(func(i int) Event { return text(i, 100+i, "t"+itoa(i)) }),
			[]string{`{"type":"text-chunks","seq0":0,"time0":100,"data":{"turn":1,"step":0,"index":0,"dt":[1,1],"texts":["t0","t1","t2"]}}`}},
		{"two members stay lines", []Event{text(0, 1, "a"), text(1, 1, "b")}, []string{"=0", "=1"}},
		{"reasoning run", three(func(i int) Event {
			return chunk(i, 5, `{"type":"reasoning-delta","index":2,"text":"r"}`)
		}), []string{`{"type":"reasoning-chunks","seq0":0,"time0":5,"data":{"turn":1,"step":0,"index":2,"dt":[0,0],"texts":["r","r","r"]}}`}},
		{"tool-call run with name", three(func(i int) Event {
			return chunk(i, 10-i, `{"type":"tool-call-delta","index":1,"id":"c","name":"n","argumentsDelta":"{"}`)
		}), []string{`{"type":"tool-call-chunks","seq0":0,"time0":10,"data":{"turn":1,"step":0,"index":1,"dt":[-1,-1],"id":"c","name":"n","args":["{","{","{"]}}`}},
		{"tool-call run without name", three(func(i int) Event {
			return chunk(i, 0, `{"type":"tool-call-delta","index":1,"id":"c","argumentsDelta":"x"}`)
		}), []string{`{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":1,"dt":[0,0],"id":"c","args":["x","x","x"]}}`}},
		{"mixed name presence breaks run", []Event{
			chunk(0, 0, `{"type":"tool-call-delta","index":1,"id":"c","name":"n","argumentsDelta":""}`),
			chunk(1, 0, `{"type":"tool-call-delta","index":1,"id":"c","argumentsDelta":""}`),
			chunk(2, 0, `{"type":"tool-call-delta","index":1,"id":"c","argumentsDelta":""}`),
		}, []string{"=0", "=1", "=2"}},
		{"different call id breaks run", []Event{
			chunk(0, 0, `{"type":"tool-call-delta","index":1,"id":"a","argumentsDelta":""}`),
			chunk(1, 0, `{"type":"tool-call-delta","index":1,"id":"b","argumentsDelta":""}`),
			chunk(2, 0, `{"type":"tool-call-delta","index":1,"id":"b","argumentsDelta":""}`),
		}, []string{"=0", "=1", "=2"}},
		{"different name breaks run", []Event{
			chunk(0, 0, `{"type":"tool-call-delta","index":1,"id":"a","name":"x","argumentsDelta":""}`),
			chunk(1, 0, `{"type":"tool-call-delta","index":1,"id":"a","name":"y","argumentsDelta":""}`),
			chunk(2, 0, `{"type":"tool-call-delta","index":1,"id":"a","name":"y","argumentsDelta":""}`),
		}, []string{"=0", "=1", "=2"}},
		{"kind change breaks run", []Event{text(0, 0, "a"), text(1, 0, "b"),
			chunk(2, 0, `{"type":"reasoning-delta","index":0,"text":"c"}`)}, []string{"=0", "=1", "=2"}},
		{"seq gap breaks run", []Event{text(0, 0, "a"), text(1, 0, "b"), text(3, 0, "c")}, []string{"=0", "=1", "=2"}},
		{"index change breaks run", []Event{text(0, 0, "a"), text(1, 0, "b"),
			chunk(2, 0, `{"type":"text-delta","index":1,"text":"c"}`)}, []string{"=0", "=1", "=2"}},
		{"step change breaks run", []Event{text(0, 0, "a"), text(1, 0, "b"),
			mustEvent(`{"type":"assistant/chunk","seq":2,"time":0,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"c"}}}`)},
			[]string{"=0", "=1", "=2"}},
		{"turn change breaks run", []Event{text(0, 0, "a"), text(1, 0, "b"),
			mustEvent(`{"type":"assistant/chunk","seq":2,"time":0,"data":{"turn":2,"step":0,"chunk":{"type":"text-delta","index":0,"text":"c"}}}`)},
			[]string{"=0", "=1", "=2"}},
		{"unsafe time gap breaks run", []Event{text(0, 0, "a"), text(1, 0, "b"),
			mustEvent(`{"type":"assistant/chunk","seq":2,"time":9007199254740991,"data":{"turn":1,"step":0,"chunk":{"type":"text-delta","index":0,"text":"c"}}}`),
			mustEvent(`{"type":"assistant/chunk","seq":3,"time":-9007199254740991,"data":{"turn":1,"step":0,"chunk":{"type":"text-delta","index":0,"text":"c"}}}`)},
			[]string{`{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[0,9007199254740991],"texts":["a","b","c"]}}`, "=3"}},
		{"extra envelope key is verbatim", []Event{text(0, 0, "a"), text(1, 0, "b"),
			mustEvent(`{"type":"assistant/chunk","seq":2,"time":0,"data":{"turn":1,"step":0,"chunk":{"type":"text-delta","index":0,"text":"c"}},"ignorable":true}`)},
			[]string{"=0", "=1", "=2"}},
		{"extra chunk key is verbatim", []Event{text(0, 0, "a"), text(1, 0, "b"),
			chunk(2, 0, `{"type":"text-delta","index":0,"text":"c","x":1}`)}, []string{"=0", "=1", "=2"}},
		{"non-string text is verbatim", []Event{text(0, 0, "a"), text(1, 0, "b"),
			chunk(2, 0, `{"type":"text-delta","index":0,"text":1}`)}, []string{"=0", "=1", "=2"}},
		{"non-numeric index is verbatim", []Event{text(0, 0, "a"), text(1, 0, "b"),
			chunk(2, 0, `{"type":"text-delta","index":"0","text":"c"}`)}, []string{"=0", "=1", "=2"}},
		{"fractional time is verbatim", []Event{text(0, 0, "a"), text(1, 0, "b"),
			mustEvent(`{"type":"assistant/chunk","seq":2,"time":0.5,"data":{"turn":1,"step":0,"chunk":{"type":"text-delta","index":0,"text":"c"}}}`)},
			[]string{"=0", "=1", "=2"}},
		{"negative seq is verbatim", []Event{
			mustEvent(`{"type":"assistant/chunk","seq":-1,"time":0,"data":{"turn":1,"step":0,"chunk":{"type":"text-delta","index":0,"text":"a"}}}`),
			text(0, 0, "b"), text(1, 0, "c")}, []string{"=0", "=1", "=2"}},
		{"unsafe seq is verbatim", []Event{text(0, 0, "a"), text(1, 0, "b"),
			mustEvent(`{"type":"assistant/chunk","seq":9007199254740992,"time":0,"data":{"turn":1,"step":0,"chunk":{"type":"text-delta","index":0,"text":"c"}}}`)},
			[]string{"=0", "=1", "=2"}},
		{"non-numeric turn is verbatim", []Event{text(0, 0, "a"), text(1, 0, "b"),
			mustEvent(`{"type":"assistant/chunk","seq":2,"time":0,"data":{"turn":"1","step":0,"chunk":{"type":"text-delta","index":0,"text":"c"}}}`)},
			[]string{"=0", "=1", "=2"}},
		{"tool-call name must be a string", []Event{
			chunk(0, 0, `{"type":"tool-call-delta","index":1,"id":"c","name":null,"argumentsDelta":""}`),
			chunk(1, 0, `{"type":"tool-call-delta","index":1,"id":"c","name":null,"argumentsDelta":""}`),
			chunk(2, 0, `{"type":"tool-call-delta","index":1,"id":"c","name":null,"argumentsDelta":""}`),
		}, []string{"=0", "=1", "=2"}},
		{"key order of the source event does not matter", []Event{text(0, 0, "a"), text(1, 0, "b"),
			mustEvent(`{"data":{"chunk":{"text":"c","index":0,"type":"text-delta"},"step":0,"turn":1},"time":0,"seq":2,"type":"assistant/chunk"}`)},
			[]string{`{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[0,0],"texts":["a","b","c"]}}`}},
		{"extra data key is verbatim", []Event{text(0, 0, "a"), text(1, 0, "b"),
			mustEvent(`{"type":"assistant/chunk","seq":2,"time":0,"data":{"turn":1,"step":0,"chunk":{"type":"text-delta","index":0,"text":"c"},"x":0}}`)},
			[]string{"=0", "=1", "=2"}},
		{"block boundary chunk is verbatim and splits", []Event{text(0, 0, "a"), text(1, 0, "b"),
			chunk(2, 0, `{"type":"text-end","index":0}`), text(3, 0, "c"), text(4, 0, "d"), text(5, 0, "e")},
			[]string{"=0", "=1", "=2", `{"type":"text-chunks","seq0":3,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[0,0],"texts":["c","d","e"]}}`}},
		{"other event types pass through", []Event{mustEvent(`{"type":"turn/start","seq":0,"time":0,"data":null}`), mustEvent(`42`)},
			[]string{"=0", "=1"}},
		{"escaped texts", three(func(i int) Event { return text(i, 0, `\"\n\u0001\ud800`) }),
			[]string{`{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[0,0],"texts":["\"\n\u0001\ud800","\"\n\u0001\ud800","\"\n\u0001\ud800"]}}`}},
	}
	reordered := map[string]bool{"key order of the source event does not matter": true}
	for _, c := range cases {
		got := PackBatch(c.events, 4)
		if len(got) != len(c.want) {
			t.Errorf("%s: %d lines, want %d: %s", c.name, len(got), len(c.want), bytes.Join(got, []byte("\n")))
			continue
		}
		for i, w := range c.want {
			if strings.HasPrefix(w, "=") {
				w = string(c.events[int(w[1]-'0')].Raw)
			}
			if string(got[i]) != w {
				t.Errorf("%s: line %d\n got: %s\nwant: %s", c.name, i, got[i], w)
			}
		}
		// Whatever PackBatch writes must decode back to exactly the input events.
		var back []Event
		for _, line := range got {
			evs, err := DecodeRecord(line)
			if err != nil {
				t.Fatalf("%s: decoding own output: %v", c.name, err)
			}
			back = append(back, evs...)
		}
		for i := range c.events {
			if reordered[c.name] && i == len(c.events)-1 {
				// The expansion uses the harness's key order, not the input's (as the harness does).
				break
			}
			if i >= len(back) || !bytes.Equal(back[i].Raw, c.events[i].Raw) {
				t.Errorf("%s: round trip lost event %d", c.name, i)
				break
			}
		}
	}
}

func TestDecodeRecordMalformedRows(t *testing.T) {
	const data = `"data":{"turn":1,"step":0,"index":0,"dt":[1],"texts":["a","b"]}`
	cases := []struct{ line, want string }{
		{`{"type":"text-chunks","seq0":0,"time0":0,` + data + `,"x":1}`, "malformed text-chunks storage row: envelope must be exactly {type, seq0, time0, data}"},
		{`{"type":"text-chunks","seq0":-1,"time0":0,` + data + `}`, "malformed text-chunks storage row: seq0 must be a non-negative safe integer"},
		{`{"type":"text-chunks","seq0":"0","time0":0,` + data + `}`, "malformed text-chunks storage row: seq0 must be a non-negative safe integer"},
		{`{"type":"text-chunks","seq0":0,"time0":0.5,` + data + `}`, "malformed text-chunks storage row: time0 must be a safe integer"},
		{`{"type":"text-chunks","seq0":0,"time0":0,"data":null}`, "malformed text-chunks storage row: data must be an object"},
		{`{"type":"text-chunks","seq0":0,"time0":0,"data":"x"}`, "malformed text-chunks storage row: data must be an object"},
		{`{"type":"text-chunks","seq0":0,"time0":0,"data":[]}`, "malformed text-chunks storage row: data must be exactly {turn, step, index, dt, texts}"},
		{`{"type":"reasoning-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[]}}`, "malformed reasoning-chunks storage row: data must be exactly {turn, step, index, dt, texts}"},
		{`{"type":"tool-call-chunks","seq0":0,"time0":0,` + data + `}`, "malformed tool-call-chunks storage row: data must be exactly {turn, step, index, id, name?, dt, args}"},
		{`{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"id":1,"dt":[],"args":["a"]}}`, "malformed tool-call-chunks storage row: id (and name when present) must be strings"},
		{`{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"id":"c","name":null,"dt":[],"args":["a"]}}`, "malformed tool-call-chunks storage row: id (and name when present) must be strings"},
		{`{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"id":"c","dt":[],"args":[]}}`, "malformed tool-call-chunks storage row: args must be a non-empty string array"},
		{`{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":"1","step":0,"index":0,"dt":[],"texts":["a"]}}`, "malformed text-chunks storage row: turn/step/index must be numbers"},
		{`{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[],"texts":[1]}}`, "malformed text-chunks storage row: texts must be a non-empty string array"},
		{`{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":{},"texts":["a"]}}`, "malformed text-chunks storage row: dt must be an array of safe integers"},
		{`{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[0.5],"texts":["a","b"]}}`, "malformed text-chunks storage row: dt must be an array of safe integers"},
		{`{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[1,2],"texts":["a","b"]}}`, "malformed text-chunks storage row: dt length 2 does not match 2 members"},
		{`{"type":"text-chunks","seq0":9007199254740991,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[1,1],"texts":["a","b","c"]}}`, "malformed text-chunks storage row: member seqs must stay safe integers"},
		{`{"type":"text-chunks","seq0":0,"time0":9007199254740991,` + data + `}`, "malformed text-chunks storage row: member times must stay safe integers"},
	}
	for _, c := range cases {
		raw, err := Canonical([]byte(c.line))
		if err != nil {
			t.Fatal(err)
		}
		evs, err := DecodeRecord(raw)
		var me *MalformedRowError
		if !errors.As(err, &me) || err.Error() != c.want || evs != nil {
			t.Errorf("DecodeRecord(%s) = %v\nwant %s", c.line, err, c.want)
		}
	}
}

func TestDecodeRecordExpands(t *testing.T) {
	cases := []struct {
		line string
		want []string
	}{
		{`{"type":"text-chunks","seq0":4,"time0":10,"data":{"turn":1,"step":-0,"index":0,"dt":[-3],"texts":["a","\u0000"]}}`, []string{
			`{"type":"assistant/chunk","seq":4,"time":10,"data":{"turn":1,"step":0,"chunk":{"type":"text-delta","index":0,"text":"a"}}}`,
			`{"type":"assistant/chunk","seq":5,"time":7,"data":{"turn":1,"step":0,"chunk":{"type":"text-delta","index":0,"text":"\u0000"}}}`,
		}},
		// The decoder accepts a single member (the encoder never writes one) and key orders other than
		// the encoder's.
		{`{"data":{"texts":["x"],"dt":[],"index":1.5,"step":2,"turn":3},"time0":1,"seq0":0,"type":"reasoning-chunks"}`, []string{
			`{"type":"assistant/chunk","seq":0,"time":1,"data":{"turn":3,"step":2,"chunk":{"type":"reasoning-delta","index":1.5,"text":"x"}}}`,
		}},
		{`{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":0,"step":0,"index":0,"id":"c","name":"n","dt":[0],"args":["{","}"]}}`, []string{
			`{"type":"assistant/chunk","seq":0,"time":0,"data":{"turn":0,"step":0,"chunk":{"type":"tool-call-delta","index":0,"id":"c","name":"n","argumentsDelta":"{"}}}`,
			`{"type":"assistant/chunk","seq":1,"time":0,"data":{"turn":0,"step":0,"chunk":{"type":"tool-call-delta","index":0,"id":"c","name":"n","argumentsDelta":"}"}}}`,
		}},
		// JS computes seq0+members-1 in floating point: 2^53-1+2 rounds down to 2^53, minus 1 is safe again,
		// so the harness accepts this row and expands a member with an unsafe seq. Reproduce that.
		{`{"type":"text-chunks","seq0":9007199254740991,"time0":0,` + "\"data\":{\"turn\":1,\"step\":0,\"index\":0,\"dt\":[1],\"texts\":[\"a\",\"b\"]}}", []string{
			`{"type":"assistant/chunk","seq":9007199254740991,"time":0,"data":{"turn":1,"step":0,"chunk":{"type":"text-delta","index":0,"text":"a"}}}`,
			`{"type":"assistant/chunk","seq":9007199254740992,"time":1,"data":{"turn":1,"step":0,"chunk":{"type":"text-delta","index":0,"text":"b"}}}`,
		}},
		{`{"type":"turn/start","seq":0}`, []string{`{"type":"turn/start","seq":0}`}},
		{`["text-chunks"]`, []string{`["text-chunks"]`}},
		{`null`, []string{`null`}},
	}
	for _, c := range cases {
		raw, err := Canonical([]byte(c.line))
		if err != nil {
			t.Fatal(err)
		}
		evs, err := DecodeRecord(raw)
		if err != nil {
			t.Errorf("DecodeRecord(%s): %v", c.line, err)
			continue
		}
		if len(evs) != len(c.want) {
			t.Errorf("DecodeRecord(%s): %d events, want %d", c.line, len(evs), len(c.want))
			continue
		}
		for i, w := range c.want {
			if string(evs[i].Raw) != w {
				t.Errorf("DecodeRecord(%s)[%d]\n got: %s\nwant: %s", c.line, i, evs[i].Raw, w)
			}
			if !IsCanonical(evs[i].Raw) {
				t.Errorf("expanded event not canonical: %s", evs[i].Raw)
			}
		}
	}
}

// TestFastRowAgreesWithExpandRow: wherever the fast row reader accepts a line, the general path accepts it
// too and expands it to the same events; it accepts every row the harness wrote in the fixtures (so loads
// take it), and none the general path refuses. The lines: the fixtures' rows, hand-written edge cases, and
// deterministic mutations of both (bytes changed, dropped or repeated).
func TestFastRowAgreesWithExpandRow(t *testing.T) {
	var rows [][]byte
	fixtureRows := 0
	fx := fixturesDir(t)
	filepath.Walk(filepath.Join(fx, "upstream", "raw"), func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || !strings.HasSuffix(path, ".jsonl") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, line := range bytes.Split(data, []byte("\n")) {
			if bytes.Contains(line, []byte(`-chunks","seq0":`)) {
				rows = append(rows, line)
				fixtureRows++
			}
		}
		return nil
	})
	if fixtureRows == 0 {
		t.Fatal("no chunk rows in the fixtures")
	}
	rows = append(rows,
		[]byte(`{"type":"text-chunks","seq0":4,"time0":10,"data":{"turn":1,"step":-0,"index":0,"dt":[-3],"texts":["a","\u0000"]}}`),
		[]byte(`{"type":"text-chunks","seq0":9007199254740991,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[1],"texts":["a","b"]}}`),
		[]byte(`{"type":"text-chunks","seq0":9007199254740990,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[1,1,1],"texts":["a","b","c","d"]}}`),
		[]byte(`{"type":"text-chunks","seq0":0,"time0":9007199254740990,"data":{"turn":1,"step":0,"index":0,"dt":[1,1],"texts":["a","b","c"]}}`),
		[]byte(`{"type":"text-chunks","seq0":-1,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[1],"texts":["a","b"]}}`),
		[]byte(`{"type":"text-chunks","seq0":0,"time0":0.5,"data":{"turn":1,"step":0,"index":0,"dt":[1],"texts":["a","b"]}}`),
		[]byte(`{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1e+21,"step":0.5,"index":-2,"dt":[1e+21],"texts":["a","b"]}}`),
		[]byte(`{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[],"texts":[]}}`),
		[]byte(`{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[],"texts":["only"]}}`),
		[]byte(`{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[2,3],"texts":["a","b"]}}`),
		[]byte(`{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":"1","step":0,"index":0,"dt":[1],"texts":["a","b"]}}`),
		[]byte(`{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[1],"texts":["a",2]}}`),
		[]byte(`{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[1],"texts":["a","b"],"x":1}}`),
		[]byte(`{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[1],"texts":["a","b"]},"x":1}`),
		[]byte(`{"type":"reasoning-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[1],"texts":["\"q\"","\\"]}}`),
		[]byte(`{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":0,"step":0,"index":0,"dt":[0],"id":"c","name":"n","args":["{","}"]}}`),
		[]byte(`{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":0,"step":0,"index":0,"dt":[0],"id":"c","args":["{","}"]}}`),
		[]byte(`{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":0,"step":0,"index":0,"dt":[0],"id":5,"args":["{","}"]}}`),
		[]byte(`{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":0,"step":0,"index":0,"dt":[0],"id":"c","name":null,"args":["{","}"]}}`),
		[]byte(`{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":0,"step":0,"index":0,"dt":[0],"id":"c","name":"n","texts":["{","}"]}}`),
		[]byte(`{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":0,"step":0,"index":0,"dt":[0],"id":"c","texts":["{","}"]}}`),
		// texts whose tokens carry every kind of escape JSON.stringify writes, and characters it leaves alone
		[]byte(`{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[1,1,1],"texts":["\b\f\n\r\t\u001f","\ud800x\udfff","é 😀","\"\\/"]}}`),
		[]byte(`{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":0,"step":0,"index":0,"dt":[0],"id":"\u0001","name":"\ud83d","args":["\u0000","\"\u007f"]}}`),
	)
	base := len(rows)
	seed := uint64(1)
	for i := 0; i < base; i++ {
		for k := 0; k < 40; k++ {
			seed = seed*6364136223846793005 + 1442695040888963407
			r := rows[i]
			if len(r) == 0 {
				continue
			}
			at := int(seed>>33) % len(r)
			m := bytes.Clone(r)
			switch k % 4 {
			case 0:
				m[at] = "0123456789-.e,:[]{}\"a\\"[int(seed>>20)%22]
			case 1:
				m = append(m[:at], m[at+1:]...)
			case 2:
				m = append(m[:at], append([]byte{m[at]}, m[at:]...)...)
			case 3:
				m[at] = '9'
			}
			rows = append(rows, m)
		}
	}
	fast, canonical := 0, 0
	var sc RowScratch // shared by every row, as a decoder shares it
	for i, line := range rows {
		raw, err := Canonical(line)
		if err != nil {
			continue
		}
		canonical++
		ev := trustedEvent(raw)
		if !IsRowTag(ev.Type) {
			continue
		}
		run, ok := fastRow(raw, ev.Type, &sc)
		v, perr := Parse(raw)
		var general []Event
		gerr := perr
		if perr == nil {
			general, gerr = expandRow(v, ev.Type)
		}
		if i < fixtureRows && !ok {
			t.Errorf("a row the harness wrote takes the general path: %s", raw)
		}
		if !ok {
			continue
		}
		fast++
		if gerr != nil {
			t.Errorf("fast path accepts a row the general path refuses (%v): %s", gerr, raw)
			continue
		}
		if !checkPacked(t, raw, &sc) {
			t.Errorf("a row the fast path reads is not kept packed: %s", raw)
		}
		got := run.Expand()
		if len(got) != len(general) {
			t.Errorf("%s: %d events fast, %d general", raw, len(got), len(general))
			continue
		}
		for k := range got {
			if !bytes.Equal(got[k].Raw, general[k].Raw) || got[k].Type != general[k].Type || got[k].Seq != general[k].Seq {
				t.Errorf("%s: member %d\n fast:    %s\n general: %s", raw, k, got[k].Raw, general[k].Raw)
			}
		}
	}
	if fast < fixtureRows+5 || canonical < base*5 {
		t.Fatalf("%d lines read by the fast path, %d canonical lines: the test exercises too little", fast, canonical)
	}
	t.Logf("%d lines, %d canonical, %d by the fast path (%d fixture rows)", len(rows), canonical, fast, fixtureRows)
}

// TestReadChunk: ReadChunk takes the chunk layouts the harness writes and nothing else, and an accepted
// chunk packs exactly as PackingOf packs its parsed record.
func TestReadChunk(t *testing.T) {
	const head = `{"type":"assistant/chunk","seq":7,"time":1778573701015,"data":{"turn":3,"step":2,"chunk":`
	cases := []struct {
		name  string
		line  string
		ok    bool
		packs bool
	}{
		{"text delta", head + `{"type":"text-delta","index":0,"text":"the "}}}`, true, true},
		{"escaped text", head + `{"type":"text-delta","index":1,"text":"a \"b\"\n\u0001 é"}}}`, true, true},
		{"reasoning delta", head + `{"type":"reasoning-delta","index":0,"text":"hm"}}}`, true, true},
		{"tool-call delta", head + `{"type":"tool-call-delta","index":0,"id":"c-1","argumentsDelta":"{\"a"}}}`, true, true},
		{"named tool-call delta", head + `{"type":"tool-call-delta","index":0,"id":"c-1","name":"bash","argumentsDelta":""}}}`, true, true},
		{"block start", head + `{"type":"block-start","index":0,"block":{"type":"text"}}}}`, true, false},
		{"usage", head + `{"type":"usage","usage":{"inputTokens":10,"outputTokens":2}}}}`, true, false},
		{"finish", head + `{"type":"finish","reason":"stop"}}}`, true, false},
		{"delta with another member", head + `{"type":"text-delta","index":0,"text":"x","extra":1}}}`, false, false},
		{"delta in another order", head + `{"index":0,"type":"text-delta","text":"x"}}}`, false, false},
		{"delta type later", head + `{"index":0,"type":"usage"}}}`, false, false},
		{"fractional index", head + `{"type":"text-delta","index":0.5,"text":"x"}}}`, false, false},
		{"text not a string", head + `{"type":"text-delta","index":0,"text":5}}}`, false, false},
		{"chunk not an object", head + `[1]}}`, false, false},
		{"negative turn", strings.Replace(head, `"turn":3`, `"turn":-3`, 1) + `{"type":"usage"}}}`, false, false},
		{"string step", strings.Replace(head, `"step":2`, `"step":"2"`, 1) + `{"type":"usage"}}}`, false, false},
		{"more data", head + `{"type":"usage"},"x":1}}`, false, false},
		{"data in another order", strings.Replace(head, `"turn":3,"step":2`, `"step":2,"turn":3`, 1) + `{"type":"usage"}}}`, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw := []byte(tc.line)
			if !IsCanonical(raw) {
				t.Fatalf("test line is not canonical: %s", raw)
			}
			data, found := Lookup(raw, "data")
			if !found {
				t.Fatal("no data")
			}
			c, ok := ReadChunk(data, 7, 1778573701015)
			if ok && !strings.HasSuffix(string(raw), string(data)+"}") {
				t.Fatal("test line: data is not its last member")
			}
			if ok != tc.ok {
				t.Fatalf("ReadChunk ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if c.Turn != 3 || c.Step != 2 {
				t.Errorf("read turn %v step %v", c.Turn, c.Step)
			}
			rec, err := ParseStrict(raw)
			if err != nil {
				t.Fatal(err)
			}
			want := PackingOf(Event{Raw: raw, Type: "assistant/chunk", Seq: 7}, rec)
			if (c.Packing.d != nil) != tc.packs || !reflect.DeepEqual(c.Packing, want) {
				t.Errorf("packing %+v, PackingOf gives %+v", c.Packing.d, want.d)
			}
		})
	}
}
