package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dshfs/dshfs/eventstore/jsonl"
)

// TestHostileStore: a store whose artifacts are a FIFO, a link to /dev/zero, a link to a file outside the
// root, a dangling link and a zstd decompression bomb. `dshfs ls` and `dshfs check` (a non-race binary
// under `ulimit -v 1G`) answer within the deadline with each session refused for its reason, and the mount
// lists them, serves their status.json, and serves no byte of a file outside the root.
func TestHostileStore(t *testing.T) {
	t.Parallel()
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte(`{"type":"session","version":0,"id":"leak","createdAt":1,"cwd":"/p","delegationDepth":0}`+"\nsecret\n"), 0o600); err != nil {
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
			r := run(t, "", "bash", "-c", `ulimit -v 1048576; exec "$0" check --json "$1"`, dshfsBin(t), store)
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
			if r := run(t, "", "bash", "-c", `ulimit -v 1048576; exec "$0" ls "$1"`, dshfsBin(t), store); r.code != 0 || len(lines(r.stdout)) != len(c.want) {
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
				if b, err := os.ReadFile(filepath.Join(s, "raw.jsonl")); err == nil && strings.Contains(string(b), "secret") {
					t.Errorf("%s/raw.jsonl served bytes from outside the store root", id)
				}
			}
			if r := run(t, "", "grep", "-r", "-l", "secret", m.dir); strings.Contains(string(r.stdout), "secret") || r.code == 0 {
				t.Errorf("grep -r found the outside file through the mount: exit %d %s", r.code, r.stdout)
			}
		})
	}
}
