package integration

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestInotifyFollows: with polling and the kernel's caches set to an hour, a mount still shows an external
// append (stat size and read) and sessions created by another process, in an existing project and in a
// new one — inotify told it. Without inotify (DSHFS_NO_INOTIFY) the mount says so in its log, and with a
// short refresh_interval polling finds the same changes.
func TestInotifyFollows(t *testing.T) {
	t.Parallel()
	t.Run("inotify", func(t *testing.T) {
		t.Parallel()
		cfg := writeConfig(t, "[fuse]\nrefresh_interval = \"1h\"\nattr_timeout = \"1h\"\nentry_timeout = \"1h\"\n")
		followExternalWriters(t, cfg, nil)
	})
	t.Run("polling", func(t *testing.T) {
		t.Parallel()
		cfg := writeConfig(t, "[fuse]\nrefresh_interval = \"100ms\"\n")
		m := followExternalWriters(t, cfg, []string{"env", "DSHFS_NO_INOTIFY=1"})
		if !strings.Contains(m.log.String(), "inotify disabled by DSHFS_NO_INOTIFY") {
			t.Errorf("the log does not say it polls:\n%s", m.log.String())
		}
	})
}

func followExternalWriters(t *testing.T, cfg string, prefix []string) *mountProc {
	store, _ := emptyStore(t, "zstd")
	cli(t, 0, "create", "--cwd", "/p", store, "ext")
	mnt := freshMountpoint(t)
	m := startMountAt(t, mnt, prefix, []string{dshfsBin(t), "mount", "--config", cfg, store, mnt})
	events := filepath.Join(m.dir, "sessions", "ext", "events.jsonl")
	size := func() int64 {
		fi, err := os.Stat(events)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	if size() != 0 {
		t.Fatalf("a header-only session's events.jsonl is %d bytes", size())
	}
	in := filepath.Join(t.TempDir(), "turn.jsonl")
	if err := os.WriteFile(in, []byte(strings.Join(turnLines(1, 0, false), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, 0, "append", store, "ext", in) // another process writes the artifact
	waitFor(t, "the mount to show the external append", func() (bool, string) {
		n := size()
		return n > 0, strconv.FormatInt(n, 10)
	})
	if got := len(lines(readFile(t, events))); got != len(turnLines(1, 0, false)) {
		t.Errorf("events.jsonl holds %d lines after the append", got)
	}
	for _, c := range []struct{ id, cwd string }{{"born", "/p"}, {"elsewhere", "/new/project"}} {
		cli(t, 0, "create", "--cwd", c.cwd, store, c.id)
		waitFor(t, "the mount to list "+c.id+", created by another process", func() (bool, string) {
			_, err := os.Stat(filepath.Join(m.dir, "sessions", c.id, "status.json"))
			return err == nil, "not listed"
		})
	}
	m.stop(t)
	return m
}

// TestStableNamesFollowChanges: while inotify watches the store, the kernel keeps a session's directory and
// its view files, names and attributes, for a minute (StableTimeouts), so a repeated walk costs no lookups;
// a change must still show at once, well within the minute. A session refused by an external append stops
// serving events.jsonl (EIO, with the reason in the log, as a refused session's views always do: not the
// old size from the kernel's cache) and stops listing it; a session deleted by another process loses its
// directory.
func TestStableNamesFollowChanges(t *testing.T) {
	t.Parallel()
	store, cfg := emptyStore(t, "none")
	cli(t, 0, "create", "--config", cfg, "--cwd", "/p", store, "x")
	cli(t, 0, "create", "--config", cfg, "--cwd", "/p", store, "y")
	m := startMount(t, "--read-only", "--config", cfg, store)
	events := filepath.Join(m.dir, "sessions", "x", "events.jsonl")
	if _, err := os.Stat(events); err != nil {
		t.Fatal(err)
	}
	arts, _ := filepath.Glob(filepath.Join(store, "*", "x", "session.jsonl"))
	if len(arts) != 1 {
		t.Fatalf("artifact %v", arts)
	}
	f, err := os.OpenFile(arts[0], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"type":"plugin/unknown","seq":0,"time":1,"data":null}` + "\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	waitFor(t, "events.jsonl of the refused session to fail", func() (bool, string) {
		_, err := os.Stat(events)
		return errors.Is(err, syscall.EIO), fmt.Sprint(err)
	})
	if ls := string(mustRun(t, "ls", filepath.Join(m.dir, "sessions", "x"))); strings.Contains(ls, "events.jsonl") {
		t.Errorf("the refused session still lists events.jsonl:\n%s", ls)
	}
	// the mount logs the reason before it answers EIO, but its stderr reaches m.log through a pipe
	waitFor(t, "the log to say why events.jsonl fails", func() (bool, string) {
		return strings.Contains(m.log.String(), "unknown to this harness"), m.log.String()
	})
	if _, err := os.Stat(filepath.Join(m.dir, "sessions", "x", "status.json")); err != nil {
		t.Errorf("the refused session's status.json: %v", err)
	}

	dir := filepath.Join(m.dir, "sessions", "y")
	if _, err := os.Stat(filepath.Join(dir, "events.jsonl")); err != nil {
		t.Fatal(err)
	}
	yArt, _ := filepath.Glob(filepath.Join(store, "*", "y"))
	if len(yArt) != 1 {
		t.Fatalf("session directory %v", yArt)
	}
	if err := os.RemoveAll(yArt[0]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted session's directory to go", func() (bool, string) {
		_, err := os.Stat(dir)
		return os.IsNotExist(err), fmt.Sprint(err)
	})
	m.stop(t)
}
