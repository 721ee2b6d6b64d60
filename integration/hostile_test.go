package integration

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/harness"
)

// TestHostileStore: a store whose artifacts are a FIFO, a link to /dev/zero, a link to a file outside the
// root, a dangling link and a zstd decompression bomb. `dshfs ls` and `dshfs check` (a non-race binary
// under `ulimit -v 1G`) answer within the deadline with each session refused for its reason, and the mount
// lists them, serves their status.json, and serves no byte of a file outside the root.
func TestHostileStore(t *testing.T) {
	t.Parallel()
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte(`{"type":"session","version":0,"id":"leak","createdAt":1,"cwd":"/p","delegationDepth":0}`+"\nCONFIDENTIAL-CONTENT\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mode     jsonl.Compression
		sessions map[string]func(path string) error
		want     map[string]string
	}{
		{jsonl.None, map[string]func(string) error{
			"fifo":     func(p string) error { return syscall.Mkfifo(p, 0o600) },
			"zero":     func(p string) error { return os.Symlink("/dev/zero", p) },
			"leak":     func(p string) error { return os.Symlink(outside, p) },
			"dangling": func(p string) error { return os.Symlink(p+".gone", p) },
		}, map[string]string{
			"fifo": "is not a regular file (a FIFO)", "zero": "resolves outside the store root",
			"leak": "resolves outside the store root", "dangling": "dangling",
		}},
		{jsonl.Zstd, map[string]func(string) error{
			"bomb": func(p string) error {
				header := jsonl.EncodeFrame(nil, []byte(`{"type":"session","version":0,"id":"bomb","createdAt":1,"cwd":"/p","delegationDepth":0}`+"\n"))
				return os.WriteFile(p, append(header, jsonl.Bomb(16384)...), 0o600) // 2 GiB of zeros in 64 KiB
			},
		}, map[string]string{"bomb": "over max_frame_bytes (268435456)"}},
	} {
		t.Run(string(c.mode), func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "sessions")
			for id, make := range c.sessions {
				dir := filepath.Join(store, "--p--", id)
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := make(filepath.Join(dir, "session"+c.mode.Suffix())); err != nil {
					t.Fatal(err)
				}
			}
			// the CLI, in at most 1 GiB of address space, within the run deadline
			r := runLimited(t, "check", "--json", store)
			if r.code != 1 {
				t.Fatalf("check: exit %d %s", r.code, r.stderr)
			}
			got := map[string]string{}
			for _, l := range lines(r.stdout) {
				var e struct{ ID, Kind, Message string }
				if err := json.Unmarshal(l, &e); err != nil {
					t.Fatal(err)
				}
				got[e.ID] = e.Message
			}
			for id, want := range c.want {
				if !strings.Contains(got[id], want) {
					t.Errorf("check of %s: %q, want %q", id, got[id], want)
				}
			}
			if r := runLimited(t, "ls", store); r.code != 0 || len(lines(r.stdout)) != len(c.want) {
				t.Errorf("ls: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			// the mount: every session listed, status.json served, nothing read through a link out of the root
			m := startMount(t, "--read-only", store)
			for id, want := range c.want {
				s := filepath.Join(m.dir, "sessions", id)
				var st struct {
					State   string
					Refusal struct{ Message string }
				}
				if err := json.Unmarshal(readFile(t, filepath.Join(s, "status.json")), &st); err != nil {
					t.Fatal(err)
				}
				if st.State != "refused" || !strings.Contains(st.Refusal.Message, want) {
					t.Errorf("%s/status.json: %+v, want refused with %q", id, st, want)
				}
				if b, err := os.ReadFile(filepath.Join(s, "raw.jsonl")); err == nil && strings.Contains(string(b), "CONFIDENTIAL-CONTENT") {
					t.Errorf("%s/raw.jsonl served bytes from outside the store root", id)
				}
			}
			// (the refusal names the link's target path, so grep the file's content, not its name)
			if r := run(t, "", "grep", "-r", "-l", "CONFIDENTIAL-CONTENT", m.dir); r.code != 1 {
				t.Errorf("grep -r found the outside file through the mount: exit %d %s", r.code, r.stdout)
			}
		})
	}
}

// runtimeInitOOM matches the Go runtime failing to reserve its first heap arena under RLIMIT_AS, which
// happens now and then at start-up whatever the program does (a few MB in use): it says nothing about what
// dshfs would allocate, so such a run is repeated. An out-of-memory with more in use is a real failure.
var runtimeInitOOM = regexp.MustCompile(`runtime: out of memory: cannot allocate \d+-byte block \((\d+) in use\)`)

