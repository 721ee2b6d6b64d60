package nodes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
)

// A handle opened on the kernel's kept page cache has no bytes until a read needs them; what it renders
// then is served only if it is the bytes it was opened at.
func TestLazyHandle(t *testing.T) {
	opened := []byte("{\"seq\":1}\n{\"seq\":2}\n")
	grown := append(append([]byte(nil), opened...), "{\"seq\":3}\n"...)
	rewritten := []byte("{\"seq\":1}\n{\"seq\":9}\n{\"seq\":3}\n")
	at := &snapshot{rev: "r1", size: int64(len(opened)), sum: sha256Hex(opened)}
	for _, tc := range []struct {
		name    string
		now     Rendered
		err     error
		want    string // the first read from offset 0 (64 bytes)
		errno   syscall.Errno
		logged  bool
		wantLen int64 // the handle's size after the read
	}{
		{name: "same revision", now: Rendered{Data: opened, Revision: "r1", Identity: "g"}, want: string(opened), wantLen: int64(len(opened))},
		{name: "grown since the open", now: Rendered{Data: grown, Revision: "r2", Identity: "g"}, want: string(grown), wantLen: int64(len(grown))},
		{name: "rewritten since the open", now: Rendered{Data: rewritten, Revision: "r2", Identity: "g"}, errno: syscall.EIO, logged: true, wantLen: int64(len(opened))},
		{name: "shorter since the open", now: Rendered{Data: opened[:5], Revision: "r2", Identity: "g"}, errno: syscall.EIO, logged: true, wantLen: int64(len(opened))},
		{name: "same revision, other length", now: Rendered{Data: grown, Revision: "r1", Identity: "g"}, want: string(grown), wantLen: int64(len(grown))},
		{name: "replaced artifact", now: Rendered{Data: grown, Revision: "r2", Identity: "other"}, errno: syscall.EIO, logged: true, wantLen: int64(len(opened))},
		{name: "render fails", err: errors.New("boom"), errno: syscall.EIO, logged: true, wantLen: int64(len(opened))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs []string
			h := &handle{lazy: at, gen: "g", what: "sessions/s/events.jsonl",
				src: rendering{tc.now, tc.err},
				log: func(format string, args ...any) { logs = append(logs, fmt.Sprintf(format, args...)) }}
			if h.size() != int64(len(opened)) {
				t.Fatalf("size before a read: %d", h.size())
			}
			got, errno := h.read(context.Background(), make([]byte, 64), 0)
			if errno != tc.errno || string(got) != tc.want {
				t.Fatalf("read: %q, errno %v; want %q, errno %v", got, errno, tc.want, tc.errno)
			}
			if (len(logs) > 0) != tc.logged {
				t.Fatalf("log: %q", logs)
			}
			if h.size() != tc.wantLen {
				t.Fatalf("size after the read: %d, want %d", h.size(), tc.wantLen)
			}
		})
	}
}

// keeps agrees with openFlags: a lazy open is made only when the open keeps the page cache.
func TestKernelViewKeeps(t *testing.T) {
	var k kernelView
	if k.keeps(7, "r1", 10) {
		t.Fatal("nothing opened yet")
	}
	if f := k.openFlags(7, "r1", 10); f != 0 {
		t.Fatalf("first open: flags %#x", f)
	}
	if !k.keeps(7, "r1", 10) || k.keeps(7, "r2", 10) || k.keeps(7, "", 10) {
		t.Fatal("keeps: only the revision opened last")
	}
	k.reported(7, 12) // the kernel was told another size: not the page cache
	if k.keeps(7, "r1", 10) {
		t.Fatal("keeps with another reported size")
	}
	k.forget(7)
	if k.keeps(7, "r1", 10) {
		t.Fatal("keeps after forget")
	}
}

