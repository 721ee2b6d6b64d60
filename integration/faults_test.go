package integration

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Faults and crashes of the live writer, on real mounts of the dshfs binary built with the dshfsfaults tag:
// its JSONL backend reads $DSHFS_FAULTS_FILE before every durable write step (`fail OP` makes the step
// fail with EIO, `kill OP` SIGKILLs the process there).

var soakCycles = flag.Int("soak.cycles", 50, "crash-soak cycles (the README's long run uses 200)")

// startFaultMount mounts with the fault-injecting binary; faults are armed by writing to the returned file.
func startFaultMount(t *testing.T, faults string, args ...string) *mountProc {
	t.Helper()
	mnt := freshMountpoint(t)
	return startMountAt(t, mnt, []string{"env", "DSHFS_FAULTS_FILE=" + faults},
		append(append([]string{faultsBin(t), "mount"}, args...), mnt))
}

func arm(t *testing.T, faults, spec string) {
	t.Helper()
	if err := os.WriteFile(faults, []byte(spec+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// artifactOf is the one transcript of session id in a JSONL store.
func artifactOf(t *testing.T, store, id string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(store, "*", id, "session.jsonl*"))
	var out []string
	for _, p := range m {
		if strings.HasSuffix(p, ".jsonl") || strings.HasSuffix(p, ".jsonl.zstd") {
			out = append(out, p)
		}
	}
	if len(out) != 1 {
		t.Fatalf("transcript of %s: %v", id, m)
	}
	return out[0]
}

// TestWriteInjectedFaults: a write or fsync that fails makes flush return EIO with the reason in
// status.json; no accepted event is lost, the artifact is byte for byte its last durable state, and a
// flush after the fault clears writes everything.
func TestWriteInjectedFaults(t *testing.T) {
	t.Parallel()
	for _, op := range []string{"write", "write-half", "fsync"} {
		t.Run(op, func(t *testing.T) {
			t.Parallel()
			store, cfg := emptyStore(t, "zstd")
			faults := filepath.Join(t.TempDir(), "faults")
			m := startFaultMount(t, faults, "--config", cfg, store)
			s := newSessionOnMount(t, m.dir, "s")
			turn := turnLines(1, 0, false)
			mustAppend(t, s, turn)
			mustCtl(t, filepath.Join(s, "ctl"), "flush")
			art := artifactOf(t, store, "s")
			durable := readFile(t, art)
			arm(t, faults, "fail "+op)
			turn2 := turnLines(2, int64(len(turn)), false)
			mustAppend(t, s, turn2)
			wantErrno(t, "flush under a failing "+op, ctl(t, filepath.Join(s, "ctl"), "flush"), syscall.EIO)
			st := statusOf(t, s)
			if st.LastError == nil || st.LastError.Errno == nil || *st.LastError.Errno != "EIO" || !strings.Contains(st.LastError.Message, "input/output error") {
				t.Errorf("lastError %+v", st.LastError)
			}
			if st.Pending != int64(len(turn2)) || st.Events != int64(2*len(turn)) {
				t.Errorf("accepted events after the failed flush: %+v", st)
			}
			if got := readFile(t, art); string(got) != string(durable) {
				t.Fatalf("the artifact is not its last durable state after the failed flush (%d bytes, want %d)", len(got), len(durable))
			}
			arm(t, faults, "")
			mustCtl(t, filepath.Join(s, "ctl"), "flush")
			if st := statusOf(t, s); st.Pending != 0 || st.DurableSeq != int64(2*len(turn)-1) {
				t.Errorf("after the fault cleared: %+v", st)
			}
			stopAndVerify(t, m, store)
		})
	}
}

// TestWriteENOSPC: a store on a full filesystem (a small tmpfs) fails flush with EIO and the reason; the
// artifact keeps its last durable bytes; once space is freed the same events are written.
func TestWriteENOSPC(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=512k"); err != nil {
		t.Fatalf("mount a tmpfs (the tests run as root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	store := filepath.Join(dir, "sessions")
	if err := os.Mkdir(store, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, "[writer]\ncompression = \"none\"\nbatch_window = \"1h\"\n")
	m := startMount(t, "--config", cfg, store)
	s := newSessionOnMount(t, m.dir, "s")
	turn := turnLines(1, 0, false)
	mustAppend(t, s, turn)
	mustCtl(t, filepath.Join(s, "ctl"), "flush")
	art := artifactOf(t, store, "s")
	durable := readFile(t, art)
	// fill the filesystem
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	big := make([]string, 0, 200)
	base := int64(len(turn))
	for i := 0; i < 200; i++ {
		big = append(big, fmt.Sprintf(`{"type":"plugin/note","data":{"i":%d,"pad":"%s"},"ignorable":true}`, base+int64(i), strings.Repeat("x", 100)))
	}
	mustAppend(t, s, big)
	wantErrno(t, "flush on a full filesystem", ctl(t, filepath.Join(s, "ctl"), "flush"), syscall.EIO)
	if st := statusOf(t, s); st.LastError == nil || !strings.Contains(st.LastError.Message, "no space left on device") || st.Pending != 200 {
		t.Errorf("status after ENOSPC: %+v %+v", st, st.LastError)
	}
	if got := readFile(t, art); string(got) != string(durable) {
		t.Fatalf("the artifact changed on a failed flush (%d bytes, want %d)", len(got), len(durable))
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	mustCtl(t, filepath.Join(s, "ctl"), "flush")
	if n := len(lines(readFile(t, filepath.Join(s, "events.jsonl")))); n != len(turn)+200 {
		t.Errorf("%d events after the retry, want %d", n, len(turn)+200)
	}
	m.stop(t)
	cli(t, 0, "check", store)
}

// soakEvent is the accepted stream of the soak: log-only events numbered by cycle and index.
func soakEvent(cycle, i int) string {
	return fmt.Sprintf(`{"type":"plugin/soak","data":{"cycle":%d,"i":%d},"ignorable":true}`, cycle, i)
}

// TestCrashSoak: cycles of (append in a loop, random flushes, SIGKILL, remount, resume). Half of the kills
// come from outside at a random moment, half from the backend hook inside a batch — after a partial write,
// before the fsync, before the acknowledgement. After each resume the log is an in-order prefix of the
// written stream that holds every acknowledged event and nothing else (plus the resume's end-seeds), and
// `dshfs check` passes. A write that failed because the mount died is an unknown outcome, not a refusal:
// `cat >> append` fails when its close fails too, so its events may have been accepted and then written
// by a batch (batch_window) before the kill that failed the close's FLUSH. -soak.cycles sets the number
// of cycles (50 in CI).
func TestCrashSoak(t *testing.T) {
	t.Parallel()
	store, _ := emptyStore(t, "zstd")
	// a mount killed mid-write leaves its last write without the lease file's stamp, so for the quiet
	// period it looks like another process's change (TestWriteLeaseHeld and TestInteropLiveWriter test
	// that refusal); this test resumes at once, where a user would first acknowledge it with rescan
	cfg := writeConfig(t, "[writer]\ncompression = \"zstd\"\nbatch_window = \"50ms\"\nforeign_quiet = \"0s\"\n")
	faults := filepath.Join(t.TempDir(), "faults")
	cli(t, 0, "create", store, "soak")
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	t.Logf("crash soak: %d cycles", *soakCycles)
	var want []string // the log's lines as they must be after each resume (data only)
	points := []string{"write", "write-half", "fsync", "ack"}
	hookKills, lost, acknowledged := 0, 0, 0
	for cycle := 0; cycle < *soakCycles; cycle++ {
		m := startFaultMount(t, faults, "--config", cfg, store)
		s := filepath.Join(m.dir, "sessions", "soak")
		if cycle > 0 {
			mustCtl(t, filepath.Join(s, "ctl"), "resume")
			if len(want) == 0 || want[len(want)-1] != "session/end-seed" {
				want = append(want, "session/end-seed") // a log already ending in one gets none
			}
			checkSoak(t, s, want, cycle)
		}
		hookKill := cycle%2 == 1
		if hookKill {
			arm(t, faults, "kill "+points[rng.Intn(len(points))])
		}
		acked := 0 // events of this cycle known durable
		accepted := 0
		unknown := 0 // events of the write the mount died under: stored or not
		killed := false
		for step := 0; step < 40 && !killed; step++ {
			n := 1 + rng.Intn(5)
			var batch []string
			for i := 0; i < n; i++ {
				batch = append(batch, soakEvent(cycle, accepted+i))
			}
			if r := writeAppend(t, s, batch); r.code != 0 {
				killed, unknown = true, n // the mount died under the write
				break
			}
			accepted += n
			if rng.Intn(3) == 0 {
				if r := ctl(t, filepath.Join(s, "ctl"), "flush"); r.code == 0 {
					acked = accepted
				} else {
					killed = true
				}
			}
			if !hookKill && rng.Intn(12) == 0 {
				break
			}
		}
		if hookKill && killed {
			// the hook killed the mount under a write: let its exit be observed before counting it (on a
			// loaded machine the failed write returns before the process is reaped)
			select {
			case <-m.done:
			case <-time.After(5 * time.Second):
			}
		}
		if !m.exited() {
			killMount(t, m)
		} else {
			hookKills++ // the backend hook killed it inside a batch
			_ = syscall.Unmount(m.dir, syscall.MNT_DETACH)
		}
		arm(t, faults, "")
		// the stored log: everything before this cycle, then a prefix of this cycle's stream holding at
		// least the acknowledged events
		got := soakLines(t, cli(t, 0, "cat", store, "soak"))
		if len(got) < len(want)+acked || len(got) > len(want)+accepted+unknown {
			t.Fatalf("cycle %d: %d events stored, want between %d and %d (acknowledged %d, accepted %d, %d more of a write the mount died under)",
				cycle, len(got), len(want)+acked, len(want)+accepted+unknown, acked, accepted, unknown)
		}
		base := len(want)
		lost += max(0, accepted-(len(got)-base))
		acknowledged += acked
		for i := base; i < len(got); i++ {
			want = append(want, fmt.Sprintf("plugin/soak %d %d", cycle, i-base))
		}
		want = want[:len(got)]
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("cycle %d: stored event %d is %q, want %q", cycle, i, got[i], want[i])
			}
		}
	}
	t.Logf("crash soak: %d cycles, %d killed by the hook inside a batch, %d acknowledged events all kept, %d accepted but unacknowledged events lost to the kills, %d events stored",
		*soakCycles, hookKills, acknowledged, lost, len(want))
	if hookKills < *soakCycles/4 {
		t.Errorf("only %d of %d cycles were killed inside a batch", hookKills, *soakCycles)
	}
	cli(t, 0, "check", store)
	harnessAgrees(t, store)
}

// soakLines reduces a stored log to "type cycle i" (resume's end-seeds to their type) for comparison.
func soakLines(t *testing.T, events []byte) []string {
	t.Helper()
	var out []string
	for _, l := range lines(events) {
		var e struct {
			Type string
			Data struct{ Cycle, I int }
		}
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatal(err)
		}
		if e.Type == "plugin/soak" {
			out = append(out, fmt.Sprintf("%s %d %d", e.Type, e.Data.Cycle, e.Data.I))
		} else {
			out = append(out, e.Type)
		}
	}
	return out
}

func checkSoak(t *testing.T, s string, want []string, cycle int) {
	t.Helper()
	got := soakLines(t, readFile(t, filepath.Join(s, "events.jsonl")))
	if d := diff(got, want); d != "" {
		t.Fatalf("cycle %d after resume: %s", cycle, d)
	}
}
