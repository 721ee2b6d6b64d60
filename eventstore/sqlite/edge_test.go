package sqlite

import (
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/eventstore/storetest"
	"github.com/dshfs/dshfs/internal/eventtest"
	"github.com/dshfs/dshfs/internal/synth"
)

func newDB(t *testing.T) (*Backend, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.db")
	b, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, path
}

func hdr(id string) event.Header {
	cwd := event.String("/home/dev/proj")
	return event.Header{ID: id, CreatedAt: 1700000000000, Cwd: &cwd}
}

// rawExec changes a database behind the backend's back, as another program would.
func rawExec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// TestOwnershipRefusals: the harness's open-time texts for foreign and changed databases.
func TestOwnershipRefusals(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup []string
		want  string
	}{
		{"unversioned", []string{"CREATE TABLE notes (x)"}, `has an unversioned schema or application identity`},
		{"foreign application", []string{"PRAGMA application_id = 12345", "PRAGMA user_version = 17"}, `has application id 12345, expected 1146308688`},
		{"older schema", []string{"PRAGMA application_id = 1146308688", "PRAGMA user_version = 16"}, `has schema version 16, incompatible with this build (17)`},
		{"added column", []string{"ALTER TABLE sessions ADD COLUMN extra TEXT"}, `does not contain the required schema objects`},
		{"extra index", []string{"CREATE INDEX by_type ON events(type)"}, `does not contain the required schema objects`},
		{"non-strict events", []string{"DROP TABLE events", "CREATE TABLE events (session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE, seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL, data ANY NOT NULL, source_event_seqs ANY, surface_op TEXT, ignorable INTEGER CHECK (ignorable IS NULL OR ignorable IN (0, 1)), PRIMARY KEY (session_id, seq))"}, `does not contain the required schema objects`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.db")
			if strings.HasPrefix(c.setup[0], "CREATE TABLE notes") || strings.HasPrefix(c.setup[0], "PRAGMA") {
				if err := os.WriteFile(path, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			} else {
				b, err := Open(path, Options{})
				if err != nil {
					t.Fatal(err)
				}
				b.Close()
			}
			rawExec(t, path, c.setup...)
			for _, ro := range []bool{true, false} {
				_, err := Open(path, Options{ReadOnly: ro})
				if err == nil || err.Error() != `session database at "`+path+`" `+c.want {
					t.Errorf("read-only=%v: %v", ro, err)
				}
			}
		})
	}
}

// TestMutationRecheck: a schema changed under an open backend is caught inside the write transaction.
func TestMutationRecheck(t *testing.T) {
	b, path := newDB(t)
	rawExec(t, path, "CREATE INDEX by_type ON events(type)")
	_, err := b.Materialize(ctx, hdr("s"), eventtest.Log(t, `turn/start {"turn":1}`))
	if err == nil || !strings.Contains(err.Error(), "does not contain the required schema objects") {
		t.Fatalf("%v", err)
	}
	rawExec(t, path, "DROP INDEX by_type", "PRAGMA application_id = 7")
	if _, err = b.Materialize(ctx, hdr("s"), nil); err == nil || err.Error() != "session database application id changed before mutation (expected 1146308688, got 7)" {
		t.Fatalf("%v", err)
	}
	rawExec(t, path, "PRAGMA application_id = 1146308688", "PRAGMA user_version = 18")
	if _, err = b.Materialize(ctx, hdr("s"), nil); err == nil || err.Error() != "session database schema changed before mutation (expected 17, got 18)" {
		t.Fatalf("%v", err)
	}
}

// TestReadOnlyPristine: a read-only open of an empty file initializes nothing and lists nothing.
func TestReadOnlyPristine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if l, err := b.List(ctx); err != nil || len(l.Entries) != 0 {
		t.Fatalf("%v %v", l, err)
	}
	if _, err := b.Materialize(ctx, hdr("s"), nil); err == nil {
		t.Fatal("a read-only backend wrote")
	}
	if fi, _ := os.Stat(path); fi.Size() != 0 {
		t.Fatalf("the file grew to %d bytes", fi.Size())
	}
}