// A priming stores a view in the kernel's page cache only while the kernel was told its size and no open
// has recorded what the kernel holds; after it, an open of the primed revision keeps the pages and an open of
// any other revision does not.
func TestKernelViewPrime(t *testing.T) {
	data := []byte("0123456789")
	for _, tc := range []struct {
		name      string
		setup     func(k *kernelView)
		storeErr  syscall.Errno
		wantStore bool
		wantDone  bool
		wantKeeps bool // an open of r1, 10 bytes, keeps the pages afterwards
	}{
		{name: "looked up", setup: func(k *kernelView) { k.reported(7, 10) }, wantStore: true, wantDone: true, wantKeeps: true},
		{name: "never looked up", setup: func(k *kernelView) {}, wantDone: true},
		{name: "another size reported", setup: func(k *kernelView) { k.reported(7, 12) }, wantDone: true},
		{name: "an open got there first", setup: func(k *kernelView) { k.reported(7, 10); k.openFlags(7, "r0", 10) }, wantDone: true},
		{name: "the kernel does not know the inode yet", setup: func(k *kernelView) { k.reported(7, 10) },
			storeErr: syscall.ENOENT, wantStore: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var k kernelView
			tc.setup(&k)
			stored := false
			errno, done := k.prime(7, "r1", data, func(b []byte) syscall.Errno {
				stored = true
				if !bytes.Equal(b, data) {
					t.Errorf("stored %q", b)
				}
				return tc.storeErr
			})
			if stored != tc.wantStore || done != tc.wantDone || errno != tc.storeErr {
				t.Fatalf("stored %v, done %v, errno %v; want %v, %v, %v", stored, done, errno, tc.wantStore, tc.wantDone, tc.storeErr)
			}
			if got := k.keeps(7, "r1", 10); got != tc.wantKeeps {
				t.Fatalf("keeps r1 after the priming: %v", got)
			}
			if tc.wantKeeps && (k.keeps(7, "r2", 10) || k.openFlags(7, "r2", 10) != 0) {
				t.Fatal("an open of another revision keeps the primed pages")
			}
		})
	}
	var primes atomic.Int64
	k := kernelView{primes: &primes}
	k.reported(7, 10)
	k.prime(7, "r1", data, func([]byte) syscall.Errno { return 0 })
	k.prime(7, "r1", data, func([]byte) syscall.Errno { t.Fatal("primed twice"); return 0 })
	if primes.Load() != 1 {
		t.Fatalf("primes counted %d, want 1", primes.Load())
	}
}

// A handle serves a Blob (a large view in a file) as it serves bytes in memory: read at any offset, cut at
// its size, and followed when the log grows — whether the longer rendering is a Blob or in memory — but
// never onto bytes that do not start with the ones it served.
func TestBlobHandle(t *testing.T) {
	opened := bytes.Repeat([]byte("{\"seq\":1}\n"), 100)
	grown := append(append([]byte(nil), opened...), "{\"seq\":2}\n"...)
	rewritten := append([]byte("{\"seq\":9}\n"), grown[10:]...)
	blob := func(b []byte) Rendered { return Rendered{Blob: bytes.NewReader(b), Sum: sha256Hex(b), Identity: "g"} }
	for _, tc := range []struct {
		name string
		now  Rendered
		want []byte // everything a read from the handle's end returns
	}{
		{name: "grown blob", now: blob(grown), want: grown[len(opened):]},
		{name: "grown in memory", now: Rendered{Data: grown, Identity: "g"}, want: grown[len(opened):]},
		{name: "rewritten blob", now: blob(rewritten)},
		{name: "rewritten in memory", now: Rendered{Data: rewritten, Identity: "g"}},
		{name: "grown blob of a replaced artifact", now: Rendered{Blob: bytes.NewReader(grown), Sum: sha256Hex(grown), Identity: "other"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &handle{b: bodyOf(blob(opened)), gen: "g", what: "sessions/s/events.jsonl",
				src: rendering{r: tc.now},
				log: func(format string, args ...any) { t.Errorf(format, args...) }}
			got, errno := h.read(context.Background(), make([]byte, 7), 33)
			if errno != 0 || string(got) != string(opened[33:40]) {
				t.Fatalf("read at 33: %q, %v", got, errno)
			}
			got, errno = h.read(context.Background(), make([]byte, 64), int64(len(opened)))
			if errno != 0 || string(got) != string(tc.want) {
				t.Fatalf("read at the end: %q, %v; want %q", got, errno, tc.want)
			}
		})
	}
	// a lazy handle whose rendering is now a longer Blob serves the opened prefix's bytes
	at := &snapshot{rev: "r1", size: int64(len(opened)), sum: sha256Hex(opened)}
	grownBlob := blob(grown)
	grownBlob.Revision = "r2"
	h := &handle{lazy: at, gen: "g", src: rendering{r: grownBlob},
		log: func(format string, args ...any) { t.Errorf(format, args...) }}
	got, errno := h.read(context.Background(), make([]byte, 20), int64(len(opened))-10)
	if errno != 0 || string(got) != string(grown[len(opened)-10:len(opened)+10]) {
		t.Fatalf("lazy read over the opened end: %q, %v", got, errno)
	}
}

// rendering is content that renders r (or fails with err) every time.
type rendering struct {
	r   Rendered
	err error
}

func (c rendering) render(context.Context) (Rendered, error) { return c.r, c.err }
