package integration

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dshfs/dshfs/internal/demo"
	"github.com/dshfs/dshfs/internal/fixtures"
)

// busyMessage is what dshfs logs while the mount is busy: at the first failed unmount, then 5 s later,
// then at doubling intervals.
const busyMessage = "still serving, retrying every second"

// holdOpen starts a shell that keeps path open on fd 3 until release is called, and waits until it has.
func holdOpen(t *testing.T, path string) (release func()) {
	t.Helper()
	cmd := exec.Command("sh", "-c", `exec 3<"$1"; read _`, "sh", path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	released := false
	release = func() {
		if released {
			return
		}
		released = true
		stdin.Close()
		<-done
	}
	t.Cleanup(release)
	waitFor(t, "the reader to open "+path, func() (bool, string) {
		select {
		case <-done:
			t.Fatalf("the reader exited: %s", stderr.String())
		default:
		}
		return openedBy(cmd.Process.Pid, path), stderr.String()
	})
	return release
}

// TestMountBusyUnmount: SIGTERM while a reader holds a file open keeps the mount serving and retrying;
// closing the reader lets it unmount and exit 0.
func TestMountBusyUnmount(t *testing.T) {
	t.Parallel()
	store := fixtures.CopyTree(t, fixtures.Path(t, "generated", "raw"))
	m := startMount(t, store)
	name := fixtures.Sessions(t, store)[0].EncodedID
	release := holdOpen(t, filepath.Join(m.dir, "sessions", name, "events.jsonl"))

	m.signal(t, syscall.SIGTERM)
	// two reports, 5 s apart: the mount stayed busy and served for at least that long
	waitFor(t, "two busy reports in the mount log", func() (bool, string) {
		return strings.Count(m.log.String(), busyMessage) >= 2, m.log.String()
	})
	if m.exited() {
		t.Fatalf("dshfs exited while busy; log:\n%s", m.log)
	}
	if _, ok := mountEntry(t, m.dir); !ok {
		t.Fatalf("mount gone from /proc/mounts while busy")
	}
	if got := mustRun(t, "cat", filepath.Join(m.dir, "README")); !strings.HasPrefix(string(got), "dshfs") {
		t.Errorf("README after SIGTERM: %q", got)
	}
	want := cli(t, 0, "cat", "--view", "status", store, idOfName(t, store, name))
	if got := mustRun(t, "cat", filepath.Join(m.dir, "sessions", name, "status.json")); string(got) != string(want) {
		t.Errorf("status.json after SIGTERM differs from the CLI")
	}

	release()
	m.waitExit(t)
	if e, ok := mountEntry(t, m.dir); ok {
		t.Fatalf("still mounted after exit: %s", e)
	}
	if !strings.Contains(m.log.String(), "unmounted") {
		t.Errorf("the log does not record the unmount:\n%s", m.log)
	}
}

// TestMountDetach: a second signal while busy detaches the mount lazily; dshfs exits 0 and nothing is
// left in /proc/mounts, even though the reader still holds its descriptor.
func TestMountDetach(t *testing.T) {
	t.Parallel()
	store := fixtures.CopyTree(t, fixtures.Path(t, "generated", "zstd"))
	m := startMount(t, store)
	name := fixtures.Sessions(t, store)[0].EncodedID
	holdOpen(t, filepath.Join(m.dir, "sessions", name, "events.jsonl"))

	m.signal(t, syscall.SIGTERM)
	waitFor(t, "a busy retry in the mount log", func() (bool, string) {
		return strings.Contains(m.log.String(), busyMessage), m.log.String()
	})
	m.signal(t, syscall.SIGINT)
	m.waitExit(t)
	if e, ok := mountEntry(t, m.dir); ok {
		t.Fatalf("still mounted after detach: %s", e)
	}
	if !strings.Contains(m.log.String(), "detaching") {
		t.Errorf("the log does not record the detach:\n%s", m.log)
	}
}

// TestMountReadOnly: on a --read-only mount every write fails with EROFS and the store is unchanged.
func TestMountReadOnly(t *testing.T) {
	t.Parallel()
	store := fixtures.CopyTree(t, fixtures.Path(t, "generated", "raw"))
	before := storeSum(t, store)
	mnt := mountStore(t, store, "--read-only")
	name := fixtures.Sessions(t, store)[0].EncodedID
	s := filepath.Join(mnt, "sessions", name)
	ev := filepath.Join(s, "events.jsonl")
	for _, c := range []struct{ what, script string }{
		{"create a file", `echo x > "$S/new"`},
		{"append to events.jsonl", `echo x >> "$EV"`},
		{"truncate events.jsonl", `: > "$EV"`},
		{"touch an existing file", `touch "$EV"`},
		{"touch a new file", `touch "$S/new"`},
		{"mkdir a session", `mkdir "$M/sessions/new-session"`},
		{"mkdir in a session", `mkdir "$S/new"`},
		{"rm a view", `rm -f "$EV"`},
		{"rmdir a session", `rmdir "$S/events"`},
		{"rm -r a session", `rm -rf "$S"`},
		{"mv a view", `mv "$EV" "$S/renamed.jsonl"`},
		{"chmod a view", `chmod 644 "$EV"`},
		{"ln -s", `ln -s events.jsonl "$S/link"`},
		{"ln (hard)", `ln "$EV" "$S/hard"`},
		{"cp into the root", `cp /etc/hostname "$M/"`},
		{"write status.json", `echo '{}' > "$M/status.json"`},
	} {
		r := runScript(t, c.script, "M="+mnt, "S="+s, "EV="+ev)
		if r.code == 0 || !strings.Contains(string(r.stderr), "Read-only file system") {
			t.Errorf("%s: exit %d, stderr %q; want EROFS", c.what, r.code, r.stderr)
		}
	}
	want := cli(t, 0, "cat", "--view", "events", store, idOfName(t, store, name))
	if got := mustRun(t, "cat", ev); string(got) != string(want) {
		t.Errorf("events.jsonl changed")
	}
	sameSums(t, before, storeSum(t, store))
}

// TestMountDemo: `dshfs mount --demo MNT` shows the demo store's six sessions, its spill file served.
func TestMountDemo(t *testing.T) {
	t.Parallel()
	m := startMount(t, "--demo")
	got := string(mustRun(t, "ls", filepath.Join(m.dir, "sessions")))
	want := strings.Join([]string{demo.Clean, demo.Compacted, demo.Crashed, demo.ForkChild, demo.ForkParent, demo.Spilled}, "\n") + "\n"
	if got != want {
		t.Fatalf("demo sessions:\n%s\nwant\n%s", got, want)
	}
	if got := string(mustRun(t, "ls", filepath.Join(m.dir, "sessions", demo.Spilled, "spill"))); got != "0000000000-call-1\nindex.json\n" {
		t.Errorf("demo spill dir:\n%s", got)
	}
	if got := mustRun(t, "cat", filepath.Join(m.dir, "sessions", demo.Spilled, "spill", "0000000000-call-1")); !strings.HasPrefix(string(got), "build step 001:") {
		t.Errorf("demo spill file: %.80q", got)
	}
	if got := mustRun(t, "cat", filepath.Join(m.dir, "sessions", demo.ForkChild, "parent")); string(got) != demo.ForkParent+"\n" {
		t.Errorf("demo fork child parent file: %q", got)
	}
	var st struct{ Sessions int }
	status := mustRun(t, "jq", "-c", ".", filepath.Join(m.dir, "status.json"))
	if err := json.Unmarshal(status, &st); err != nil || st.Sessions != 6 {
		t.Errorf("demo status.json: %s (%v)", status, err)
	}
}

// runScript runs a shell script with extra environment variables, bounded like every tool run.
func runScript(t *testing.T, script string, env ...string) result {
	t.Helper()
	return run(t, "", "env", append(append(env, "sh", "-c"), script)...)
}

// idOfName returns the id behind a generated fixture's directory name: those ids are plain (upstream
// encodeSegment leaves them as they are), which the listing confirms.
func idOfName(t *testing.T, store, name string) string {
	t.Helper()
	for _, e := range listStore(t, store) {
		if e.ID == name {
			return e.ID
		}
	}
	t.Fatalf("no listed id for %s", name)
	return ""
}