// TestFileRules: the harness's filesystem rules for a database it writes.
func TestFileRules(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open.db")
	if err := os.WriteFile(open, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(open, Options{}); err == nil || !strings.Contains(err.Error(), "must be owned by the current user and accessible only by that user") {
		t.Errorf("group-readable: %v", err)
	}
	link := filepath.Join(dir, "link.db")
	os.Symlink(open, link)
	if _, err := Open(link, Options{}); err == nil || !strings.Contains(err.Error(), "must be a regular file, not a symbolic link") {
		t.Errorf("symlink: %v", err)
	}
	wide := filepath.Join(dir, "wide")
	os.Mkdir(wide, 0o777)
	os.Chmod(wide, 0o777)
	if _, err := Open(filepath.Join(wide, "s.db"), Options{}); err == nil || !strings.Contains(err.Error(), "not group/world-writable") {
		t.Errorf("world-writable parent: %v", err)
	}
}

// insertRow adds a raw row (another writer, or damage).
func insertRow(t *testing.T, b *Backend, id string, seq int64, typ string, data any, ignorable any) {
	t.Helper()
	if _, err := b.db.Exec(sqlInsertEvent, id, seq, typ, 1, data, nil, nil, ignorable); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptPackedRow: a malformed packed row before a later turn/end is committed corruption; after the
// last one it is the torn tail, which resume removes into a sidecar.
func TestCorruptPackedRow(t *testing.T) {
	b, path := newDB(t)
	st := eventstore.New(b)
	log := eventtest.Log(t, `turn/start {"turn":1}`, `step/start {"turn":1,"step":1}`)
	if _, err := b.Materialize(ctx, hdr("before"), log); err != nil {
		t.Fatal(err)
	}
	insertRow(t, b, "before", 2, "text-chunks", `{"turn":1,"step":1,"index":0,"dt":[0],"texts":["a","b"]}`, 0)
	insertRow(t, b, "before", 4, "turn/end", `{"turn":1,"reason":{"kind":"completed"}}`, nil)
	_, err := st.Inspect(ctx, "before")
	if err == nil || !strings.Contains(err.Error(), "corrupt session log: invalid committed physical row at seq 2") {
		t.Fatalf("before a turn/end: %v", err)
	}

	if _, err := b.Materialize(ctx, hdr("after"), log); err != nil {
		t.Fatal(err)
	}
	insertRow(t, b, "after", 2, "text-chunks", `{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":["a","b",5]}`, 0)
	p, err := b.LoadStored(ctx, "after")
	if err != nil || p.Torn == nil || p.Torn.Seq != 2 || len(p.Events) != 2 {
		t.Fatalf("after the last turn/end: %+v %v", p, err)
	}
	if _, err := b.AppendBatch(ctx, p.Header, p.Artifact, eventtest.Events(t, `{"type":"step/end","seq":2,"time":1,"data":{"turn":1,"step":1}}`), nil); err == nil ||
		!strings.Contains(err.Error(), "session after has an invalid physical tail at seq 2") {
		t.Fatalf("append over a torn tail: %v", err)
	}
	if _, err := st.Resume(ctx, "after"); err != nil {
		t.Fatal(err)
	}
	p, err = b.LoadStored(ctx, "after")
	if err != nil || p.Torn != nil || len(p.Events) < 4 || p.Events[3].Type != "turn/end" {
		t.Fatalf("after resume: %+v %v", p, err)
	}
	sides, _ := filepath.Glob(path + ".torn-*.jsonl")
	if len(sides) != 1 {
		t.Fatalf("torn sidecars %v", sides)
	}
	if body, _ := os.ReadFile(sides[0]); !strings.Contains(string(body), `"texts\":[\"a\",\"b\",5]`) {
		t.Fatalf("the sidecar lacks the removed row: %s", body)
	}
}

// TestDataThreshold: data of 4095 bytes stays TEXT; 4096 bytes is compressed when that is smaller, and
// stays TEXT when it is not; every value reads back.
func TestDataThreshold(t *testing.T) {
	b, _ := newDB(t)
	pad := func(n int, s string) string { // data {"turn":1,"text":"…"} of exactly n bytes
		base := len(`{"turn":1,"text":""}`)
		return strings.Repeat(s, (n-base)/len(s)+1)[:n-base]
	}
	random := make([]byte, 6000)
	rand.Read(random)
	for i := range random {
		random[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[int(random[i])%36]
	}
	cases := []struct {
		text string
		want string
	}{
		{pad(4095, "x"), "text"},
		{pad(4096, "x"), "blob"},
		{pad(4096, string(random)), "text"}, // incompressible: compression is not smaller
	}
	var specs []string
	for i, c := range cases {
		specs = append(specs, fmt.Sprintf(`{"type":"plugin/x","seq":%d,"time":1,"data":{"turn":1,"text":"%s"},"ignorable":true}`, i, c.text))
	}
	evs := eventtest.Events(t, specs...)
	if _, err := b.Materialize(ctx, hdr("s"), evs); err != nil {
		t.Fatal(err)
	}
	rows, err := b.db.Query(`SELECT typeof(data), length(CAST(data AS BLOB)) FROM events ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for i := 0; rows.Next(); i++ {
		var typ string
		var n int
		rows.Scan(&typ, &n)
		if typ != cases[i].want {
			t.Errorf("data of %d bytes stored as %s (%d bytes), want %s", len(cases[i].text)+20, typ, n, cases[i].want)
		}
	}
	p, err := b.LoadStored(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	for i := range evs {
		if string(p.Events[i].Raw) != string(evs[i].Raw) {
			t.Errorf("event %d does not read back", i)
		}
	}
}

// TestPackedCap: a packed row whose zstd data decompresses to 1 MiB + 1 bytes is malformed (the cap), one
// of exactly 1 MiB is not refused for its size; a scalar row has no format cap, only the store's bound.
func TestPackedCap(t *testing.T) {
	member := func(total int) string { // a texts array of 3 members whose data JSON is total bytes
		head := `{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":["a","b","`
		return head + strings.Repeat("c", total-len(head)-3) + `"]}`
	}
	for _, c := range []struct {
		size int
		ok   bool
	}{{MaxPackedData, true}, {MaxPackedData + 1, false}} {
		text := member(c.size)
		r, err := newRow(int64(0), "text-chunks", int64(1), encoder.EncodeAll([]byte(text), nil), nil, nil, int64(0))
		if err != nil {
			t.Fatal(err)
		}
		_, err = decodeRow(&r)
		if (err == nil) != c.ok {
			t.Errorf("%d bytes: %v", c.size, err)
		}
	}
	big := `{"turn":1,"text":"` + strings.Repeat("x", 3<<20) + `"}`
	r, _ := newRow(int64(0), "plugin/x", int64(1), encoder.EncodeAll([]byte(big), nil), nil, nil, int64(1))
	if _, err := decodeRow(&r); err != nil {
		t.Errorf("a 3 MiB scalar row: %v", err)
	}
	// the store's own bound (max_line_bytes) refuses a scalar row that would decompress past it
	r.maxData = 1 << 20
	if _, err := decodeRow(&r); err == nil {
		t.Errorf("a 3 MiB scalar row under a 1 MiB bound decoded")
	}
}

// TestSeqsCodec: the spec's examples and the decoder's refusals with the harness's texts.
func TestSeqsCodec(t *testing.T) {
	for _, c := range []struct {
		seqs []int64
		hex  string
	}{
		{[]int64{2, 3, 4, 5, 6}, "0202020202"},
		{[]int64{10, 7, 300}, "0a05ca04"},
		{[]int64{}, ""},
		{[]int64{1<<53 - 1}, "ffffffffffffff0f"},
		{[]int64{0, 1<<53 - 1, 0}, "00feffffffffffff1ffdffffffffffff1f"},
	} {
		enc, err := EncodeSeqs(c.seqs)
		if err != nil || fmt.Sprintf("%x", enc) != c.hex || enc == nil {
			t.Errorf("%v: %x %v", c.seqs, enc, err)
		}
		dec, err := DecodeSeqs(enc)
		if err != nil || fmt.Sprint(dec) != fmt.Sprint(c.seqs) {
			t.Errorf("%x: %v %v", enc, dec, err)
		}
	}
	for _, c := range []struct{ hex, why string }{
		{"80", "truncated varint"},
		{"0280", "truncated varint"},
		{"8000", "non-canonical varint"},
		{"ffffffffffffffff01", "varint is out of range"},
		{"8080808080808080808001", "varint is out of range"},
		{"0003", "decoded seq is out of range"},
	} {
		var raw []byte
		fmt.Sscanf(c.hex, "%x", &raw)
		_, err := DecodeSeqs(raw)
		var se *SeqsError
		if !errors.As(err, &se) || err.Error() != "malformed source_event_seqs storage value: "+c.why {
			t.Errorf("%s: %v, want %s", c.hex, err, c.why)
		}
	}
	if _, err := EncodeSeqs([]int64{-1}); err == nil || err.Error() != "sourceEventSeqs must contain non-negative safe integers" {
		t.Errorf("negative: %v", err)
	}
}

// TestWorkedExample is spec/sqlite.md §3.8: 14 logical events become 8 physical rows with these columns.
func TestWorkedExample(t *testing.T) {
	b, _ := newDB(t)
	chunk := func(seq, tm int, c string) string {
		return fmt.Sprintf(`{"type":"assistant/chunk","seq":%d,"time":%d,"data":{"turn":1,"step":1,"chunk":%s}}`, seq, tm, c)
	}
	text := func(seq, tm int, s string) string {
		return chunk(seq, tm, `{"type":"text-delta","index":0,"text":"`+s+`"}`)
	}
	evs := eventtest.Events(t,
		`{"type":"turn/start","seq":0,"time":1000,"data":{"turn":1}}`,
		`{"type":"step/start","seq":1,"time":1001,"data":{"turn":1,"step":1}}`,
		text(2, 1002, "Hel"), text(3, 1003, "lo"), text(4, 1003, ","), text(5, 1005, " wor"), text(6, 1004, "ld"),
		chunk(7, 1006, `{"type":"tool-call-delta","index":1,"id":"c1","name":"write","argumentsDelta":""}`),
		chunk(8, 1007, `{"type":"tool-call-delta","index":1,"id":"c1","argumentsDelta":"{\"pa"}`),
		chunk(9, 1007, `{"type":"tool-call-delta","index":1,"id":"c1","argumentsDelta":"th\":\"a"}`),
		chunk(10, 1010, `{"type":"tool-call-delta","index":1,"id":"c1","argumentsDelta":"\"}"}`),
		`{"type":"assistant/message","seq":11,"time":1010,"data":{"turn":1,"step":1,"message":{"id":"m","role":"assistant","content":[]}},"sourceEventSeqs":[2,3,4,5,6,7,8,9,10],"surfaceOp":"append"}`,
		`{"type":"step/end","seq":12,"time":1010,"data":{"turn":1,"step":1}}`,
		`{"type":"turn/end","seq":13,"time":1011,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
	)
	if _, err := b.Materialize(ctx, hdr("s1"), evs); err != nil {
		t.Fatal(err)
	}
	rows, err := b.db.Query(`SELECT seq, type, time, CASE WHEN seq = 11 THEN '' ELSE data END, quote(source_event_seqs), quote(surface_op), quote(ignorable) FROM events ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var seq, tm int64
		var typ, data, seqs, op, ign string
		rows.Scan(&seq, &typ, &tm, &data, &seqs, &op, &ign)
		got = append(got, fmt.Sprintf("%d %s %d %s %s %s %s", seq, typ, tm, data, seqs, op, ign))
	}
	eventtest.SameLines(t, got, []string{
		`0 turn/start 1000 {"turn":1} NULL NULL NULL`,
		`1 step/start 1001 {"turn":1,"step":1} NULL NULL NULL`,
		`2 text-chunks 1002 {"turn":1,"step":1,"index":0,"dt":[1,0,2,-1],"texts":["Hel","lo",","," wor","ld"]} NULL NULL 0`,
		`7 assistant/chunk 1006 {"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":1,"id":"c1","name":"write","argumentsDelta":""}} NULL NULL NULL`,
		`8 tool-call-chunks 1007 {"turn":1,"step":1,"index":1,"dt":[0,3],"id":"c1","args":["{\"pa","th\":\"a","\"}"]} NULL NULL 0`,
		`11 assistant/message 1010  X'020202020202020202' '"append"' NULL`,
		`12 step/end 1010 {"turn":1,"step":1} NULL NULL NULL`,
		`13 turn/end 1011 {"turn":1,"reason":{"kind":"completed"}} NULL NULL NULL`,
	})
	var rev int64
	b.db.QueryRow(`SELECT revision FROM sessions WHERE id = 's1'`).Scan(&rev)
	if rev != 1 {
		t.Errorf("revision %d after the first commit", rev)
	}
	p, err := b.LoadStored(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	for i := range evs {
		if string(p.Events[i].Raw) != string(evs[i].Raw) {
			t.Errorf("seq %d reads back as %s", i, p.Events[i].Raw)
		}
	}
}

// TestPartitions is the harness's bounded-run cases: 1027 members → 1024 + 3; four of 300,000 bytes → a
// row of three and a scalar; three of 400,000 → three scalars.
func TestPartitions(t *testing.T) {
	run := func(n, size int) []event.Event {
		var specs []string
		for i := 0; i < n; i++ {
			specs = append(specs, fmt.Sprintf(`{"type":"assistant/chunk","seq":%d,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"%s"}}}`, i, strings.Repeat("x", size)))
		}
		return eventtest.Events(t, specs...)
	}
	shape := func(evs []event.Event) string {
		var parts []string
		for _, r := range event.PackRecords(evs, nil, packLimits, 1) {
			if r.Data == nil {
				parts = append(parts, "1")
			} else {
				parts = append(parts, fmt.Sprint(r.Members))
			}
		}
		return strings.Join(parts, ",")
	}
	for _, c := range []struct {
		evs  []event.Event
		want string
	}{
		{run(1027, 1), "1024,3"},
		{run(4, 300000), "3,1"},
		{run(3, 400000), "1,1,1"},
		{run(2, 1), "1,1"},
	} {
		if got := shape(c.evs); got != c.want {
			t.Errorf("got %s, want %s", got, c.want)
		}
	}
}

// TestUnrepresentable: an event the schema cannot hold as written is refused before anything is written.
func TestUnrepresentable(t *testing.T) {
	b, _ := newDB(t)
	for _, line := range []string{
		`{"type":"plugin/x","seq":0,"time":1.5,"data":{},"ignorable":true}`,
		`{"type":"plugin/x","seq":0,"time":1,"data":{},"ignorable":false}`,
		`{"type":"plugin/x","seq":0,"time":1,"data":{},"ignorable":true,"extra":1}`,
		`{"seq":0,"type":"plugin/x","time":1,"data":{},"ignorable":true}`,
	} {
		_, err := b.Materialize(ctx, hdr("u"), eventtest.Events(t, line))
		var ce *eventstore.CommandError
		if !errors.As(err, &ce) || ce.Failure != eventstore.Invalid {
			t.Errorf("%s: %v", line, err)
		}
	}
	if l, _ := b.List(ctx); len(l.Entries) != 0 {
		t.Fatalf("a refused materialize wrote %d sessions", len(l.Entries))
	}
	// surfaceOp before sourceEventSeqs (the harness's own closers) is stored, and reads back reordered
	e := eventtest.Events(t, `{"type":"plugin/x","seq":0,"time":1,"data":{},"surfaceOp":"append","sourceEventSeqs":[],"ignorable":true}`)[0]
	got, err := Stored(e)
	if err != nil || string(got.Raw) != `{"type":"plugin/x","seq":0,"time":1,"data":{},"sourceEventSeqs":[],"surfaceOp":"append","ignorable":true}` {
		t.Fatalf("%s %v", got.Raw, err)
	}
}

// TestTwoProcesses: two processes appending to one session — one wins, the other is refused with the
// harness's next-seq text, and no row is lost. The child is this test binary.
func TestTwoProcesses(t *testing.T) {
	if path := os.Getenv("DSHFS_SQLITE_CHILD"); path != "" {
		b, err := Open(path, Options{})
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(2)
		}
		p, err := b.LoadStored(ctx, "s")
		if err != nil {
			fmt.Println("load:", err)
			os.Exit(2)
		}
		fmt.Println("ready")
		var line string
		fmt.Scanln(&line) // both processes loaded the same state; append when told
		_, err = b.AppendBatch(ctx, p.Header, p.Artifact, eventtest.Log(t, `turn/start {"turn":1}`), nil)
		fmt.Println("result:", err)
		os.Exit(0)
	}
	b, path := newDB(t)
	if _, err := b.Materialize(ctx, hdr("s"), nil); err != nil {
		t.Fatal(err)
	}
	var kids []*exec.Cmd
	var ins []*os.File
	var outs []*os.File
	for i := 0; i < 2; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestTwoProcesses$")
		cmd.Env = append(os.Environ(), "DSHFS_SQLITE_CHILD="+path)
		inR, inW, _ := os.Pipe()
		outR, outW, _ := os.Pipe()
		cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, outW
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		inR.Close()
		outW.Close()
		kids, ins, outs = append(kids, cmd), append(ins, inW), append(outs, outR)
	}
	read := func(f *os.File) string {
		var buf [4096]byte
		var s string
		for !strings.Contains(s, "\n") {
			n, err := f.Read(buf[:])
			if err != nil {
				break
			}
			s += string(buf[:n])
		}
		return s
	}
	for _, o := range outs {
		if got := read(o); !strings.HasPrefix(got, "ready") {
			t.Fatalf("child: %s", got)
		}
	}
	for _, in := range ins {
		fmt.Fprintln(in, "go")
	}
	var results []string
	for i, o := range outs {
		results = append(results, strings.TrimSpace(read(o)))
		kids[i].Wait()
	}
	wins, refused := 0, 0
	for _, r := range results {
		switch {
		case r == "result: <nil>":
			wins++
		case strings.Contains(r, "session s append starts at seq 0, stored next seq is 1"):
			refused++
		default:
			t.Errorf("child result %q", r)
		}
	}
	if wins != 1 || refused != 1 {
		t.Fatalf("results %v", results)
	}
	p, err := b.LoadStored(ctx, "s")
	if err != nil || len(p.Events) != 1 {
		t.Fatalf("%v %v", p, err)
	}
	var rev int64
	b.db.QueryRow(`SELECT revision FROM sessions`).Scan(&rev)
	if rev != 2 {
		t.Errorf("revision %d", rev)
	}
}

// synthLog is a synthetic session of at least n events (internal/synth), with chunk runs the SQLite
// backend packs, as a JSONL load reads it.
func synthLog(t *testing.T, id string, n int) *eventstore.Prefix {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	if err := synth.Write(root, jsonl.None, id, n); err != nil {
		t.Fatal(err)
	}
	src, err := jsonl.Open(root, jsonl.None)
	if err != nil {
		t.Fatal(err)
	}
	p, err := src.LoadStored(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRowMembers: LoadStored marks exactly the events that came from packed rows (eventstore.Prefix.RowMembers,
// which lets the load checks skip their envelopes), for a log mixing packed rows with scalar rows.
func TestRowMembers(t *testing.T) {
	b, _ := newDB(t)
	p := synthLog(t, "rows", 3000)
	if _, err := b.Materialize(ctx, p.Header, p.Events); err != nil {
		t.Fatal(err)
	}
	rows, err := b.readRows(ctx, b.db, sqlSelectEvents, "rows")
	if err != nil {
		t.Fatal(err)
	}
	var want []bool
	for i := range rows {
		evs, err := decodeRow(&rows[i])
		if err != nil {
			t.Fatal(err)
		}
		for range evs {
			want = append(want, rows[i].packed())
		}
	}
	got, err := b.LoadStored(ctx, "rows")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Events) != len(want) || len(want) != len(p.Events) {
		t.Fatalf("%d events loaded, %d in the rows, %d written", len(got.Events), len(want), len(p.Events))
	}
	marked := 0
	for i, w := range want {
		if m := i/64 < len(got.RowMembers) && got.RowMembers[i/64]&(1<<(i%64)) != 0; m != w {
			t.Fatalf("event %d (%s) marked %v, from a packed row %v", i, got.Events[i].Raw, m, w)
		} else if m {
			marked++
		}
	}
	if marked == 0 || marked == len(want) {
		t.Fatalf("%d of %d events marked: the test exercises too little", marked, len(want))
	}
	ins, err := eventstore.New(b).Inspect(ctx, "rows")
	if err != nil || len(ins.Events) != len(p.Events) {
		t.Fatalf("inspect: %v", err)
	}
}

// TestReleasedRowsKeepTheirSize: a load drops each row's data once decoded (scanRows with release), and the
// torn tail it reports still has the size of the rows as stored, rows after the bad one included.
func TestReleasedRowsKeepTheirSize(t *testing.T) {
	b, _ := newDB(t)
	log := eventtest.Log(t, `turn/start {"turn":1}`, `step/start {"turn":1,"step":1}`)
	if _, err := b.Materialize(ctx, hdr("s"), log); err != nil {
		t.Fatal(err)
	}
	insertRow(t, b, "s", 2, "text-chunks", `{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":["a","b",5]}`, 0)
	insertRow(t, b, "s", 5, "step/end", `{"turn":1,"step":1,"note":"`+strings.Repeat("x", 5000)+`"}`, nil)
	var sizes [2]int64
	for k, release := range []bool{false, true} {
		rows, err := b.readRows(ctx, b.db, sqlSelectEvents, "s")
		if err != nil {
			t.Fatal(err)
		}
		sc, err := scanRows(rows, 0, release, eventstore.Tuning{})
		if err != nil || sc.tornFrom != 2 || len(sc.tornRows) != 2 {
			t.Fatalf("release %v: torn from %d, %d rows, %v", release, sc.tornFrom, len(sc.tornRows), err)
		}
		for i := range sc.tornRows {
			sizes[k] += sc.tornRows[i].size()
		}
		if release && (rows[0].data != nil || rows[1].data != nil) {
			t.Fatal("a decoded row kept its data")
		}
	}
	if sizes[0] != sizes[1] || sizes[0] < 5000 {
		t.Fatalf("torn sizes %d kept, %d released", sizes[0], sizes[1])
	}
	p, err := b.LoadStored(ctx, "s")
	if err != nil || p.Torn == nil || p.Torn.Bytes != sizes[0] {
		t.Fatalf("LoadStored: %+v, %v (want %d torn bytes)", p.Torn, err, sizes[0])
	}
}

// TestLoadBlocksMatchWholeScan: LoadStored, which scans a session's rows block by block, gives what one
// scan of all its rows gives — events, row members, the torn tail's start and size, the refusal — for
// blocks down to one row, on an intact log (ending in an open turn) and on logs with a bad row before the
// last turn/end, after it, and in the last turn/end itself.
func TestLoadBlocksMatchWholeScan(t *testing.T) {
	defer func(n int) { loadBlock = n }(loadBlock)
	p := synthLog(t, "s", 600)
	n := int64(len(p.Events))
	// a session per variant: the synthetic log, then an open turn after its last turn/end
	setup := func(t *testing.T) (*Backend, string) {
		b, path := newDB(t)
		if _, err := b.Materialize(ctx, p.Header, p.Events); err != nil {
			t.Fatal(err)
		}
		insertRow(t, b, "s", n, "turn/start", `{"turn":999}`, nil)
		insertRow(t, b, "s", n+1, "text-chunks", `{"turn":999,"step":1,"index":0,"dt":[0,0],"texts":["a","b","c"]}`, 0)
		insertRow(t, b, "s", n+4, "step/start", `{"turn":999,"step":2}`, nil)
		return b, path
	}
	b, _ := setup(t)
	rows, err := b.readRows(ctx, b.db, sqlSelectEvents, "s")
	if err != nil {
		t.Fatal(err)
	}
	var ends, packed []int64
	for _, r := range rows {
		if r.typ == "turn/end" {
			ends = append(ends, r.seq)
		}
		if r.packed() {
			packed = append(packed, r.seq)
		}
	}
	if len(ends) < 3 || len(packed) < 3 || len(rows) < 50 {
		t.Fatalf("%d rows, %d turn/ends, %d packed: the test exercises too little", len(rows), len(ends), len(packed))
	}
	bad := func(seq int64, data string) string {
		return fmt.Sprintf(`UPDATE events SET data = '%s' WHERE session_id = 's' AND seq = %d`, data, seq)
	}
	variants := []struct {
		name string
		sql  []string
	}{
		{"intact", nil},
		{"bad packed row before the last turn/end", []string{bad(packed[len(packed)/2], `{"turn":1}`)}},
		{"bad row after the last turn/end", []string{bad(n+1, `{"turn":1}`)}},
		{"bad last turn/end", []string{bad(ends[len(ends)-1], `nope`), bad(n, `nope`)}},
		// a row that fails validation fails the read even after a committed row that does not decode
		{"invalid row after a bad committed row", []string{bad(packed[len(packed)/2], `{"turn":1}`),
			fmt.Sprintf(`UPDATE events SET data = 42 WHERE session_id = 's' AND seq = %d`, n+4)}},
	}
	kinds := map[string]bool{}
	for _, v := range variants {
		b, path := setup(t)
		if len(v.sql) > 0 {
			rawExec(t, path, v.sql...)
		}
		all, wantErr := b.readRows(ctx, b.db, sqlSelectEvents, "s")
		var want scanned
		if wantErr == nil {
			want, wantErr = scanRows(all, 0, false, eventstore.Tuning{})
		}
		var wantTorn int64
		for i := range want.tornRows {
			wantTorn += want.tornRows[i].size()
		}
		switch {
		case wantErr != nil && strings.HasPrefix(wantErr.Error(), "stored "): // a fieldError
			kinds["invalid"] = true
		case wantErr != nil:
			kinds["refused"] = true
		case want.tornFrom >= 0:
			kinds["torn"] = true
		default:
			kinds["intact"] = true
		}
		for _, block := range []int{1, 2, 7, 4096} {
			loadBlock = block
			got, err := b.LoadStored(ctx, "s")
			where := fmt.Sprintf("%s, blocks of %d", v.name, block)
			if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
				t.Fatalf("%s: error %v, want %v", where, err, wantErr)
			}
			// the progressive load returns the same, and reports prefixes of it on the way
			rec := &storetest.ProgressRecorder{}
			pgot, perr := b.LoadStoredProgress(ctx, "s", rec)
			if fmt.Sprint(perr) != fmt.Sprint(err) || err == nil && len(pgot.Events) != len(got.Events) {
				t.Fatalf("%s: LoadStoredProgress gives %v, LoadStored %v", where, perr, err)
			}
			rec.Check(t, where, pgot)
			if block == 7 && len(rec.Reports) < 10 {
				t.Fatalf("%s: %d reports", where, len(rec.Reports))
			}
			if err != nil {
				continue
			}
			if len(got.Events) != len(want.events) || fmt.Sprint(got.RowMembers) != fmt.Sprint(want.rowMembers) {
				t.Fatalf("%s: %d events, members %v; want %d, %v", where, len(got.Events), got.RowMembers, len(want.events), want.rowMembers)
			}
			for i := range got.Events {
				if string(got.Events[i].Raw) != string(want.events[i].Raw) {
					t.Fatalf("%s: event %d %s, want %s", where, i, got.Events[i].Raw, want.events[i].Raw)
				}
			}
			switch {
			case want.tornFrom < 0 && got.Torn != nil:
				t.Fatalf("%s: torn %+v, want none", where, got.Torn)
			case want.tornFrom >= 0 && (got.Torn == nil || got.Torn.Seq != want.tornFrom || got.Torn.Bytes != wantTorn):
				t.Fatalf("%s: torn %+v, want from %d, %d bytes", where, got.Torn, want.tornFrom, wantTorn)
			}
		}
	}
	if len(kinds) != 4 {
		t.Fatalf("outcomes %v: the variants must fail validation, refuse, tear and load", kinds)
	}
}
