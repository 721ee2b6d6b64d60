package fleetsync_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/fleetsync"
	"github.com/dshfs/dshfs/internal/fixtures"
	"github.com/dshfs/dshfs/internal/synth"
)

// v4Grown writes session s of at least n events as v4 into root, and returns the text of the more whole
// turns the same generator writes after them (each its rows, each row with its LF): what the harness
// appends to the session as it runs.
func v4Grown(t *testing.T, root string, mode jsonl.Compression, n, more int) [][]byte {
	t.Helper()
	longer := filepath.Join(t.TempDir(), "longer")
	if err := synth.WriteV4(root, mode, "s", n); err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteV4(longer, mode, "s", n+(more+1)*11); err != nil {
		t.Fatal(err)
	}
	short := plaintext(t, artifact(t, source(t, root), "s"))
	long := plaintext(t, artifact(t, source(t, longer), "s"))
	if !bytes.HasPrefix(long, short) {
		t.Fatal("the longer session does not start with the shorter one")
	}
	var turns [][]byte
	for _, row := range bytes.SplitAfter(long[len(short):], []byte("\n")) {
		if len(row) == 0 {
			continue
		}
		if bytes.Contains(row, []byte(`"type":"turn/start"`)) || len(turns) == 0 {
			turns = append(turns, nil)
		}
		turns[len(turns)-1] = append(turns[len(turns)-1], row...)
	}
	if len(turns) < more {
		t.Fatalf("%d turns after the session, want %d", len(turns), more)
	}
	return turns[:more]
}

// grow appends text to a v4 artifact as the harness's writer does: as it is (raw), or as one frame (zstd).
func grow(t *testing.T, path string, mode jsonl.Compression, text []byte) {
	t.Helper()
	if mode == jsonl.Zstd {
		text = jsonl.EncodeFrame(nil, text)
	}
	appendFile(t, path, string(text))
}

func rowsOf(text []byte) int { return bytes.Count(text, []byte("\n")) }

// v4Cursor checks what the syncer's cursor of session s holds after a pass: past seq next, the restore
// state kept, and whether the pass resumed from it (checked only the rows appended).
func v4Cursor(t *testing.T, s *fleetsync.Syncer, next int64, resumed bool) {
	t.Helper()
	ok, at, kept, res := fleetsync.V4Cursor(s, "s")
	if !ok || at != next || !kept || res != resumed {
		t.Fatalf("cursor: ok %v, past seq %d, state kept %v, resumed %v; want past seq %d, kept, resumed %v", ok, at, kept, res, next, resumed)
	}
}

// TestSyncV4Incremental: a followed v4 session that grows is read from where the last read ended, its new
// rows checked from the restore's state there, and only they are copied: a turn; a turn whose frame (zstd)
// or line (raw) is torn at first, copied once complete; and a row the restore refuses after them, left
// behind as the restore leaves it (the whole file restored again). The fleet store serves exactly what the
// JSONL store and the harness read.
func TestSyncV4Incremental(t *testing.T) {
	for _, mode := range []jsonl.Compression{jsonl.None, jsonl.Zstd} {
		t.Run(string(mode), func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "sessions")
			turns := v4Grown(t, root, mode, 300, 2)
			dst, dsn := fleet(t, "h")
			src := source(t, root)
			file := artifact(t, src, "s")
			s := fleetsync.New(src, dst, fleetsync.Options{Host: "h", MaxLines: 4})
			fleetsync.Follow(s)
			first := pass(t, s)[0]
			if first.Status != fleetsync.Copied || first.To < 300 {
				t.Fatalf("first sync: %+v", first)
			}
			v4Cursor(t, s, first.To, false)

			grow(t, file, mode, turns[0])
			n := int64(rowsOf(turns[0]))
			r := pass(t, s)[0]
			if r.Status != fleetsync.Copied || r.From != first.To || r.To != first.To+n || r.Lines != int(n) {
				t.Fatalf("after a turn: %+v, want its %d rows copied from seq %d", r, n, first.To)
			}
			v4Cursor(t, s, r.To, true)
			equal(t, src, dst, dsn, true)

			// torn: half of the turn's frame, or half of its first line
			cut := len(turns[1]) / 2
			rest := turns[1]
			if mode == jsonl.Zstd {
				rest = jsonl.EncodeFrame(nil, turns[1])
				cut = len(rest) / 2
			} else {
				cut = bytes.IndexByte(rest, '\n') / 2
			}
			appendFile(t, file, string(rest[:cut]))
			was := r.To
			r = pass(t, s)[0]
			if r.Status != fleetsync.Unchanged || r.To != was {
				t.Fatalf("a torn %s: %+v, want unchanged at seq %d", mode, r, was)
			}
			v4Cursor(t, s, was, true)
			appendFile(t, file, string(rest[cut:]))
			n = int64(rowsOf(turns[1]))
			r = pass(t, s)[0]
			if r.Status != fleetsync.Copied || r.From != was || r.To != was+n {
				t.Fatalf("the torn turn completed: %+v, want its %d rows copied from seq %d", r, n, was)
			}
			v4Cursor(t, s, was+n, true)
			equal(t, src, dst, dsn, true)
			harnessReads(t, dst, "s")

			// a row the restore refuses (its seq is not the next one): set aside with what follows it
			was = r.To
			grow(t, file, mode, []byte(`{"type":"session/note","seq":`+itoa(int(was)+5)+`,"time":1778573709000,"data":{},"ignorable":true}`+"\n"))
			r = pass(t, s)[0]
			if r.Status != fleetsync.Unchanged || r.To != was {
				t.Fatalf("a refused row: %+v, want unchanged at seq %d", r, was)
			}
			if ok, _, _, _ := fleetsync.V4Cursor(s, "s"); ok {
				t.Fatal("a cursor past rows the restore set aside")
			}
			equal(t, src, dst, dsn, true)
		})
	}
}

