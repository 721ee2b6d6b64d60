package spill

import (
	"encoding/json"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/internal/eventtest"
)

func TestIndexAndJSON(t *testing.T) {
	l := newLayout(t)
	present := filepath.Join(l.root, "session-abc", "0123456789ab-bash.txt")
	write(t, present, "twelve bytes")
	missing := filepath.Join(l.root, "session-abc", "gone.txt")
	outside := "/tmp/dsh-acp-snap-ee77dff02/session-5e53dc8acfe4/2ce9d7a31a38-bash.txt"
	events := eventtest.Events(t,
		toolResult(16, "call_spill", "preview\n\n"+notice(1417, outside, LocalRetrievalHint)),
		toolResult(20, `call"é/1`, notice(40, present, LocalRetrievalHint)),
		codeDispatch(21, "call_run:code:0", notice(41, missing, LocalRetrievalHint)),
		// the pruned replacement of seq 20 cites the same file; seq 20 is now shadowed
		toolResult(23, `call"é/1`, "[... tool result middle pruned ...]\n\n"+notice(40, present, LocalRetrievalHint)),
	)
	shadowed := func(seq int64) bool { return seq == 20 }
	rows := Index(Extract(events), l.roots, shadowed)
	want := []Row{
		{Row: 0, CallID: "call_spill", Seq: 16, Locator: outside, Status: OutsideRoots},
		{Row: 1, CallID: `call"é/1`, Seq: 20, Locator: present, Status: Present, Bytes: 12, Shadowed: true,
			File: "spill/0000000001-call~0022~00E9~002F1"},
		{Row: 2, CallID: "call_run:code:0", Seq: 21, Locator: missing, Status: Missing},
		{Row: 3, CallID: `call"é/1`, Seq: 23, Locator: present, Status: Present, Bytes: 12,
			File: "spill/0000000003-call~0022~00E9~002F1"},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("Index\n got %+v\nwant %+v", rows, want)
	}
	wantJSON := `[{"row":0,"callId":"call_spill","seq":16,"locator":"` + outside + `","status":"outside-roots","bytes":null,"shadowed":false,"file":null},` +
		`{"row":1,"callId":"call\"é/1","seq":20,"locator":"` + present + `","status":"present","bytes":12,"shadowed":true,"file":"spill/0000000001-call~0022~00E9~002F1"},` +
		`{"row":2,"callId":"call_run:code:0","seq":21,"locator":"` + missing + `","status":"missing","bytes":null,"shadowed":false,"file":null},` +
		`{"row":3,"callId":"call\"é/1","seq":23,"locator":"` + present + `","status":"present","bytes":12,"shadowed":false,"file":"spill/0000000003-call~0022~00E9~002F1"}]` + "\n"
	got := string(IndexJSON(rows))
	if got != wantJSON {
		t.Fatalf("IndexJSON\n got %s\nwant %s", got, wantJSON)
	}
	// It is plain JSON with the schema's keys in order.
	var decoded []map[string]any
	if err := json.Unmarshal([]byte(got), &decoded); err != nil || len(decoded) != 4 {
		t.Fatalf("not a JSON array of 4 rows: %v", err)
	}
	keys := []string{`"row"`, `"callId"`, `"seq"`, `"locator"`, `"status"`, `"bytes"`, `"shadowed"`, `"file"`}
	first := strings.SplitN(got, "},", 2)[0]
	last := -1
	for _, k := range keys {
		i := strings.Index(first, k)
		if i <= last {
			t.Fatalf("key %s out of order in %s", k, first)
		}
		last = i
	}

	// A present row's file is the locator's content, through Open.
	f, err := l.roots.Open(rows[1].Locator)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	if string(b) != "twelve bytes" || int64(len(b)) != rows[1].Bytes {
		t.Fatalf("content %q", b)
	}
	if FileName(1, `call"é/1`) != strings.TrimPrefix(rows[1].File, "spill/") {
		t.Fatalf("FileName disagrees with Row.File")
	}
}

func TestIndexEdges(t *testing.T) {
	if got := string(IndexJSON(nil)); got != "[]\n" {
		t.Fatalf("empty index = %q", got)
	}
	rows := Index([]Locator{{Seq: 3, CallID: "", Path: "/nowhere/x.txt"}, {Seq: 4, CallID: "c\u2028", Path: "rel\x01"}}, nil, nil)
	want := `[{"row":0,"callId":"","seq":3,"locator":"/nowhere/x.txt","status":"outside-roots","bytes":null,"shadowed":false,"file":null},` +
		`{"row":1,"callId":"c` + "\u2028" + `","seq":4,"locator":"rel\u0001","status":"outside-roots","bytes":null,"shadowed":false,"file":null}]` + "\n"
	if got := string(IndexJSON(rows)); got != want {
		t.Fatalf("IndexJSON\n got %s\nwant %s", got, want)
	}
	// An empty call id still names a file: "~".
	if got := FileName(7, ""); got != "0000000007-~" {
		t.Fatalf("FileName(7, \"\") = %q", got)
	}
	// Call ids that need the cap keep the whole name within NAME_MAX.
	if got := FileName(0, strings.Repeat("x", 300)); len(got) != 11+MaxNameBytes {
		t.Fatalf("long FileName is %d bytes", len(got))
	}
}
