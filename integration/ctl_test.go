package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCtlResultAndOneCommand: the result read back on a ctl descriptor after a failed command is that
// result once (not followed by its last bytes again), after a successful one too; one write(2) larger than
// the mount's max_write, which the kernel splits into several requests, runs no command at all; and a
// write carrying two command lines runs neither.
func TestCtlResultAndOneCommand(t *testing.T) {
	t.Parallel()
	store, cfg := emptyStore(t, "zstd")
	m := startMount(t, "--config", cfg, store)
	s := newSessionOnMount(t, m.dir, "s")
	ctlPath := filepath.Join(s, "ctl")

	// a failed command, then cat on the same descriptor (bash: the failed write leaves the offset at 0)
	r := run(t, "", "bash", "-c", `exec 3<>"$0"; echo explode >&3; cat <&3`, ctlPath)
	var res commandResult
	if len(lines(r.stdout)) != 1 || json.Unmarshal(r.stdout, &res) != nil || res.Command != "explode" || res.Errno == nil {
		t.Errorf("ctl read after a failed command: %q", r.stdout)
	}
	// a successful one, read twice through the same descriptor: the result, then end of file
	f, err := os.OpenFile(ctlPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, cmd := range []string{"explode\n", "flush\n"} {
		f.Write([]byte(cmd)) // the first fails (EINVAL): the result is read from the unchanged offset
		var all bytes.Buffer
		buf := make([]byte, 7) // small reads: the result arrives in pieces
		for {
			n, err := f.Read(buf)
			all.Write(buf[:n])
			if n == 0 || err != nil {
				break
			}
		}
		if len(lines(all.Bytes())) != 1 || json.Unmarshal(all.Bytes(), &res) != nil || res.Command != strings.TrimSpace(cmd) {
			t.Errorf("%q read back in pieces: %q", cmd, all.Bytes())
		}
	}

	// one write(2) of more than 1 MiB (the mount's max_write): refused, no session created
	root := filepath.Join(m.dir, "ctl")
	big := "create big1" + strings.Repeat(" ", 1<<20) + "\ncreate big2\n"
	rf, err := os.OpenFile(root, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, werr := rf.Write([]byte(big))
	rf.Close()
	if !errors.Is(werr, syscall.EINVAL) {
		t.Errorf("a %d-byte ctl write: %v, want EINVAL", len(big), werr)
	}
	// two command lines in one write: refused as a whole
	if rf, err = os.OpenFile(root, os.O_WRONLY, 0); err != nil {
		t.Fatal(err)
	}
	_, werr = rf.Write([]byte("create two1\ncreate two2\n"))
	rf.Close()
	if !errors.Is(werr, syscall.EINVAL) {
		t.Errorf("two command lines in one write: %v, want EINVAL", werr)
	}
	for _, id := range []string{"big1", "big2", "two1", "two2"} {
		if _, err := os.Stat(filepath.Join(m.dir, "sessions", id)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("session %s: %v, want none created", id, err)
		}
	}
}

// TestMkdirNames: mkdir of a valid name longer than the 200 bytes sessions/ lists is refused with the
// reason and the way to create it, which `create` then does; mkdir of ~0000nul creates no id holding NUL.
func TestMkdirNames(t *testing.T) {
	t.Parallel()
	store, cfg := emptyStore(t, "zstd")
	m := startMount(t, "--config", cfg, store)
	long := strings.Repeat("a", 210)
	err := os.Mkdir(filepath.Join(m.dir, "sessions", long), 0o755)
	if !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("mkdir of a 210-byte name: %v, want EINVAL", err)
	}
	var st struct{ LastError struct{ Message string } }
	if err := json.Unmarshal(readFile(t, filepath.Join(m.dir, "status.json")), &st); err != nil ||
		!strings.Contains(st.LastError.Message, "a session name of 210 bytes is listed under a shortened name") ||
		!strings.Contains(st.LastError.Message, "create ID") {
		t.Fatalf("the refusal's reason: %q (%v)", st.LastError.Message, err)
	}
	mustCtl(t, filepath.Join(m.dir, "ctl"), "create "+long)
	if r := cli(t, 0, "ls", "--json", store); !bytes.Contains(r, []byte(`"`+long+`"`)) {
		t.Fatalf("create of the 210-byte id: ls shows %s", r)
	}
	if err := os.Mkdir(filepath.Join(m.dir, "sessions", "~0000nul"), 0o755); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("mkdir ~0000nul: %v, want EINVAL", err)
	}
	if r := cli(t, 0, "ls", "--json", store); bytes.Contains(r, []byte(`nul"`)) {
		t.Fatalf("a session with NUL in its id was created: %s", r)
	}
}
