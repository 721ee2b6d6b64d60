package jsonl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/klauspost/compress/zstd"
)

// oneFrame compresses n bytes of text (text repeated) as a single zstd frame, streamed: the plaintext is
// never whole in memory, so a test can make a frame of hundreds of megabytes cheaply.
func oneFrame(t testing.TB, text []byte, n int) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := zstd.NewWriter(&out, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithEncoderCRC(true),
		zstd.WithWindowSize(1<<20), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	for n > 0 {
		k := min(n, len(text))
		if _, err := w.Write(text[:k]); err != nil {
			t.Fatal(err)
		}
		n -= k
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// writeZstdSession writes a zstd transcript at the harness's path for (testCwd, id).
func writeZstdSession(t *testing.T, root, id string, content []byte) {
	t.Helper()
	b, err := Open(root, Zstd)
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
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
}

// allocated runs fn and returns how many heap bytes it allocated in all (freed or not): a decode that
// holds a frame whole allocates at least the frame, whenever the collector runs.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestZstdEmptyLineBomb: a few kilobytes of zstd holding 200 MiB of empty lines in one frame (each under
// max_frame_bytes, so that guard never fires) are refused without ever holding the frame's text: the
// load, check's path and raw.jsonl's allocate a small fraction of it.
func TestZstdEmptyLineBomb(t *testing.T) {
	root := t.TempDir()
	const size = 200 << 20
	bomb := append(EncodeFrame(nil, []byte(headerLine("nl-200")+"\n")), oneFrame(t, newlineBlock, size)...)
	if len(bomb) > 64<<10 {
		t.Fatalf("the bomb is %d bytes: not a bomb", len(bomb))
	}
	writeZstdSession(t, root, "nl-200", bomb)
	b, err := Open(root, Zstd)
	if err != nil {
		t.Fatal(err)
	}
	st := eventstore.New(b)
	var lerr error
	if n := allocated(func() { _, lerr = st.Inspect(context.Background(), "nl-200") }); n > 48<<20 {
		t.Errorf("loading the bomb allocated %d MiB", n>>20)
	}
	if lerr == nil || !errors.Is(lerr, errZstdTornRecord) {
		t.Fatalf("load: %v, want %v", lerr, errZstdTornRecord)
	}
	var c counter
	if n := allocated(func() { lerr = st.WriteRaw(context.Background(), "nl-200", &c) }); n > 48<<20 {
		t.Errorf("raw.jsonl of the bomb allocated %d MiB", n>>20)
	}
	if lerr != nil || c.n != int64(len(headerLine("nl-200"))+1+size) || c.nonLF != int64(len(headerLine("nl-200"))) {
		t.Fatalf("raw: %v, %d bytes (%d not LF)", lerr, c.n, c.nonLF)
	}
}

// counter counts what is written to it.
type counter struct{ n, nonLF int64 }

func (c *counter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	c.nonLF += int64(len(p) - bytes.Count(p, []byte{'\n'}))
	return len(p), nil
}

// TestStreamedFrameEvents: a large frame (decoded a megabyte at a time) yields exactly the events that the
// same text in small frames does, with lines cut across the pieces and a failure run spanning a seam.
func TestStreamedFrameEvents(t *testing.T) {
	var text []byte
	seq := 0
	for n := 1; len(text) < 24<<20; n++ {
		for _, l := range turn(n, seq) {
			text = append(text, l...)
			text = append(text, '\n')
		}
		seq += 3
		// a long line now and then so that lines straddle the 1 MiB pieces at varied offsets
		if n%997 == 0 {
			text = append(text, fmt.Sprintf(`{"type":"turn/start","seq":%d,"time":1,"data":{"turn":%d,"pad":"%s"}}`+"\n", seq, n+1, strings.Repeat("x", 70000+n))...)
			text = append(text, fmt.Sprintf(`{"type":"turn/end","seq":%d,"time":1,"data":{"turn":%d,"reason":{"kind":"completed"}}}`+"\n", seq+1, n+1)...)
			seq += 2
			n++
		}
	}
	header := EncodeFrame(nil, []byte(headerLine("big")+"\n"))
	big := append(bytes.Clone(header), oneFrame(t, text, len(text))...)
	var small []byte = bytes.Clone(header)
	for rest := text; len(rest) > 0; {
		cut := bytes.IndexByte(rest[min(len(rest)-1, 100<<10):], '\n') + min(len(rest)-1, 100<<10) + 1
		small = EncodeFrame(small, rest[:cut])
		rest = rest[cut:]
	}
	load := func(content []byte) *eventstore.Prefix {
		root := t.TempDir()
		writeZstdSession(t, root, "big", content)
		b, err := Open(root, Zstd)
		if err != nil {
			t.Fatal(err)
		}
		p, err := b.LoadStored(context.Background(), "big")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	got, want := load(big), load(small)
	if len(got.Events) != seq || len(want.Events) != seq {
		t.Fatalf("%d and %d events, want %d", len(got.Events), len(want.Events), seq)
	}
	for i := range got.Events {
		if !bytes.Equal(got.Events[i].Raw, want.Events[i].Raw) {
			t.Fatalf("event %d differs", i)
		}
	}
}

// TestSessionBudget: a session whose events would cost more than max_session_bytes is refused as too
// large, a typed refusal (eventstore.KindTooLarge), for a raw and a zstd transcript and for a large frame.
func TestSessionBudget(t *testing.T) {
	var text []byte
	for n := 1; len(text) < 20<<20; n++ { // over zstdPieceText: one frame of it is decoded streamed
		for _, l := range turn(n, 3*(n-1)) {
			text = append(text, l...)
			text = append(text, '\n')
		}
	}
	header := headerLine("many") + "\n"
	for _, c := range []struct {
		name    string
		mode    Compression
		content []byte
	}{
		{"raw", None, append([]byte(header), text...)},
		{"zstd", Zstd, EncodeFrame(EncodeFrame(nil, []byte(header)), text[:bytes.IndexByte(text[1<<20:], '\n')+1<<20+1])},
		{"large frame", Zstd, append(EncodeFrame(nil, []byte(header)), oneFrame(t, text, len(text))...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			if c.mode == None {
				writeRawSession(t, root, "many", string(c.content))
			} else {
				writeZstdSession(t, root, "many", c.content)
			}
			b, err := Open(root, c.mode)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.LoadStored(context.Background(), "many"); err != nil {
				t.Fatalf("within the default budget: %v", err)
			}
			b.SetSessionLimit(64 << 10)
			_, err = b.LoadStored(context.Background(), "many")
			var tl *eventstore.TooLargeError
			if !errors.As(err, &tl) || eventstore.Classify(err) != eventstore.KindTooLarge {
				t.Fatalf("load over the budget: %v", err)
			}
			if !strings.Contains(err.Error(), "over max_session_bytes (65536)") {
				t.Fatalf("refusal text %q", err)
			}
		})
	}
}

// TestStreamedFrameRefusesLongLine: a line over max_line_bytes inside a large frame is refused as soon as
// it is that long, with the line's number.
func TestStreamedFrameRefusesLongLine(t *testing.T) {
	text := []byte(strings.Join(turn(1, 0), "\n") + "\n")
	text = append(text, bytes.Repeat([]byte("a"), 20<<20)...)
	root := t.TempDir()
	writeZstdSession(t, root, "long", append(EncodeFrame(nil, []byte(headerLine("long")+"\n")), oneFrame(t, text, len(text))...))
	b, err := Open(root, Zstd)
	if err != nil {
		t.Fatal(err)
	}
	b.SetLimits(4<<20, DefaultMaxFrameBytes)
	_, err = b.LoadStored(context.Background(), "long")
	if err == nil || !strings.Contains(err.Error(), "line 4 is over") || !strings.Contains(err.Error(), "over max_line_bytes (4194304)") {
		t.Fatalf("load: %v", err)
	}
}

// TestRawViewStreams: raw.jsonl of an uncompressed transcript is copied, not read whole.
func TestRawViewStreams(t *testing.T) {
	root := t.TempDir()
	content := headerLine("r") + "\n" + strings.Repeat("b", 64<<20) + "\n"
	writeRawSession(t, root, "r", content)
	b, err := Open(root, None)
	if err != nil {
		t.Fatal(err)
	}
	var c counter
	var werr error
	if n := allocated(func() { werr = b.WriteRaw(context.Background(), "r", &c) }); n > 4<<20 {
		t.Errorf("raw.jsonl of a 64 MiB transcript allocated %d MiB", n>>20)
	}
	if werr != nil || c.n != int64(len(content)) {
		t.Fatalf("raw: %v, %d bytes of %d", werr, c.n, len(content))
	}
}

// TestFailedWritesLeaveNothing: a create whose header cannot be written (a full disk) leaves no empty
// session or project directory behind, and a pending sidecar that cannot be written leaves no empty file.
func TestFailedWritesLeaveNothing(t *testing.T) {
	root := t.TempDir()
	b, err := Open(root, Zstd)
	if err != nil {
		t.Fatal(err)
	}
	b.SetHook(func(op Op, path string) error {
		if op == OpWrite {
			return syscall.ENOSPC
		}
		return nil
	})
	h, err := event.ParseHeaderLine([]byte(headerLine("full") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Materialize(context.Background(), h, nil); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("create on a full disk: %v", err)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Fatalf("a failed create left %v in the root", entries)
	}
	b.SetHook(nil)
	if _, err := b.Materialize(context.Background(), h, nil); err != nil {
		t.Fatal(err)
	}
	path, _ := b.Locate(h)
	b.SetHook(func(op Op, p string) error {
		if op == OpWrite && strings.Contains(p, ".pending-") {
			return syscall.ENOSPC
		}
		return nil
	})
	e, _ := event.NewEvent([]byte(`{"type":"plugin/note","seq":0,"time":1,"data":{},"ignorable":true}`))
	if _, err := b.KeepPending(context.Background(), h, []event.Event{e}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("sidecar on a full disk: %v", err)
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	var names []string
	for _, de := range entries {
		if de.Name() != LeaseName { // the write lease's file stays, as the harness's does
			names = append(names, de.Name())
		}
	}
	if err != nil || len(names) != 1 {
		t.Fatalf("beside the transcript after a failed sidecar: %v %v", names, err)
	}
}

// TestRawLongLineBounded: a raw transcript whose line runs past max_line_bytes is refused having read
// ahead for its end, not buffered it (a 1 GB file cost 1.2 GB for status.json); a long line within the
// limit still loads whole.
func TestRawLongLineBounded(t *testing.T) {
	root := t.TempDir()
	long := `{"type":"plugin/note","seq":0,"time":1,"data":{"pad":"` + strings.Repeat("x", 20<<20) + `"},"ignorable":true}`
	writeRawSession(t, root, "ok", headerLine("ok")+"\n"+long+"\n")
	writeRawSession(t, root, "over", headerLine("over")+"\n"+strings.Repeat("y", 48<<20)+"\n")
	b, err := Open(root, None)
	if err != nil {
		t.Fatal(err)
	}
	b.SetLimits(32<<20, DefaultMaxFrameBytes)
	var lerr error
	if n := allocated(func() { _, lerr = b.LoadStored(context.Background(), "over") }); n > 24<<20 {
		t.Errorf("refusing a 48 MiB line allocated %d MiB", n>>20)
	}
	if lerr == nil || lerr.Error() != "corrupt session log: line 1 is over 33554432 bytes, over max_line_bytes (33554432)" {
		t.Fatalf("load: %v", lerr)
	}
	p, err := b.LoadStored(context.Background(), "ok")
	if err != nil || len(p.Events) != 1 || string(p.Events[0].Raw) != long {
		t.Fatalf("a 20 MiB line within the limit: %v", err)
	}
}

// TestPredecodeLineList: a piece's line list, made anew (chunkLines empty), has room for its lines and no
// more, up to 256 entries (a small session's piece would otherwise allocate 256), and never more for a
// piece of empty lines. A released list is reused whatever its room.
func TestPredecodeLineList(t *testing.T) {
	defer func(old *sync.Pool) { chunkLines = old }(chunkLines)
	line := `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}` + "\n"
	for _, tc := range []struct {
		plain   string
		lines   int
		maxCap  int
		entries int
	}{
		{"", 0, 0, 0},
		{line, 1, 1, 1},
		{strings.Repeat(line, 40), 40, 40, 40},
		{strings.Repeat(line, 1000), 1000, 1024 + 256, 1000},
		{strings.Repeat("\n", 100000), 100000, 256, 2},
	} {
		chunkLines = &sync.Pool{New: func() any { return new([]decodedLine) }}
		c := predecode([]byte(tc.plain), true, false)
		if len(c.lines) != tc.entries || cap(c.lines) > tc.maxCap {
			t.Errorf("%d lines: %d entries (want %d), room for %d (want at most %d)", tc.lines, len(c.lines), tc.entries, cap(c.lines), tc.maxCap)
		}
		c.release()
	}
}