// TestSyncV4Rewritten: a followed v4 session whose log is other than the one its cursor read is never
// continued. Replaced by a copy that grew otherwise (a restored backup), or rewritten in place near its
// end (the bytes before the cursor's offset differ), it is compared again and refused naming the first
// differing seq, nothing written; rewritten in place anywhere, a syncer that keeps no restore state (one
// pass per run) finds it by the cursor's digest of the rows and compares again on the next pass.
func TestSyncV4Rewritten(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []jsonl.Compression{jsonl.None, jsonl.Zstd} {
		t.Run("replaced-"+string(mode), func(t *testing.T) {
			dir := t.TempDir()
			root, backup := filepath.Join(dir, "sessions"), filepath.Join(dir, "backup")
			turns := v4Grown(t, root, mode, 200, 2)
			copyRoot(t, root, backup)
			dst, dsn := fleet(t, "h")
			s := fleetsync.New(source(t, root), dst, fleetsync.Options{Host: "h"})
			fleetsync.Follow(s)
			first := pass(t, s)[0]
			grow(t, artifact(t, source(t, root), "s"), mode, turns[0])
			if r := pass(t, s)[0]; r.Status != fleetsync.Copied || r.From != first.To {
				t.Fatalf("a turn: %+v", r)
			}
			synced := filepath.Join(dir, "synced")
			copyRoot(t, root, synced)
			if err := os.RemoveAll(root); err != nil {
				t.Fatal(err)
			}
			copyRoot(t, backup, root)
			note(t, root, mode, "s", "after the restore")
			was, _ := dst.Held(ctx, "s")
			r := pass(t, s)[0]
			if want := "differs from the fleet store's copy at seq " + itoa(int(first.To)); r.Status != fleetsync.Refused || !strings.Contains(r.Reason, want) {
				t.Fatalf("the restored root: %+v, want refused %q", r, want)
			}
			unchangedFleet(t, dst, "s", was)
			equal(t, source(t, synced), dst, dsn, true)
		})
	}
	t.Run("tail-in-place", func(t *testing.T) {
		root := filepath.Join(t.TempDir(), "sessions")
		turns := v4Grown(t, root, jsonl.None, 200, 1)
		dst, _ := fleet(t, "h")
		s := fleetsync.New(source(t, root), dst, fleetsync.Options{Host: "h"})
		fleetsync.Follow(s)
		first := pass(t, s)[0]
		file := artifact(t, source(t, root), "s")
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		// the last row's time, one millisecond later: the same length, the same inode
		last := bytes.LastIndexByte(b[:len(b)-1], '\n') + 1
		at := last + bytes.Index(b[last:], []byte(`"time":`)) + len(`"time":`) + 12
		b[at]++
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
		grow(t, file, jsonl.None, turns[0])
		was, _ := dst.Held(context.Background(), "s")
		r := pass(t, s)[0]
		if want := "differs from the fleet store's copy at seq " + itoa(int(first.To-1)); r.Status != fleetsync.Refused || !strings.Contains(r.Reason, want) {
			t.Fatalf("the last row rewritten: %+v, want refused %q", r, want)
		}
		unchangedFleet(t, dst, "s", was)
	})
	t.Run("early-in-place", func(t *testing.T) {
		root := filepath.Join(t.TempDir(), "sessions")
		turns := v4Grown(t, root, jsonl.None, 200, 1)
		dst, _ := fleet(t, "h")
		s := fleetsync.New(source(t, root), dst, fleetsync.Options{Host: "h"})
		pass(t, s)
		file := artifact(t, source(t, root), "s")
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		// a word of the first text: far before the end, the same length, the same inode
		at := bytes.Index(b, []byte(`"text":"`)) + len(`"text":"`)
		seq := int64(bytes.Count(b[:at], []byte("\n"))) - 1 // the header is line 0
		if b[at] == 'x' {
			b[at] = 'y'
		} else {
			b[at] = 'x'
		}
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
		grow(t, file, jsonl.None, turns[0])
		was, _ := dst.Held(context.Background(), "s")
		r := pass(t, s)[0]
		if r.Status != fleetsync.Failed || !strings.Contains(r.Reason, "compared again by the next pass") {
			t.Fatalf("an early row rewritten: %+v, want failed, compared again", r)
		}
		unchangedFleet(t, dst, "s", was)
		r = pass(t, s)[0]
		if want := "differs from the fleet store's copy at seq " + itoa(int(seq)); r.Status != fleetsync.Refused || !strings.Contains(r.Reason, want) {
			t.Fatalf("the next pass: %+v, want refused %q", r, want)
		}
		unchangedFleet(t, dst, "s", was)
	})
}

