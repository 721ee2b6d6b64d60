package nodes

import (
	"context"
	"errors"
	"fmt"
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
				get: func(context.Context) (Rendered, error) { return tc.now, tc.err },
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