// threadStartFailed matches the runtime failing to start a thread under RLIMIT_AS: with cgo linked in,
// each thread's stack is reserved by pthread_create (8 MiB, the stack limit), and a busy machine makes the
// runtime start more of them while goroutines wait in system calls. Like the failure above it says nothing
// of what dshfs allocated, so such a run is repeated too.
var threadStartFailed = regexp.MustCompile(`runtime/cgo: pthread_create failed: Resource temporarily unavailable|fatal error: runtime: cannot allocate memory`)

// runLimited runs dshfs with `ulimit -v 1G` (1 GiB of address space), retrying start-up and thread-start
// failures of the runtime itself.
func runLimited(t *testing.T, args ...string) result {
	t.Helper()
	for attempt := 0; ; attempt++ {
		r := run(t, "", "bash", append([]string{"-c", `ulimit -v 1048576; exec "$@"`, "bash", dshfsBin(t)}, args...)...)
		if threadStartFailed.Match(r.stderr) && attempt < 4 {
			continue
		}
		m := runtimeInitOOM.FindSubmatch(r.stderr)
		if m == nil || attempt == 4 {
			return r
		}
		if inUse, _ := strconv.Atoi(string(m[1])); inUse > 64<<20 {
			return r
		}
	}
}

// TestMountMistakes: a mountpoint that is the store, inside it or containing it, a regular file, or a
// non-empty directory is refused with exit 2 before anything is mounted (nothing left in /proc/mounts);
// a mountpoint left dead by a SIGKILLed dshfs is cleared and mounted again.
func TestMountMistakes(t *testing.T) {
	t.Parallel()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(base, "store")
	if err := os.MkdirAll(filepath.Join(store, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "file")
	full := filepath.Join(base, "full")
	os.WriteFile(file, []byte("x"), 0o644)
	os.MkdirAll(full, 0o755)
	os.WriteFile(filepath.Join(full, "keep.txt"), []byte("x"), 0o644)
	for _, c := range []struct{ what, store, mnt, want string }{
		{"the store itself", store, store, "is the store itself"},
		{"inside the store", store, filepath.Join(store, "sub"), "lies inside the store"},
		{"containing the store", store, base, "lies inside the mountpoint"},
		{"a regular file", store, file, "is not a directory"},
		{"a non-empty directory", store, full, "is not empty"},
	} {
		r := run(t, "", dshfsBin(t), "mount", c.store, c.mnt)
		if r.code != 2 || !strings.Contains(string(r.stderr), c.want) {
			t.Errorf("mount onto %s: exit %d %q, want %q", c.what, r.code, r.stderr, c.want)
		}
		if e, ok := mountEntry(t, c.mnt); ok {
			t.Errorf("mount onto %s left %s", c.what, e)
			syscall.Unmount(c.mnt, syscall.MNT_DETACH)
		}
	}
	// --nonempty mounts over a non-empty directory
	m := startMountAt(t, full, nil, []string{dshfsBin(t), "mount", "--nonempty", "--read-only", store, full})
	m.stop(t)
	// a dead mount left by SIGKILL is detected and cleared by the next mount
	mnt := filepath.Join(base, "mnt")
	os.Mkdir(mnt, 0o755)
	m = startMountAt(t, mnt, nil, []string{dshfsBin(t), "mount", "--read-only", store, mnt})
	// kill it once it serves (a kill while go-fuse still probes its own fresh mount leaves the process stuck
	// in the kernel until the mount is aborted)
	mustRun(t, "ls", filepath.Join(mnt, "sessions"))
	m.cmd.Process.Kill()
	<-m.done
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(mnt, &sfs); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("after SIGKILL the mountpoint is not dead: %v", err)
	}
	m2 := startMountAt(t, mnt, nil, []string{dshfsBin(t), "mount", "--read-only", store, mnt})
	// the dead mount's entry satisfied startMountAt: wait for the new one to say it is mounted
	waitFor(t, "the new mount", func() (bool, string) {
		if m2.exited() {
			t.Fatalf("the new mount exited: %v\n%s", m2.err, m2.log)
		}
		return strings.Contains(m2.log.String(), "msg=mounted"), m2.log.String()
	})
	if !strings.Contains(m2.log.String(), "dead dshfs mount") {
		t.Errorf("the new mount does not say it cleared the dead one:\n%s", m2.log)
	}
	if _, err := os.ReadDir(filepath.Join(mnt, "sessions")); err != nil {
		t.Errorf("the new mount does not serve: %v", err)
	}
	m2.stop(t)
}

