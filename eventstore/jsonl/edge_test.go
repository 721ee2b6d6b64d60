package jsonl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/storetest"
	"github.com/dshfs/dshfs/internal/eventtest"
)

const testCwd = "/home/dev/proj"

// headerLine is a valid version-0 header for id under testCwd.
func headerLine(id string) string {
	return fmt.Sprintf(`{"type":"session","version":0,"id":%s,"createdAt":1000,"cwd":"%s","delegationDepth":0}`, jsonString(id), testCwd)
}

// turn returns the lines of one complete turn n starting at seq, with a user message.
func turn(n, seq int) []string {
	return []string{
		fmt.Sprintf(`{"type":"turn/start","seq":%d,"time":1,"data":{"turn":%d}}`, seq, n),
		fmt.Sprintf(`{"type":"user/message","seq":%d,"time":1,"data":{"id":"u%d","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}`, seq+1, n),
		fmt.Sprintf(`{"type":"turn/end","seq":%d,"time":1,"data":{"turn":%d,"reason":{"kind":"completed"}}}`, seq+2, n),
	}
}

// writeRawSession writes a raw transcript at the harness's path for (testCwd, id) and returns that path.
func writeRawSession(t *testing.T, root, id, content string) string {
	t.Helper()
	b, err := Open(root, None)
	if err != nil {
		t.Fatal(err)
	}
	cwd := event.String(testCwd)
	path, err := b.Locate(event.Header{ID: id, Cwd: &cwd})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func lines(ls ...[]string) string {
	var all []string
	for _, l := range ls {
		all = append(all, l...)
	}
	return strings.Join(all, "\n") + "\n"
}

func rawStore(t *testing.T, root string) *eventstore.Store {
	b, err := Open(root, None)
	if err != nil {
		t.Fatal(err)
	}
	return eventstore.New(b)
}

func TestRawTornAndCorruption(t *testing.T) {
	ctx := context.Background()
	bad := `{"type":"user/message","seq":3,` // unparsable complete line
	cases := []struct {
		name       string
		content    string
		wantErr    string // "" = loads
		wantEvents int
		wantTorn   bool
	}{
		{"clean", lines([]string{headerLine("s")}, turn(1, 0)), "", 3, false},
		{"torn final line", lines([]string{headerLine("s")}, turn(1, 0)) + `{"type":"turn/start","seq":3,"ti`, "", 3, true},
		{"torn line that would parse", lines([]string{headerLine("s")}, turn(1, 0)) + `{"type":"turn/start","seq":3,"time":1,"data":{"turn":2}}`, "", 3, true},
		{"corrupt line after the last turn/end is a tail", lines([]string{headerLine("s")}, turn(1, 0), []string{bad}), "", 3, true},
		{"corrupt line before a later turn/end", lines([]string{headerLine("s")}, turn(1, 0), []string{bad}, turn(2, 4)),
			"corrupt session log: unparsable committed event at line 4", 0, false},
		{"seq gap before a later turn/end", lines([]string{headerLine("s")}, turn(1, 0), turn(2, 4)),
			"corrupt session log: seq gap in committed region at line 4 (expected 3, got 4)", 0, false},
		{"seq gap on a turn/end line", lines([]string{headerLine("s")}, turn(1, 0), []string{`{"type":"turn/end","seq":9,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}`}),
			"corrupt session log: seq gap in committed region at line 4 (expected 3, got 9)", 0, false},
		{"seq gap after the last turn/end is a tail", lines([]string{headerLine("s")}, turn(1, 0), []string{`{"type":"turn/start","seq":7,"time":1,"data":{"turn":2}}`}), "", 3, true},
		{"empty line is unparsable", lines([]string{headerLine("s")}, turn(1, 0), []string{""}, turn(2, 3)),
			"corrupt session log: unparsable committed event at line 4", 0, false},
		{"header only", headerLine("s") + "\n", "", 0, false},
		{"empty file", "", "empty or header-less session log", 0, false},
		{"header without LF", headerLine("s"), "empty or header-less session log", 0, false},
		{"header not JSON", "{nope\n", "corrupt session log: header line is not valid JSON", 0, false},
		{"BOM before header", "\ufeff" + headerLine("s") + "\n", "corrupt session log: header line is not valid JSON", 0, false},
		{"scalar header", "42\n", "corrupt session log: first line is not a session header", 0, false},
		{"malformed packed row before turn/end", lines([]string{headerLine("s")}, turn(1, 0),
			[]string{`{"type":"text-chunks","seq0":3,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":[]}}`}, turn(2, 3)),
			"corrupt session log: unparsable committed event at line 4", 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			writeRawSession(t, root, "s", c.content)
			p, err := rawStore(t, root).ReadFrom(ctx, "s", 0)
			if c.wantErr != "" {
				if err == nil || err.Error() != c.wantErr {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Events) != c.wantEvents || (p.Torn != nil) != c.wantTorn {
				t.Fatalf("events %d torn %+v, want %d torn=%v", len(p.Events), p.Torn, c.wantEvents, c.wantTorn)
			}
		})
	}
}

func TestHeaderRefusals(t *testing.T) {
	ctx := context.Background()
	cases := []struct{ name, header, want string }{
		{"version 1", `{"type":"session","version":1,"id":"s","createdAt":1000,"cwd":"/home/dev/proj","delegationDepth":0}`,
			`session "s" uses log format v1, but this harness reads only v0: the log was written by a newer harness — upgrade the harness to open it (raw log: PATH)`},
		{"version -1", `{"type":"session","version":-1,"id":"s","createdAt":1000,"cwd":"/home/dev/proj","delegationDepth":0}`,
			`session "s" uses log format v-1, older than the supported v0, and this build ships no upgrade path for it (raw log: PATH)`},
		{"foreign version before shape checks", `{"type":"other","version":7,"id":"s"}`,
			`session "s" uses log format v7, but this harness reads only v0: the log was written by a newer harness — upgrade the harness to open it (raw log: PATH)`},
		{"delegationDepth missing", `{"type":"session","version":0,"id":"s","createdAt":1000,"cwd":"/home/dev/proj"}`,
			"corrupt session log: first line is not a session header"},
		{"delegationDepth -0", `{"type":"session","version":0,"id":"s","createdAt":1000,"cwd":"/home/dev/proj","delegationDepth":-0}`,
			"corrupt session log: first line is not a session header"},
		{"createdAt unsafe", `{"type":"session","version":0,"id":"s","createdAt":9007199254740992,"cwd":"/home/dev/proj","delegationDepth":0}`,
			"corrupt session log: first line is not a session header"},
		{"createdAt -0", `{"type":"session","version":0,"id":"s","createdAt":-0,"cwd":"/home/dev/proj","delegationDepth":0}`,
			"corrupt session log: first line is not a session header"},
		{"origin other", `{"type":"session","version":0,"id":"s","createdAt":1000,"cwd":"/home/dev/proj","origin":"user","delegationDepth":0}`,
			"corrupt session log: first line is not a session header"},
		{"retired sandboxMode", `{"type":"session","version":0,"id":"s","createdAt":1000,"cwd":"/home/dev/proj","delegationDepth":0,"sandboxMode":"x"}`,
			"session header uses retired policy baseline fields"},
		{"retired approvalPolicy", `{"type":"session","version":0,"id":"s","createdAt":1000,"cwd":"/home/dev/proj","delegationDepth":0,"approvalPolicy":"x"}`,
			"session header uses retired policy baseline fields"},
		{"id mismatch with path", `{"type":"session","version":0,"id":"other","createdAt":1000,"cwd":"/home/dev/proj","delegationDepth":0}`,
			`corrupt session log "PATH": requested id "s" does not match header id "other"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			path := writeRawSession(t, root, "s", c.header+"\n")
			want := strings.ReplaceAll(c.want, "PATH", path)
			_, err := rawStore(t, root).Inspect(ctx, "s")
			if err == nil || err.Error() != want {
				t.Fatalf("error %v\nwant %s", err, want)
			}
			l, lerr := rawStore(t, root).List(ctx)
			if lerr != nil || len(l.Entries) != 1 || l.Entries[0].Refusal == nil || l.Entries[0].Refusal.Error() != want {
				t.Fatalf("listing: %+v %v", l, lerr)
			}
		})
	}
	t.Run("restore-time cwd rule", func(t *testing.T) {
		root := t.TempDir()
		dir := filepath.Join(root, "--rel--", "s")
		os.MkdirAll(dir, 0o700)
		os.WriteFile(filepath.Join(dir, "session.jsonl"), []byte(`{"type":"session","version":0,"id":"s","createdAt":1000,"cwd":"rel","delegationDepth":0}`+"\n"), 0o600)
		_, err := rawStore(t, root).Inspect(ctx, "s")
		want := `stored session "s" failed validation: Error: session header cwd must be an absolute path, got "rel"`
		if err == nil || err.Error() != want {
			t.Fatalf("error %v, want %s", err, want)
		}
		var ce *eventstore.CorruptionError
		if !errors.As(err, &ce) {
			t.Fatalf("not a corruption error: %T", err)
		}
	})
}

func TestUnknownTypes(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	path := writeRawSession(t, root, "s", lines([]string{headerLine("s")}, turn(1, 0),
		[]string{`{"type":"plugin/new","seq":3,"time":1,"data":null,"ignorable":true}`}))
	ins, err := rawStore(t, root).Inspect(ctx, "s")
	if err != nil || len(ins.Events) != 4 || ins.Events[3].Type != "plugin/new" {
		t.Fatalf("ignorable unknown type not kept: %v", err)
	}
	os.WriteFile(path, []byte(lines([]string{headerLine("s")}, turn(1, 0),
		[]string{`{"type":"plugin/new","seq":3,"time":1,"data":null}`})), 0o600)
	_, err = rawStore(t, root).Inspect(ctx, "s")
	want := `session "s" contains event type "plugin/new" (seq 3) unknown to this harness and not marked ignorable; refusing to interpret the log — it was likely written by a newer harness (raw log: ` + path + `)`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
	if eventstore.Classify(err) != eventstore.KindUnsupported {
		t.Fatalf("kind %s", eventstore.Classify(err))
	}
}

func TestRootErrorsDoNotHideSessions(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	writeRawSession(t, root, "good", lines([]string{headerLine("good")}, turn(1, 0)))
	writeRawSession(t, root, "other", lines([]string{headerLine("other")}, turn(1, 0)))
	// a zstd artifact in a raw root, and a flat-layout file in a project dir
	cwd := event.String(testCwd)
	zb, _ := Open(root, Zstd)
	zpath, _ := zb.Locate(event.Header{ID: "zz", Cwd: &cwd})
	os.MkdirAll(filepath.Dir(zpath), 0o700)
	os.WriteFile(zpath, []byte("x"), 0o600)
	flat := filepath.Join(filepath.Dir(filepath.Dir(zpath)), "flat.jsonl")
	os.WriteFile(flat, []byte(headerLine("flat")+"\n"), 0o600)

	l, err := rawStore(t, root).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// the artifact in the other encoding is a refusal of its own session, listed beside the others
	if len(l.Entries) != 3 || l.Entries[0].Refusal != nil || l.Entries[1].Refusal != nil {
		t.Fatalf("entries: %+v", l.Entries)
	}
	mismatch := "session artifact " + jsonString(zpath) + ` uses .jsonl.zstd, but this backend is configured for compression "none"; use a separate root or select the matching compression mode`
	if z := l.Entries[2]; z.ID != "zz" || z.Path != zpath || z.Refusal == nil || z.Refusal.Error() != mismatch {
		t.Fatalf("mismatched session: %+v", z)
	}
	want := "session artifact " + jsonString(flat) + " uses the unsupported flat-file layout; use a separate root or move it into a project/session directory before loading"
	if len(l.RootErrors) != 1 || l.RootErrors[0].Path != flat || l.RootErrors[0].Message != want {
		t.Fatalf("root errors: %+v", l.RootErrors)
	}
}

// zstdSession creates an empty zstd session id under testCwd in a fresh store, and returns its backend,
// store and header.
func zstdSession(t *testing.T, id string) (*Backend, *eventstore.Store, event.Header) {
	t.Helper()
	b, err := Open(t.TempDir(), Zstd)
	if err != nil {
		t.Fatal(err)
	}
	st := eventstore.New(b)
	cwd := event.String(testCwd)
	h := event.Header{ID: id, CreatedAt: 1000, Cwd: &cwd}
	if err := st.Create(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	return b, st, h
}

func TestZstdTornMultiBlockFrame(t *testing.T) {
	ctx := context.Background()
	b, st, h := zstdSession(t, "big")
	first := eventtest.Events(t, turn(1, 0)...)
	if err := st.Append(ctx, "big", first); err != nil {
		t.Fatal(err)
	}
	// one batch of ~300 KiB plaintext: at least three 128 KiB blocks in one frame
	var batch []event.Event
	seed := uint32(7)
	for i := 0; i < 150; i++ {
		var sb strings.Builder
		for j := 0; j < 2000; j++ {
			seed = seed*1664525 + 1013904223
			sb.WriteByte(byte('a' + seed>>27))
		}
		batch = append(batch, eventtest.Events(t, fmt.Sprintf(`{"type":"feedback/record","seq":%d,"time":1,"data":{"text":"%s"}}`, 3+i, sb.String()))...)
	}
	if err := st.Append(ctx, "big", batch); err != nil {
		t.Fatal(err)
	}
	st.Close(ctx) // release the writer lock: the load below is another writer
	path, _ := b.Locate(h)
	buf, _ := os.ReadFile(path)
	frames, _, err := ScanFrames(buf, 0)
	if err != nil || len(frames) != 3 {
		t.Fatalf("frames %v %v", frames, err)
	}
	// cut inside the last block of the big frame: complete earlier blocks must be recovered
	cut := frames[2].End - 100
	os.WriteFile(path, buf[:cut], 0o600)
	p, err := eventstore.New(b).ReadFrom(ctx, "big", 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Torn == nil || p.Torn.TruncateTo != frames[2].Start || p.Torn.Recovered == 0 || len(p.Events) != 3+p.Torn.Recovered || p.Torn.Recovered >= 150 {
		t.Fatalf("torn %+v events %d", p.Torn, len(p.Events))
	}
	// a load commits the repair: recovered events are re-appended as one frame, the cut bytes kept aside
	ins, err := eventstore.New(b).Load(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if len(ins.Events) != 3+p.Torn.Recovered || ins.Prefix.Torn != nil {
		t.Fatalf("after load: %d events, torn %+v", len(ins.Events), ins.Prefix.Torn)
	}
	side, _ := filepath.Glob(path + ".torn-*")
	if len(side) != 1 {
		t.Fatalf("torn sidecar: %v", side)
	}
	if kept, _ := os.ReadFile(side[0]); string(kept) != string(buf[frames[2].Start:cut]) {
		t.Fatal("sidecar does not hold the cut bytes")
	}
}

func TestZstdChecksumCorruption(t *testing.T) {
	ctx := context.Background()
	b, st, h := zstdSession(t, "c")
	st.Append(ctx, "c", eventtest.Events(t, turn(1, 0)...))
	st.Append(ctx, "c", eventtest.Events(t, turn(2, 3)...))
	path, _ := b.Locate(h)
	buf, _ := os.ReadFile(path)
	frames, _, _ := ScanFrames(buf, 0)
	buf[frames[1].End-1] ^= 0xff // the second frame's checksum
	os.WriteFile(path, buf, 0o600)
	_, err := eventstore.New(b).ReadFrom(ctx, "c", 0)
	want := fmt.Sprintf("corrupt Zstandard session log: frame at byte %d failed validation", frames[1].Start)
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
}

func TestAwkwardIdsAndCwds(t *testing.T) {
	ctx := context.Background()
	ids := []string{"a/b", "..", ".", "with space", "ünï", "😀astral", "a~b", "x\\y:z"}
	cwds := []string{"/", "/a b/c", "/开发/~agent", "/a/b-c", "/😀/x/"}
	for _, mode := range []Compression{None, Zstd} {
		root := t.TempDir()
		b, _ := Open(root, mode)
		st := eventstore.New(b)
		for i, id := range ids {
			cwd := event.String(cwds[i%len(cwds)])
			h := event.Header{ID: id, CreatedAt: int64(1000 + i), Cwd: &cwd}
			if err := st.Create(ctx, h); err != nil {
				t.Fatal(err)
			}
			if err := st.Append(ctx, id, eventtest.Events(t, turn(1, 0)...)); err != nil {
				t.Fatal(err)
			}
		}
		l, err := st.List(ctx)
		if err != nil || len(l.RootErrors) != 0 || len(l.Entries) != len(ids) {
			t.Fatalf("%s list: %+v %v", mode, l, err)
		}
		for _, e := range l.Entries {
			if e.Refusal != nil {
				t.Fatalf("%s: %q refused: %v", mode, e.ID, e.Refusal)
			}
			ins, err := st.Inspect(ctx, e.ID)
			if err != nil || len(ins.Events) != 3 {
				t.Fatalf("%s: %q: %v", mode, e.ID, err)
			}
		}
	}
}

// TestZstdPiecesMatchFrameByFrame: decoding a zstd artifact's frames in pieces of many frames (as loads do)
// gives what decoding them one at a time gives — the same events, torn tail and error — on intact, corrupt
// and oddly framed artifacts, whether the artifact is read onto the heap or into an offHeap mapping that
// hands its pages back as the decode passes them (and goes before the events are read here).
func TestZstdPiecesMatchFrameByFrame(t *testing.T) {
	ctx := context.Background()
	b, st, h := zstdSession(t, "p")
	for n := 1; n <= 40; n++ {
		if err := st.Append(ctx, "p", eventtest.Events(t, turn(n, 3*(n-1))...)); err != nil {
			t.Fatal(err)
		}
	}
	path, _ := b.Locate(h)
	good, _ := os.ReadFile(path)
	frames, _, _ := ScanFrames(good, 0)
	if len(frames) < 40 {
		t.Fatalf("%d frames", len(frames))
	}
	plain, err := RawText(good)
	if err != nil {
		t.Fatal(err)
	}
	header := bytes.IndexByte(plain, '\n') + 1
	variant := func(f func([]byte) []byte) []byte { return f(bytes.Clone(good)) }
	cases := map[string][]byte{
		"intact":           good,
		"checksum corrupt": variant(func(b []byte) []byte { b[frames[20].End-1] ^= 0xff; return b }),
		"torn last frame":  good[:frames[len(frames)-1].End-3],
		// the same text re-framed with frame boundaries inside lines
		"frames cut lines": func() []byte {
			out := EncodeFrame(nil, plain[:header])
			for rest := plain[header:]; len(rest) > 0; {
				n := min(len(rest), 97)
				out = EncodeFrame(out, rest[:n])
				rest = rest[n:]
			}
			return out
		}(),
		// an unparsable line, then a corrupt frame
		"bad line then corrupt frame": func() []byte {
			out := EncodeFrame(nil, plain[:header])
			for i, line := range bytes.SplitAfter(plain[header:], []byte("\n")) {
				if len(line) == 0 {
					continue
				}
				if i == 30 {
					line = []byte("{not json\n")
				}
				out = EncodeFrame(out, line)
			}
			fs, _, _ := ScanFrames(out, 0)
			out[fs[60].End-1] ^= 0xff
			return out
		}(),
	}
	defer func(old int64) { zstdPieceBytes = old }(zstdPieceBytes)
	defer func(old int64) { offHeapMin = old }(offHeapMin)
	defer func(old int64) { artifactPoolMax = old }(artifactPoolMax)
	defer func(old bool) { poisonPooled = old }(poisonPooled)
	poisonPooled = true // a pooled buffer is overwritten when the load gives it back
	for name, artifact := range cases {
		if err := os.WriteFile(path, artifact, 0o600); err != nil {
			t.Fatal(err)
		}
		var want string
		// each piece size read from the heap, then from an offHeap mapping whose pages go as they are
		// passed, then from a pooled buffer
		for k, piece := range []int64{1, 300, 1 << 40, 1, 300, 1 << 40, 1, 300, 1 << 40} {
			zstdPieceBytes, offHeapMin, artifactPoolMax = piece, 1<<62, 0
			switch {
			case k >= 6:
				artifactPoolMax = 1 << 40
			case k >= 3:
				offHeapMin = 0
			}
			p, err := b.LoadStored(ctx, "p")
			got := fmt.Sprint(err)
			if p != nil {
				var raw []string
				for _, e := range p.Events {
					raw = append(raw, string(e.Raw))
				}
				got += fmt.Sprintf(" %d events %q torn %+v", len(p.Events), strings.Join(raw, "\n"), p.Torn)
			}
			rec := &storetest.ProgressRecorder{}
			pp, perr := b.LoadStoredProgress(ctx, "p", rec)
			if fmt.Sprint(perr) != fmt.Sprint(err) || (pp == nil) != (p == nil) {
				t.Fatalf("%s, pieces of %d bytes: LoadStoredProgress gives %v, LoadStored %v", name, piece, perr, err)
			}
			rec.Check(t, fmt.Sprintf("%s, pieces of %d bytes", name, piece), pp)
			if k == 0 {
				want = got
				if name == "intact" && (err != nil || len(p.Events) != 120) {
					t.Fatalf("intact: %s", got)
				}
				continue
			}
			if got != want {
				t.Errorf("%s: pieces of %d bytes (mapped: %v, pooled: %v) give\n%s\nframe by frame\n%s", name, piece, k >= 3 && k < 6, k >= 6, got, want)
			}
		}
	}
}
