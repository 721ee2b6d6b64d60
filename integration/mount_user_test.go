package integration

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dshfs/dshfs/internal/fixtures"
)

// TestMountUnprivileged mounts as an ordinary user, through the setuid fusermount3, as users outside CI
// will: the user sees the tree, /proc/mounts records the mount as that user's, and SIGTERM unmounts it
// cleanly. The test runs as root (as CI does) to create the user and hand it a store.
func TestMountUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test creates a user and must run as root (as CI does)")
	}
	for _, tool := range []string{"setpriv", "useradd", "userdel", "fusermount3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed: %v", tool, err)
		}
	}
	uid, gid := testUser(t)
	as := []string{"setpriv", "--reuid=" + uid, "--regid=" + gid, "--clear-groups", "--"}

	// fusermount3 opens /dev/fuse with the caller's file-system uid; distributions make it 0666, but a
	// container's /dev often has it 0600 root. The machine's device permissions are not the test's to
	// change: .ci/run grants what a normal machine grants, visibly.
	fi, err := os.Stat("/dev/fuse")
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode&0o006 != 0o006 {
		t.Fatalf("/dev/fuse is mode %04o: an ordinary user cannot open it, so no unprivileged mount can work here "+
			"(distributions make it 0666; a container's /dev often has it 0600). Fix: chmod 0666 /dev/fuse, as .ci/run does", mode)
	}

	// t.TempDir's parents are 0700 root: the user gets a world-traversable dir of its own
	base, err := os.MkdirTemp("", "dshfs-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if base, err = filepath.EvalSymlinks(base); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "dshfs")
	copyTree(t, dshfsBin(t), bin)
	store := copyTree(t, fixtures.Path(t, "generated", "zstd"), filepath.Join(base, "store"))
	mnt := filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "chmod", "-R", "a+rX", store)
	mustRun(t, "chown", uid+":"+gid, mnt)

	m := startMountAt(t, mnt, as, []string{bin, "mount", "--read-only", store, mnt})
	entry, _ := mountEntry(t, mnt)
	f := strings.Fields(entry)
	if len(f) < 4 || f[2] != "fuse.dshfs" || !strings.Contains(","+f[3]+",", ",user_id="+uid+",") || !strings.Contains(","+f[3]+",", ",ro,") {
		t.Errorf("/proc/mounts entry %q: want fuse.dshfs, ro, user_id=%s", entry, uid)
	}

	// the user sees the tree
	r := run(t, "", as[0], append(as[1:], "ls", filepath.Join(mnt, "sessions"))...)
	var want []string
	for _, s := range fixtures.Sessions(t, store) {
		want = append(want, s.EncodedID)
	}
	if r.code != 0 || !sameSet(string(r.stdout), strings.Join(want, "\n")) {
		t.Fatalf("ls as the user: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	name := want[0]
	r = run(t, "", as[0], append(as[1:], "cat", filepath.Join(mnt, "sessions", name, "events.jsonl"))...)
	if cliOut := cli(t, 0, "cat", "--view", "events", store, idOfName(t, store, name)); r.code != 0 || string(r.stdout) != string(cliOut) {
		t.Errorf("cat events.jsonl as the user: exit %d (%d bytes, CLI %d)\n%s", r.code, len(r.stdout), len(cliOut), r.stderr)
	}
	// without allow_other, even root cannot look in: the mount is the user's alone
	if r := run(t, "", "ls", mnt); r.code == 0 || !strings.Contains(string(r.stderr), "Permission denied") {
		t.Errorf("root ls of a user's mount without allow_other: exit %d %q", r.code, r.stderr)
	}

	m.signal(t, syscall.SIGTERM)
	m.waitExit(t)
	if e, ok := mountEntry(t, mnt); ok {
		t.Fatalf("still mounted after SIGTERM: %s", e)
	}
}

// testUser creates a throwaway system user (no home, no login shell) and deletes it on cleanup.
func testUser(t *testing.T) (uid, gid string) {
	t.Helper()
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	name := "dshfs-test-" + hex.EncodeToString(rnd[:])
	if _, err := user.Lookup(name); err != nil {
		mustRun(t, "useradd", "-M", "-N", "-s", "/bin/false", name)
		t.Cleanup(func() {
			if r := run(t, "", "userdel", name); r.code != 0 {
				t.Errorf("userdel %s: %s", name, r.stderr)
			}
		})
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := strconv.Atoi(u.Uid); err != nil {
		t.Fatal(fmt.Errorf("uid %q: %w", u.Uid, err))
	}
	return u.Uid, u.Gid
}

// TestMountPermissions: a root mount with --allow-other serves each session's files with its artifact's
// owner and read bits, and the kernel enforces them (default_permissions): an unprivileged user reads a
// world-readable session, gets EACCES for a mode-000 one, and no byte of a link out of the root.
func TestMountPermissions(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test creates a user and must run as root (as CI does)")
	}
	uid, gid := testUser(t)
	as := []string{"setpriv", "--reuid=" + uid, "--regid=" + gid, "--clear-groups", "--"}
	// t.TempDir's parents are 0700 root: the user needs a world-traversable way to the store (which it
	// could not read otherwise) and to the mountpoint
	base, err := os.MkdirTemp("", "dshfs-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	store := copyTree(t, fixtures.Path(t, "generated", "zstd"), filepath.Join(base, "store"))
	sessions := fixtures.Sessions(t, store)
	if len(sessions) < 2 {
		t.Fatal("the fixture root has fewer than two sessions")
	}
	open, closed := sessions[0], sessions[1]
	artifact := func(name string) string {
		m, _ := filepath.Glob(filepath.Join(store, "*", name, "session.jsonl.zstd"))
		if len(m) != 1 {
			t.Fatalf("artifact of %s: %v", name, m)
		}
		return m[0]
	}
	mustRun(t, "chmod", "a+rX", store)
	mustRun(t, "find", store, "-type", "d", "-exec", "chmod", "a+rx", "{}", "+")
	mustRun(t, "chmod", "0644", artifact(open.EncodedID))
	mustRun(t, "chmod", "0000", artifact(closed.EncodedID))
	mnt := filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	startMountAt(t, mnt, nil, []string{dshfsBin(t), "mount", "--read-only", "--allow-other", store, mnt})

	read := func(name string) result {
		return run(t, "", as[0], append(as[1:], "cat", filepath.Join(mnt, "sessions", name, "events.jsonl"))...)
	}
	if r := read(open.EncodedID); r.code != 0 || len(r.stdout) == 0 {
		t.Errorf("the user cannot read a world-readable session: exit %d %s", r.code, r.stderr)
	}
	if r := read(closed.EncodedID); r.code == 0 || !strings.Contains(string(r.stderr), "Permission denied") || len(r.stdout) != 0 {
		t.Errorf("the user read a mode-000 session: exit %d %q (%d bytes)", r.code, r.stderr, len(r.stdout))
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(mnt, "sessions", closed.EncodedID, "events.jsonl"), &st); err != nil || st.Mode&0o777 != 0 {
		t.Errorf("the mode-000 session's events.jsonl reports mode %o (%v)", st.Mode&0o777, err)
	}
	// root still reads everything, as it reads the store
	if r := run(t, "", "cat", filepath.Join(mnt, "sessions", closed.EncodedID, "events.jsonl")); r.code != 0 {
		t.Errorf("root cannot read: %s", r.stderr)
	}
}