// TestSyncV4UpgradeFollowed: a followed v0 session its harness upgrades is carried as v4, and what the
// harness appends to the v4 log afterwards is copied — the first time after comparing the whole log, then
// from the cursor.
func TestSyncV4UpgradeFollowed(t *testing.T) {
	for _, tc := range []struct {
		mode jsonl.Compression
		path string
	}{{jsonl.None, "generated/raw"}, {jsonl.Zstd, "generated/zstd"}} {
		t.Run(string(tc.mode), func(t *testing.T) {
			const id = "main-session-30628611-e45f-4f98-9688-010e1428e585"
			dir := fixtures.CopyTree(t, fixtures.Path(t, tc.path))
			dst, dsn := fleet(t, "h")
			s := fleetsync.New(source(t, dir), dst, fleetsync.Options{Host: "h"})
			fleetsync.Follow(s)
			pass(t, s)
			upgradeRoot(t, dir, tc.mode)
			var carried fleetsync.Report
			for _, r := range pass(t, s) {
				if r.ID == id {
					carried = r
				}
			}
			if carried.Status != fleetsync.Copied || !strings.Contains(carried.Reason, "carried as format generation v4") {
				t.Fatalf("the upgrade: %+v, want carried", carried)
			}
			at := carried.To
			for round := 1; round <= 2; round++ {
				note(t, dir, tc.mode, id, "after the upgrade "+itoa(round))
				var r fleetsync.Report
				for _, x := range pass(t, s) {
					if x.ID == id {
						r = x
					}
				}
				// the first note is written after the closers of the turn the upgrade left open
				if r.Status != fleetsync.Copied || r.Lines < 1 || r.From != at {
					t.Fatalf("round %d: %+v, want the note copied from seq %d", round, r, at)
				}
				at = r.To
				ok, next, kept, resumed := fleetsync.V4Cursor(s, id)
				if !ok || next != r.To || !kept || resumed != (round == 2) {
					t.Fatalf("round %d: cursor %v %d %v %v", round, ok, next, kept, resumed)
				}
			}
			equal(t, source(t, dir), dst, dsn, true)
			harnessReads(t, dst, id)
		})
	}
}

// TestWatchV4: sync --watch keeps a v4 session's restore state: each turn the harness appends is copied
// as it lands, read from where the last read ended.
func TestWatchV4(t *testing.T) {
	for _, mode := range []jsonl.Compression{jsonl.None, jsonl.Zstd} {
		t.Run(string(mode), func(t *testing.T) {
			ctx := context.Background()
			root := filepath.Join(t.TempDir(), "sessions")
			turns := v4Grown(t, root, mode, 100, 3)
			dst, dsn := fleet(t, "h")
			src := source(t, root)
			file := artifact(t, src, "s")
			s := fleetsync.New(src, dst, fleetsync.Options{Host: "h"})
			first := pass(t, s)[0]
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- s.Watch(wctx, func(fleetsync.Report) {}, func(msg string) { t.Log(msg) }) }()
			want := first.To
			for i, turn := range turns {
				grow(t, file, mode, turn)
				want += int64(rowsOf(turn))
				await(t, func() bool { h, _ := dst.Held(ctx, "s"); return h.NextSeq == want })
				// the watch's first read restores the file whole; each later one resumes from its state
				await(t, func() bool {
					ok, next, kept, resumed := fleetsync.V4Cursor(s, "s")
					return ok && next == want && kept && resumed == (i > 0)
				})
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			equal(t, src, dst, dsn, true)
		})
	}
}
