package integration

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	liveSessions = flag.Int("live.sessions", 1000, "sessions the live-memory test appends to through one mount")
	liveEvents   = flag.Int("live.events", 2000, "events each session of the live-memory test holds before its append")
)

// TestLiveSessionsMemory: one mount (a plain build, as the memory tests use) with the default configuration
// appends a turn through the append file of each of 1,000 sessions, so that it becomes their live writer,
// and the sessions go idle. The mount's peak resident set (VmHWM) stays within 256 MiB throughout — the
// appends, the idle, and reads of status.json and events.jsonl of a hundred of them afterwards, which
// bring released engines' logs back — while every session stays live in this mount (a second writer is
// refused, the lease held), and every appended event is in every session's file with the seq that follows
// its stored log. -live.sessions and -live.events make it larger.
//
// The sessions hold a history before the append (a copy of one generated log, each under its own id in
// its header), so that an engine costs what a writer of real sessions costs: kept whole, their logs take
// the mount to about 725 MiB.
//
// It runs alone (not in parallel): its thousand appends keep both cores busy for most of a minute.
func TestLiveSessionsMemory(t *testing.T) {
	store := filepath.Join(t.TempDir(), "sessions")
	ids := make([]string, *liveSessions)
	for i := range ids {
		ids[i] = fmt.Sprintf("live-%05d", i)
	}
	// raw JSONL: a copy differs from the generated log in its header line only
	mustRun(t, gensessionBin(t), "-mode", "none", "-id", ids[0], store, strconv.Itoa(*liveEvents))
	project := filepath.Join(store, "--home-dev-bench--")
	log := readFile(t, filepath.Join(project, ids[0], "session.jsonl"))
	header, body, _ := bytes.Cut(log, []byte("\n"))
	stored := bytes.Count(body, []byte("\n")) // rows after the header; a row may pack several events
	for _, id := range ids[1:] {
		if err := os.Mkdir(filepath.Join(project, id), 0o755); err != nil {
			t.Fatal(err)
		}
		h := bytes.Replace(header, []byte(`"id":"`+ids[0]+`"`), []byte(`"id":"`+id+`"`), 1)
		path := filepath.Join(project, id, "session.jsonl")
		if err := os.WriteFile(path, append(append(h, '\n'), body...), 0o600); err != nil {
			t.Fatal(err)
		}
		// written an hour ago, as far as the quiet period of a harness without the lease goes
		ago := time.Now().Add(-time.Hour)
		if err := os.Chtimes(path, ago, ago); err != nil {
			t.Fatal(err)
		}
	}
	var st struct {
		Events int `json:"events"`
	}
	if err := json.Unmarshal(cli(t, 0, "cat", "--view", "status", store, ids[0]), &st); err != nil {
		t.Fatal(err)
	}
	turns := bytes.Count(body, []byte(`"type":"turn/end"`))
	turn := turnLines(turns+1, int64(st.Events), false)
	turnFile := filepath.Join(t.TempDir(), "turn.jsonl")
	if err := os.WriteFile(turnFile, []byte(strings.Join(turn, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	m := startMount(t, store)
	started := time.Now()
	// one shell per hundred sessions (a process start costs about 20 ms here), two at a time, each well
	// within the tool timeout on a loaded machine
	script := `printf '%s\n' "$@" | xargs -P 2 -n 50 sh -c 'for id; do cat "$0" >> "$id/append" || exit 255; done' "$0"`
	for lo := 0; lo < len(ids); lo += 100 {
		r := run(t, filepath.Join(m.dir, "sessions"), "sh", append([]string{"-c", script, turnFile}, ids[lo:min(lo+100, len(ids))]...)...)
		if r.code != 0 {
			t.Fatalf("appends: exit %d: %s\nlog:\n%s", r.code, r.stderr, m.log)
		}
	}
	appended := time.Since(started)
	t.Logf("appends in %v: VmHWM %d KiB", appended.Round(time.Millisecond), vmHWM(t, m.cmd.Process.Pid))
	var stat struct {
		Live    int `json:"live"`
		Pending int `json:"pending"`
	}
	waitFor(t, "every batch written", func() (bool, string) {
		b := readFile(t, filepath.Join(m.dir, "status.json"))
		if err := json.Unmarshal(b, &stat); err != nil {
			t.Fatalf("status.json: %v: %s", err, b)
		}
		return stat.Pending == 0, string(b)
	})
	if stat.Live != len(ids) {
		t.Fatalf("status.json: %d live sessions after appending to %d", stat.Live, len(ids))
	}
	var stats struct {
		LiveReleased int64 `json:"liveReleased"`
		LiveReloaded int64 `json:"liveReloaded"`
	}
	readStats := func() []byte {
		b := readFile(t, filepath.Join(m.dir, "stats.json"))
		if err := json.Unmarshal(b, &stats); err != nil {
			t.Fatalf("stats.json: %v: %s", err, b)
		}
		return bytes.TrimSpace(b)
	}
	waitFor(t, "the idle engines released", func() (bool, string) {
		b := readStats()
		return stats.LiveReleased >= int64(len(ids))/2, string(b)
	})
	idle := vmHWM(t, m.cmd.Process.Pid)

	// a second writer is refused: the mount kept every session's lease
	for i := 0; i < len(ids); i += max(1, len(ids)/10) {
		r := run(t, "", dshfsBin(t), "append", store, ids[i], turnFile)
		if r.code == 0 || !strings.Contains(string(r.stderr), "held by another process (session.lock), pid "+strconv.Itoa(m.cmd.Process.Pid)) {
			t.Errorf("dshfs append %s while the mount is its live writer: exit %d, stderr %s", ids[i], r.code, r.stderr)
		}
	}
	// sessions read back through the mount, each question asked of them by one process (jq names each
	// file), so the mount serves them one after another and each released engine reads its log back
	readStart := time.Now()
	read := func(script string, files []string, want func(i int) string) {
		t.Helper()
		r := run(t, filepath.Join(m.dir, "sessions"), "sh", append([]string{"-c", script, strconv.Itoa(st.Events)}, files...)...)
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", script, r.code, r.stderr)
		}
		got := strings.Split(strings.TrimSpace(string(r.stdout)), "\n")
		if len(got) != len(files) {
			t.Fatalf("%s: %d lines for %d files:\n%s", script, len(got), len(files), r.stdout)
		}
		for i, line := range got {
			if w := want(i); strings.Join(strings.Fields(line), " ") != w {
				t.Fatalf("%s: line %d is %q, want %q", script, i+1, line, w)
			}
		}
	}
	// every tenth session is live in the mount (the store's status.json counted them all), holds its stored
	// events and the appended turn, none pending, and its events.jsonl has them all in seq order: per file,
	// how far its seqs run in order from 0, how many are out of order, and how many are the turn's
	var status, events, sample []string
	for i := 0; i < len(ids); i += 10 {
		status, events, sample = append(status, ids[i]+"/status.json"), append(events, ids[i]+"/events.jsonl"), append(sample, ids[i])
	}
	read(`jq -r '"\(.id) \(.state) \(.events) \(.pending)"' "$@"`, status,
		func(i int) string { return fmt.Sprintf("%s live %d 0", sample[i], st.Events+len(turn)) })
	read(`jq -r '"\(input_filename) \(.seq)"' "$@" | awk -v n="$0" '$1 != f { if (f != "") print f, nx, bad, app; f = $1; nx = 0; bad = 0; app = 0 } { if ($2 == nx) nx++; else bad++; if ($2 >= n) app++ } END { print f, nx, bad, app }'`,
		events, func(i int) string {
			return fmt.Sprintf("%s/events.jsonl %d 0 %d", sample[i], st.Events+len(turn), len(turn))
		})
	readBack := time.Since(readStart)
	peak := vmHWM(t, m.cmd.Process.Pid)

	// and the appended events are on disk after the stored log, with their seqs (a row of text chunks
	// packs several: seq0 and one text each)
	for _, id := range ids {
		b := readFile(t, filepath.Join(project, id, "session.jsonl"))
		rows := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
		if len(rows) <= 1+stored {
			t.Fatalf("%s: %d rows on disk, want more than the %d stored", id, len(rows), 1+stored)
		}
		next := int64(st.Events)
		for _, row := range rows[1+stored:] {
			var e struct {
				Seq  *int64 `json:"seq"`
				Seq0 *int64 `json:"seq0"`
				Data struct {
					Texts []string `json:"texts"`
				} `json:"data"`
			}
			if err := json.Unmarshal(row, &e); err != nil {
				t.Fatalf("%s: row %s: %v", id, row, err)
			}
			switch {
			case e.Seq != nil && *e.Seq == next:
				next++
			case e.Seq0 != nil && *e.Seq0 == next && len(e.Data.Texts) > 0:
				next += int64(len(e.Data.Texts))
			default:
				t.Fatalf("%s: row on disk %s, want seq %d next", id, row, next)
			}
		}
		if want := int64(st.Events + len(turn)); next != want {
			t.Fatalf("%s: the rows on disk end before seq %d, want %d", id, next, want)
		}
	}
	b := readStats()
	t.Logf("%d sessions of %d events (%d KiB on disk each): appends in %v, read back in %v; VmHWM %d KiB idle, %d KiB after the reads; stats %s",
		len(ids), st.Events, len(log)>>10, appended.Round(time.Millisecond), readBack.Round(time.Millisecond), idle, peak, b)
	if peak > 256<<10 {
		t.Fatalf("the mount peaked at %d KiB (VmHWM): more than 256 MiB", peak)
	}
	if stats.LiveReloaded == 0 {
		t.Errorf("reading every released session back reloaded none: %s", b)
	}
}
