package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMountOpenAfterChange: a file opened after the store changed, while the kernel still holds the size it
// was told before the change, must read one consistent snapshot (the old bytes or the new ones), never
// the new rendering cut to the old size. Long kernel timeouts and no watcher pass (refresh_interval 1h)
// make the window deterministic; with the defaults the same happens whenever a read falls between a
// change and the next watcher pass.
func TestMountOpenAfterChange(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	root := filepath.Join(base, "sessions")
	const id = "grows"
	mustRun(t, gensessionBin(t), "-mode", "none", "-id", id, root, "50") // 93 events
	cfg := filepath.Join(base, "dshfs.toml")
	if err := os.WriteFile(cfg, []byte("[fuse]\nentry_timeout = \"30s\"\nattr_timeout = \"30s\"\nrefresh_interval = \"1h\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mnt := mountStore(t, root, "--config", cfg)
	file := filepath.Join(mnt, "sessions", id, "status.json")
	old := cli(t, 0, "cat", "--view", "status", root, id)
	if got := mustRun(t, "cat", file); !bytes.Equal(got, old) {
		t.Fatalf("status.json before the change differs from the CLI")
	}
	mustRun(t, "stat", file)                                                       // the kernel now caches its size
	mustRun(t, gensessionBin(t), "-mode", "none", "-id", id, "-append", root, "1") // 139 events: a longer status
	cur := cli(t, 0, "cat", "--view", "status", root, id)
	if len(cur) == len(old) {
		t.Fatalf("the change did not alter the size of status.json; the test needs it to")
	}
	if got := mustRun(t, "cat", file); !bytes.Equal(got, old) && !bytes.Equal(got, cur) {
		t.Errorf("status.json read right after the store changed is neither the old nor the new view:\n got %q\n old %q\n new %q", got, old, cur)
	}
}

// TestMountFollow checks that the mount follows a store that another process writes to: `tail -f` on
// events.jsonl shows the appended events, and a new session appears in sessions/.
func TestMountFollow(t *testing.T) {
	for _, mode := range []string{"zstd", "none"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			root := filepath.Join(t.TempDir(), "sessions")
			const id = "follow-me"
			mustRun(t, gensessionBin(t), "-mode", mode, "-id", id, root, "50")
			m := startMount(t, root)
			mnt := m.dir
			file := filepath.Join(mnt, "sessions", id, "events.jsonl")
			before := cli(t, 0, "cat", "--view", "events", root, id)

			// tail -n 0 -f prints only what is appended after it opened the file
			var out syncBuffer
			tail := exec.Command("tail", "-n", "0", "-f", file)
			tail.Stdout = &out
			var tailErr syncBuffer
			tail.Stderr = &tailErr
			if err := tail.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = tail.Process.Signal(syscall.SIGTERM)
				_ = tail.Wait()
			})
			waitFor(t, "tail to open "+file, func() (bool, string) {
				return openedBy(tail.Process.Pid, file), tailErr.String()
			})

			mustRun(t, gensessionBin(t), "-mode", mode, "-id", id, "-append", root, "1")
			appended := time.Now()
			after := cli(t, 0, "cat", "--view", "events", root, id)
			if !bytes.HasPrefix(after, before) || len(after) == len(before) {
				t.Fatalf("gensession -append did not extend the log")
			}
			newLines := after[len(before):]
			last := lines(newLines)[len(lines(newLines))-1]
			if !bytes.Contains(last, []byte(`"type":"turn/end"`)) {
				t.Fatalf("the appended turn does not end with turn/end: %s", last)
			}
			// polled every 10 ms (not waitFor's backoff) so the latency is measured to that resolution
			var latency time.Duration
			for !strings.Contains(out.String(), string(last)) {
				if time.Since(appended) > deadline {
					t.Fatalf("tail -f did not show the appended turn/end within %v; stdout %d bytes, stderr: %s; mount log:\n%s",
						deadline, len(out.String()), tailErr.String(), m.log)
				}
				time.Sleep(10 * time.Millisecond)
			}
			latency = time.Since(appended)
			t.Logf("%s store: the appended turn/end reached tail -f %v after the appender exited", mode, latency)
			if path := os.Getenv("DSHFS_FOLLOW_LATENCY_OUT"); path != "" {
				f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(f, "%s\t%.3f\n", mode, latency.Seconds())
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
			}
			// tail saw exactly the appended events, nothing more, nothing twice
			if got := out.String(); got != string(newLines) {
				t.Errorf("tail -f printed\n%s\nwant the appended events\n%s", got, newLines)
			}
			if s := tailErr.String(); s != "" {
				t.Errorf("tail stderr: %s", s)
			}

			// a fresh read sees the grown log too: cat, stat, status.json and the events/ directory
			wantStatus := cli(t, 0, "cat", "--view", "status", root, id)
			sdir := filepath.Join(mnt, "sessions", id)
			waitFor(t, "cat, stat, status.json and events/ to show the appended turn", func() (bool, string) {
				got := mustRun(t, "cat", file)
				size := strings.TrimSpace(string(mustRun(t, "stat", "-c", "%s", file)))
				status := mustRun(t, "cat", filepath.Join(sdir, "status.json"))
				n := len(lines(mustRun(t, "ls", filepath.Join(sdir, "events"))))
				return bytes.Equal(got, after) && size == fmt.Sprint(len(after)) && bytes.Equal(status, wantStatus) && n == len(lines(after)),
					fmt.Sprintf("cat %d bytes, stat %s, want %d; %d event files, want %d; status.json\n%s\nwant\n%s",
						len(got), size, len(after), n, len(lines(after)), status, wantStatus)
			})

			// a session created by another process appears in the listing
			const newID = "created-later"
			mustRun(t, gensessionBin(t), "-mode", mode, "-id", newID, root, "10")
			waitFor(t, newID+" to appear in ls "+mnt+"/sessions", func() (bool, string) {
				ls := string(mustRun(t, "ls", filepath.Join(mnt, "sessions")))
				return strings.Contains(ls, newID+"\n"), ls
			})
			want := cli(t, 0, "cat", "--view", "events", root, newID)
			if got := mustRun(t, "cat", filepath.Join(mnt, "sessions", newID, "events.jsonl")); !bytes.Equal(got, want) {
				t.Errorf("new session's events.jsonl differs from the CLI view")
			}

			// and one deleted from the store disappears (listing and lookup)
			if err := os.RemoveAll(filepath.Join(root, "--home-dev-bench--", newID)); err != nil {
				t.Fatal(err)
			}
			waitFor(t, newID+" to disappear from "+mnt+"/sessions", func() (bool, string) {
				ls := string(mustRun(t, "ls", filepath.Join(mnt, "sessions")))
				r := run(t, "", "stat", filepath.Join(mnt, "sessions", newID))
				return !strings.Contains(ls, newID+"\n") && strings.Contains(string(r.stderr), "No such file or directory"), ls + string(r.stderr)
			})
		})
	}
}
