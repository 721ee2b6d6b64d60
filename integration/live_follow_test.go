package integration

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// mountStats reads the mount's stats.json counters (its numbers; `watch` is a word).
func mountStats(t *testing.T, mnt string) map[string]int64 {
	t.Helper()
	var raw map[string]any
	if err := json.Unmarshal(readFile(t, filepath.Join(mnt, "stats.json")), &raw); err != nil {
		t.Fatal(err)
	}
	st := map[string]int64{}
	for k, v := range raw {
		if n, ok := v.(float64); ok {
			st[k] = int64(n)
		}
	}
	return st
}

// TestLiveFollow: `tail -f -s 0.1` of the events.jsonl of a session the mount writes — appended through
// its append file and flushed with `echo flush > ctl`, batch by batch — prints exactly the appended lines,
// each batch as it lands; and the mount renders only what each batch adds: stats.json's extendedBytes grows
// by exactly the appended lines, and its renderedBytes by less than one whole rendering of the view over
// all the batches (a view rendered whole per batch would add the whole file each time).
func TestLiveFollow(t *testing.T) {
	t.Parallel()
	store, _ := emptyStore(t, "zstd")
	cfg := writeConfig(t, "[writer]\ncompression = \"zstd\"\nbatch_window = \"1h\"\n") // only the flushes write
	m := startMount(t, "--config", cfg, store)
	const id = "follow-live"
	s := newSessionOnMount(t, m.dir, id)
	ctlPath, file := filepath.Join(s, "ctl"), filepath.Join(s, "events.jsonl")

	var seq int64
	turn := 0
	nextTurn := func() []string {
		turn++
		l := turnLines(turn, seq, false)
		seq += int64(len(l))
		return l
	}
	var first []string
	for turn < 300 {
		first = append(first, nextTurn()...)
	}
	mustAppend(t, s, first)
	mustCtl(t, ctlPath, "flush")
	before := readFile(t, file)
	if got := len(lines(before)); got != len(first) {
		t.Fatalf("events.jsonl holds %d lines, want %d", got, len(first))
	}

	var out, tailErr syncBuffer
	tail := exec.Command("tail", "-n", "0", "-f", "-s", "0.1", file)
	tail.Stdout, tail.Stderr = &out, &tailErr
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = tail.Process.Signal(syscall.SIGTERM)
		_ = tail.Wait()
	})
	waitFor(t, "tail to open "+file, func() (bool, string) { return openedBy(tail.Process.Pid, file), tailErr.String() })

	was := mountStats(t, m.dir)
	appended := 0
	for b := 0; b < 5; b++ {
		batch := nextTurn()
		mustAppend(t, s, batch)
		mustCtl(t, ctlPath, "flush")
		appended += len(batch)
		start := time.Now()
		waitFor(t, "tail -f to print the batch", func() (bool, string) {
			n := len(lines([]byte(out.String())))
			return n == appended, string(tailErr.String())
		})
		t.Logf("batch %d (%d events) reached tail -f in %v", b, len(batch), time.Since(start))
	}
	now := mountStats(t, m.dir)

	after := readFile(t, file)
	if !bytes.HasPrefix(after, before) {
		t.Fatal("events.jsonl no longer starts with what it held before the batches")
	}
	grown := after[len(before):]
	if got := out.String(); got != string(grown) {
		t.Errorf("tail -f printed\n%s\nwant exactly the appended lines\n%s", got, grown)
	}
	if want := cli(t, 0, "cat", "--view", "events", store, id); !bytes.Equal(after, want) {
		t.Errorf("events.jsonl differs from dshfs cat --view events of the store (%d bytes, want %d)", len(after), len(want))
	}
	if d := now["extendedBytes"] - was["extendedBytes"]; d != int64(len(grown)) {
		t.Errorf("the batches extended the views by %d bytes, want the %d appended", d, len(grown))
	}
	if d := now["renderedBytes"] - was["renderedBytes"]; d >= int64(len(before)) {
		t.Errorf("following 5 batches rendered %d bytes whole: at least one whole rendering of the %d-byte view", d, len(before))
	}
	if s := tailErr.String(); s != "" {
		t.Errorf("tail stderr: %s", s)
	}
}
