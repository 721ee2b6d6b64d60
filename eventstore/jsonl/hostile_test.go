package jsonl

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/internal/namecodec"
)

// hostile writes an artifact for id under root with make (which creates whatever sits at the path).
func hostile(t *testing.T, root, id string, mode Compression, make func(path string)) {
	t.Helper()
	seg, _ := namecodec.EncodeSegment(id)
	dir := filepath.Join(root, "--home-dev-proj--", seg)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	make(filepath.Join(dir, "session"+mode.Suffix()))
}

// TestHostileArtifacts: artifacts that are not regular files, links out of the root, and decompression
// bombs are refused with a reason, quickly and in bounded memory; nothing blocks.
func TestHostileArtifacts(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte(headerLine("leak")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id   string
		mode Compression
		make func(path string)
		want string
	}{
		{"fifo", None, func(p string) { syscall.Mkfifo(p, 0o600) }, "is not a regular file (a FIFO)"},
		{"zero", None, func(p string) { os.Symlink("/dev/zero", p) }, `resolves outside the store root (to "/dev/zero")`},
		{"leak", None, func(p string) { os.Symlink(secret, p) }, "resolves outside the store root"},
		{"dangling", None, func(p string) { os.Symlink(filepath.Join(filepath.Dir(p), "nowhere"), p) }, "dangling"},
		{"loop", None, func(p string) { os.Symlink(p, p) }, "symlink loop"},
		{"dir", None, func(p string) { os.Mkdir(p, 0o700) }, "is not a regular file (a directory)"},
		{"longline", None, func(p string) {
			os.WriteFile(p, []byte(headerLine("longline")+"\n"+strings.Repeat("a", 5000)+"\n"), 0o600)
		}, "line 1 is 5000 bytes, over max_line_bytes (4096)"},
		{"noheaderend", None, func(p string) { os.WriteFile(p, []byte(strings.Repeat("{", 20000)), 0o600) }, "header record is not complete within"},
		{"bomb", Zstd, func(p string) {
			header := EncodeFrame(nil, []byte(headerLine("bomb")+"\n"))
			os.WriteFile(p, append(header, Bomb(16384)...), 0o600) // 2 GiB of zeros in 64 KiB
		}, "over max_frame_bytes"},
	} {
		t.Run(c.id, func(t *testing.T) {
			root := t.TempDir()
			hostile(t, root, c.id, c.mode, c.make)
			b, err := Open(root, c.mode)
			if err != nil {
				t.Fatal(err)
			}
			b.SetLimits(4096, 1<<20)
			st := eventstore.New(b)
			done := make(chan struct{})
			var listErr, readErr error
			var l eventstore.Listing
			go func() {
				defer close(done)
				l, listErr = st.List(context.Background())
				if listErr == nil {
					_, readErr = st.Inspect(context.Background(), c.id)
				}
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("listing or reading blocked")
			}
			if listErr != nil || len(l.Entries) != 1 {
				t.Fatalf("list: %+v %v", l, listErr)
			}
			refusal := l.Entries[0].Refusal
			if refusal == nil {
				refusal = readErr
			}
			if refusal == nil || !strings.Contains(refusal.Error(), c.want) {
				t.Errorf("refusal %v, want %q", refusal, c.want)
			}
			if _, err := st.ReadRaw(context.Background(), c.id); c.id == "leak" && err == nil {
				t.Errorf("raw bytes of a link out of the root were served")
			}
		})
	}
}

// newlines is a reader of n newlines that never holds them in memory.
type newlines struct {
	n, peak uint64
	reads   int
	prefix  []byte
}

func (r *newlines) Read(p []byte) (int, error) {
	if len(r.prefix) > 0 {
		n := copy(p, r.prefix)
		r.prefix = r.prefix[n:]
		return n, nil
	}
	if r.n == 0 {
		return 0, io.EOF
	}
	if r.reads++; r.reads%16 == 0 {
		// what the scan holds alive, not what the collector has yet to free: the heap in use depends on
		// how far behind the collector runs, which under a busy machine (the whole suite in parallel, the
		// race detector) went past the bound with the scan itself unchanged
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		r.peak = max(r.peak, ms.HeapAlloc)
	}
	k := min(uint64(len(p)), uint64(len(newlineBlock)), r.n)
	copy(p, newlineBlock[:k])
	r.n -= k
	return int(k), nil
}

var newlineBlock = bytes.Repeat([]byte{'\n'}, 1<<20)

// TestRawScanBoundedMemory: a raw transcript of 256 MiB of empty lines after its header loads in bounded
// memory — its chunks are released as they are scanned — as a session with no events and all of them a
// torn tail (an empty line never parses).
func TestRawScanBoundedMemory(t *testing.T) {
	b := &Backend{mode: None, maxLine: DefaultMaxLineBytes, maxFrame: DefaultMaxFrameBytes}
	const size = 256 << 20
	r := &newlines{n: size, prefix: []byte(headerLine("s") + "\n")}
	runtime.GC()
	p, err := b.scanRaw(r, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Events) != 0 || p.Torn == nil || p.Torn.Bytes != size {
		t.Fatalf("%d events, torn %+v", len(p.Events), p.Torn)
	}
	if r.peak > 32<<20 { // the file read whole would take 256 (live: about 9)
		t.Fatalf("scanning 256 MiB of empty lines used %d MiB of heap", r.peak>>20)
	}
}
