package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/eventtest"
)

// spillRowKeys is one spill/index.json row, in order (docs/tree.md, spill.IndexJSON).
var spillRowKeys = []string{"row", "callId", "seq", "locator", "status", "bytes", "shadowed", "file"}

// spillRow is one decoded spill/index.json row.
type spillRow struct {
	Row     int     `json:"row"`
	CallID  string  `json:"callId"`
	Seq     int64   `json:"seq"`
	Locator string  `json:"locator"`
	Status  string  `json:"status"`
	Bytes   *int64  `json:"bytes"`
	File    *string `json:"file"`
}

// spillNotice is the harness's spill notice after a preview, exactly as internal/demo writes it.
func spillNotice(preview string, omitted int, path string) string {
	return fmt.Sprintf("%s\n\n(Omitted %d bytes. Full formatted result stored at: %s. Use read with offset/limit, or grep this path to search within it.)", preview, omitted, path)
}

// spillDirs is a fresh base directory with a store root (not created: the first session creates it) and a
// spill root (created) in it.
func spillDirs(t *testing.T) (base, root, spillRoot string) {
	t.Helper()
	base = t.TempDir()
	root, spillRoot = filepath.Join(base, "sessions"), filepath.Join(base, "spill")
	if err := os.MkdirAll(spillRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	return base, root, spillRoot
}

// writeSpillSession writes session id into a raw root: one complete turn per tool result text, call ids
// call-1, call-2, ...
func writeSpillSession(t *testing.T, root, id string, results []string) {
	t.Helper()
	ctx := context.Background()
	b, err := jsonl.Open(root, jsonl.None)
	if err != nil {
		t.Fatal(err)
	}
	st := eventstore.New(b)
	defer st.Close(ctx) // release the writer lock: mounts in other processes write this session
	cwd := event.String("/home/dev/spill-project")
	if err := st.Create(ctx, event.Header{ID: id, CreatedAt: 1778573701000, Cwd: &cwd}); err != nil {
		t.Fatal(err)
	}
	quote := func(s string) string {
		j, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		return string(j)
	}
	seq := 0
	for i, text := range results {
		turn, call := i+1, fmt.Sprintf("call-%d", i+1)
		ts := 1778573701000 + int64(seq)*100
		l := func(typ, data string, extra string) string {
			s := fmt.Sprintf(`{"type":%q,"seq":%d,"time":%d,"data":%s%s}`, typ, seq, ts, data, extra)
			seq++
			return s
		}
		args := quote(`{"command":"make all"}`)
		var batch []string
		batch = append(batch,
			l("turn/start", fmt.Sprintf(`{"turn":%d}`, turn), ""),
			l("step/start", fmt.Sprintf(`{"turn":%d,"step":1}`, turn), ""),
			l("user/message", fmt.Sprintf(`{"id":"u%d","role":"user","content":[{"type":"text","text":"build it"}],"source":{"kind":"user"}}`, turn), `,"surfaceOp":"append"`),
			l("assistant/message", fmt.Sprintf(`{"turn":%d,"step":1,"message":{"id":"a%d","role":"assistant","content":[{"type":"tool-call","id":%q,"name":"bash","arguments":%s}],"source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-flash"}}}`, turn, turn, call, args), `,"sourceEventSeqs":[],"surfaceOp":"append"`))
		callSeq := seq
		batch = append(batch,
			l("tool/call", fmt.Sprintf(`{"turn":%d,"step":1,"callId":%q,"name":"bash","arguments":%s}`, turn, call, args), ""),
			l("tool/result", fmt.Sprintf(`{"turn":%d,"step":1,"message":{"id":"t%d","role":"user","content":[{"type":"tool-result","toolCallId":%q,"content":[{"type":"text","text":%s}],"isError":false}],"source":{"kind":"tool","callId":%q}}}`, turn, turn, call, quote(text), call), fmt.Sprintf(`,"sourceEventSeqs":[%d],"surfaceOp":"append"`, callSeq)),
			l("step/end", fmt.Sprintf(`{"turn":%d,"step":1}`, turn), ""),
			l("turn/end", fmt.Sprintf(`{"turn":%d,"reason":{"kind":"completed"}}`, turn), ""))
		if err := st.Append(ctx, id, eventtest.Events(t, batch...)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMountSpill serves spill files cited by tool results: present files under a configured root, rows
// that turn missing when the file goes, and targets outside the roots (a FIFO, a symlink escaping the root)
// that are listed but never opened.
func TestMountSpill(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "sessions")
	spillRoot := filepath.Join(base, "spill")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(spillRoot, "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var content strings.Builder
	for i := 1; i <= 300; i++ {
		fmt.Fprintf(&content, "step %03d: compiling pkg/module%03d ... ok\n", i, i)
	}
	present := filepath.Join(spillRoot, "present.txt")
	gone := filepath.Join(spillRoot, "sub", "gone.txt")
	never := filepath.Join(spillRoot, "never.txt")
	fifo := filepath.Join(outside, "fifo")
	secret := filepath.Join(outside, "secret.txt")
	escape := filepath.Join(spillRoot, "escape.txt")
	for p, data := range map[string]string{present: content.String(), gone: "gone soon\n", secret: "not yours\n"} {
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustRun(t, "mkfifo", fifo)
	if err := os.Symlink(secret, escape); err != nil {
		t.Fatal(err)
	}
	locators := []string{present, gone, never, fifo, escape}
	var results []string
	for _, p := range locators {
		results = append(results, spillNotice("step 001: compiling pkg/module001 ... ok", content.Len(), p))
	}
	const id = "spilled"
	writeSpillSession(t, root, id, results)
	cfg := filepath.Join(base, "dshfs.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("[spill]\nroots = [%q]\n", spillRoot)), 0o644); err != nil {
		t.Fatal(err)
	}

	m := startMount(t, "--config", cfg, root)
	dir := filepath.Join(m.dir, "sessions", id, "spill")
	index := func() ([]byte, []spillRow) {
		b := mustRun(t, "cat", filepath.Join(dir, "index.json"))
		var rows []spillRow
		if err := json.Unmarshal(b, &rows); err != nil {
			t.Fatalf("index.json %q: %v", b, err)
		}
		return b, rows
	}
	statuses := func(rows []spillRow) string {
		var s []string
		for _, r := range rows {
			s = append(s, r.Status)
		}
		return strings.Join(s, " ")
	}

	raw, rows := index()
	if want := cli(t, 0, "cat", "--view", "spill", "--config", cfg, root, id); !bytes.Equal(raw, want) {
		t.Errorf("spill/index.json differs from the CLI:\n%s\n%s", raw, want)
	}
	if got := statuses(rows); got != "present present missing outside-roots outside-roots" {
		t.Fatalf("index statuses %q; index.json:\n%s", got, raw)
	}
	var objs []json.RawMessage
	if err := json.Unmarshal(raw, &objs); err != nil {
		t.Fatal(err)
	}
	for i, o := range objs {
		checkKeys(t, fmt.Sprintf("index.json row %d", i), append(o, '\n'), spillRowKeys)
	}
	for i, r := range rows {
		wantFile := r.Status == "present"
		if r.Row != i || r.CallID != fmt.Sprintf("call-%d", i+1) || r.Locator != locators[i] || (r.File != nil) != wantFile || (r.Bytes != nil) != wantFile {
			t.Errorf("row %d: %+v", i, r)
		}
		if wantFile && *r.File != fmt.Sprintf("spill/%010d-call-%d", i, i+1) {
			t.Errorf("row %d file %q", i, *r.File)
		}
	}
	if *rows[0].Bytes != int64(content.Len()) {
		t.Errorf("row 0 bytes %d, file has %d", *rows[0].Bytes, content.Len())
	}

	if got := string(mustRun(t, "ls", dir)); got != "0000000000-call-1\n0000000001-call-2\nindex.json\n" {
		t.Errorf("ls spill:\n%s", got)
	}
	served := filepath.Join(dir, "0000000000-call-1")
	if got := mustRun(t, "cat", served); string(got) != content.String() {
		t.Errorf("spill file content differs (%d bytes, want %d)", len(got), content.Len())
	}
	if got := strings.TrimSpace(string(mustRun(t, "stat", "-c", "%s", served))); got != fmt.Sprint(content.Len()) {
		t.Errorf("stat size %s, file has %d bytes", got, content.Len())
	}

	// a deleted target turns missing and its file goes away
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "row 1 to turn missing and its file to disappear", func() (bool, string) {
		raw, rows := index()
		ls := string(mustRun(t, "ls", dir))
		return statuses(rows) == "present missing missing outside-roots outside-roots" &&
			ls == "0000000000-call-1\nindex.json\n", string(raw) + ls
	})
	if r := run(t, "", "cat", filepath.Join(dir, "0000000001-call-2")); r.code == 0 || !strings.Contains(string(r.stderr), "No such file or directory") {
		t.Errorf("cat of the deleted spill file: exit %d, stderr %q", r.code, r.stderr)
	}
	raw, _ = index()
	if want := cli(t, 0, "cat", "--view", "spill", "--config", cfg, root, id); !bytes.Equal(raw, want) {
		t.Errorf("after the delete, spill/index.json differs from the CLI:\n%s\n%s", raw, want)
	}

	// nothing outside the roots is served: not the escaping symlink's target, not the FIFO
	for _, name := range []string{"0000000003-call-4", "0000000004-call-5"} {
		if r := run(t, "", "cat", filepath.Join(dir, name)); r.code == 0 {
			t.Errorf("%s is served: %q", name, r.stdout)
		}
	}
	// the FIFO was never opened: no reader holds it (a non-blocking writer open fails with ENXIO), and the
	// mount still answers
	if fd, err := syscall.Open(fifo, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		syscall.Close(fd)
		t.Errorf("the FIFO outside the spill roots has a reader: dshfs opened it")
	} else if !errors.Is(err, syscall.ENXIO) {
		t.Errorf("open FIFO for writing: %v, want ENXIO", err)
	}
	mustRun(t, "cat", filepath.Join(m.dir, "README"))
}