// TestRefusedStaysWalkable: sessions refused at the header in every way (an empty file, no newline, not
// UTF-8, nesting too deep, not an object, a directory, a FIFO) list only the files that can be served, so
// `grep -r` and `rsync -a` over the mount exit as they would over a plain directory.
func TestRefusedStaysWalkable(t *testing.T) {
	t.Parallel()
	store := filepath.Join(t.TempDir(), "sessions")
	for id, make := range map[string]func(p string) error{
		"empty":    func(p string) error { return os.WriteFile(p, nil, 0o644) },
		"no-lf":    func(p string) error { return os.WriteFile(p, []byte(`{"type":"session"`), 0o644) },
		"not-utf8": func(p string) error { return os.WriteFile(p, []byte("\xff\xfe\n"), 0o644) },
		"deep":     func(p string) error { return os.WriteFile(p, []byte(strings.Repeat("[", 100000)+"\n"), 0o644) },
		"array":    func(p string) error { return os.WriteFile(p, []byte("[1]\n"), 0o644) },
		"dir":      func(p string) error { return os.Mkdir(p, 0o755) },
		"fifo":     func(p string) error { return syscall.Mkfifo(p, 0o644) },
		"object":   func(p string) error { return os.WriteFile(p, []byte(`{"type":"other"}`+"\n"), 0o644) },
	} {
		dir := filepath.Join(store, "--p--", id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := make(filepath.Join(dir, "session.jsonl")); err != nil {
			t.Fatal(err)
		}
	}
	mnt := mountStore(t, "jsonl+raw:"+store, "--read-only")
	if r := run(t, "", "grep", "-r", "no-such-text", mnt); r.code != 1 {
		t.Errorf("grep -r over refused sessions: exit %d\n%s", r.code, r.stderr)
	}
	dest := filepath.Join(t.TempDir(), "copy")
	if r := run(t, "", "rsync", "-a", mnt+"/", dest+"/"); r.code != 0 {
		t.Errorf("rsync -a over refused sessions: exit %d\n%s", r.code, r.stderr)
	}
	for id, want := range map[string]string{
		"empty": "raw.jsonl status.json", "no-lf": "raw.jsonl status.json", "not-utf8": "raw.jsonl status.json",
		"deep": "raw.jsonl status.json", "array": "raw.jsonl status.json", "dir": "status.json",
		"fifo": "status.json", "object": "header.json raw.jsonl status.json",
	} {
		got := strings.Fields(string(mustRun(t, "ls", filepath.Join(mnt, "sessions", id))))
		if strings.Join(got, " ") != want {
			t.Errorf("%s lists %v, want %s", id, got, want)
		}
	}
}

// TestStraySibling: a directory whose raw name (a literal newline) decodes to the id of a valid encoded
// sibling ("a~000Ab") is refused alone, with the harness's identity text; the valid session reads exactly
// as the harness's inspect() shows it, in the CLI and in the mount.
func TestStraySibling(t *testing.T) {
	t.Parallel()
	store, _ := emptyStore(t, "none")
	const id = "a\nb"
	cli(t, 0, "create", "--cwd", "/p", store, id)
	in := filepath.Join(t.TempDir(), "turn.jsonl")
	if err := os.WriteFile(in, []byte(strings.Join(turnLines(1, 0, false), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, 0, "append", store, id, in)
	artifact := artifactOf(t, store, "a~000Ab")
	valid := filepath.Dir(artifact)
	stray := filepath.Join(filepath.Dir(valid), id)
	if err := os.Mkdir(stray, 0o755); err != nil {
		t.Fatal(err)
	}
	copyTree(t, artifact, filepath.Join(stray, filepath.Base(artifact)))

	r := run(t, "", dshfsBin(t), "check", "--json", store)
	var refused []struct{ ID, Kind, Message string }
	for _, l := range lines(r.stdout) {
		var e struct{ ID, Kind, Message string }
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatal(err)
		}
		refused = append(refused, e)
	}
	if r.code != 1 || len(refused) != 1 || !strings.Contains(refused[0].Message, `header id "a`) || !strings.Contains(refused[0].Message, "and cwd identify") {
		t.Fatalf("check: exit %d %+v", r.code, refused)
	}
	h := harness.Get(t)
	answers, err := h.Dump(store, id)
	if err != nil || len(answers) != 1 || answers[0].Error != "" {
		t.Fatalf("the harness's inspect() of the valid session: %+v %v", answers, err)
	}
	if d := diff(textLines(cli(t, 0, "cat", store, id)), answers[0].Stored); d != "" {
		t.Errorf("dshfs cat differs from the harness: %s", d)
	}
	m := startMount(t, "--read-only", store)
	if d := diff(textLines(readFile(t, filepath.Join(m.dir, "sessions", "a~000Ab", "events.jsonl"))), answers[0].Stored); d != "" {
		t.Errorf("the mount's events.jsonl differs from the harness: %s", d)
	}
}
