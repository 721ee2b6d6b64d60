package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dshfs/dshfs/internal/demo"
)

// TestMountAllowOtherPathPermissions: with --allow-other, a second user reads through the mount exactly
// what the store lets it read. A project directory 0700 root hides its sessions (sessions/, store/ and
// by-project/ alike) though their artifacts are 0644; a spill file that is a hard link to a 0600 root file
// is judged by its own mode, whatever the spill root's; everything else stays readable; and a stat through
// names the kernel cached for root is refused where the store's directories refuse it.
func TestMountAllowOtherPathPermissions(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test creates a user and must run as root (as CI does)")
	}
	uid, gid := testUser(t)
	as := []string{"setpriv", "--reuid=" + uid, "--regid=" + gid, "--clear-groups", "--"}
	asUser := func(name string, args ...string) result {
		return run(t, "", as[0], append(as[1:], append([]string{name}, args...)...)...)
	}

	// t.TempDir's parents are 0700 root: the user gets a world-traversable base of its own
	base, err := os.MkdirTemp("", "dshfs-access-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if base, err = filepath.EvalSymlinks(base); err != nil {
		t.Fatal(err)
	}
	if err := demo.Write(base); err != nil {
		t.Fatal(err)
	}
	root, spillRoot := filepath.Join(base, "sessions"), filepath.Join(base, "spill")
	cli(t, 0, "create", "--cwd", "/home/dev/closed-project", root, "closed-one")
	mustRun(t, "chmod", "-R", "a+rX", base)
	closedArtifacts, _ := filepath.Glob(filepath.Join(root, "*", "closed-one", "session.jsonl*"))
	if len(closedArtifacts) != 1 {
		t.Fatalf("artifact of closed-one: %v", closedArtifacts)
	}
	closedProject := filepath.Dir(filepath.Dir(closedArtifacts[0]))
	if err := os.Chmod(closedProject, 0o700); err != nil {
		t.Fatal(err)
	}
	// the demo's spill file becomes a hard link to a root-only file outside the spill root
	spillFiles, _ := filepath.Glob(filepath.Join(spillRoot, "*", "*.txt"))
	if len(spillFiles) != 1 {
		t.Fatalf("demo spill files: %v", spillFiles)
	}
	spillBytes, err := os.ReadFile(spillFiles[0])
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(base, "secret.txt")
	if err := os.WriteFile(secret, spillBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(spillFiles[0]); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(secret, spillFiles[0]); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(base, "dshfs.toml")
	if err := os.WriteFile(cfg, []byte("[spill]\nroots = [\""+spillRoot+"\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	startMountAt(t, mnt, nil, []string{dshfsBin(t), "mount", "--read-only", "--allow-other", "--config", cfg, root, mnt})

	// root reads everything first: the kernel now caches the names of the closed session's files
	if r := run(t, "", "cat", filepath.Join(mnt, "sessions", "closed-one", "header.json")); r.code != 0 {
		t.Fatalf("root cannot read the closed session: %s", r.stderr)
	}

	denied := func(r result) bool {
		return r.code != 0 && strings.Contains(string(r.stderr), "Permission denied")
	}
	// every artifact: through store/ and sessions/ exactly as in the store
	artifacts, _ := filepath.Glob(filepath.Join(root, "*", "*", "session.jsonl*"))
	if len(artifacts) < 7 {
		t.Fatalf("artifacts: %v", artifacts)
	}
	for _, a := range artifacts {
		rel, _ := filepath.Rel(root, a)
		inStore := asUser("cat", a)
		viaMirror := asUser("cat", filepath.Join(mnt, "store", rel))
		name := filepath.Base(filepath.Dir(a))
		viaSession := asUser("cat", filepath.Join(mnt, "sessions", name, "header.json"))
		statSession := asUser("stat", filepath.Join(mnt, "sessions", name, "header.json"))
		closed := strings.HasPrefix(a, closedProject+"/")
		if closed != denied(inStore) {
			t.Fatalf("%s in the store: exit %d %s (the setup is wrong)", rel, inStore.code, inStore.stderr)
		}
		if denied(viaMirror) != closed || (!closed && string(viaMirror.stdout) != string(inStore.stdout)) {
			t.Errorf("store/%s: exit %d %q; in the store: exit %d", rel, viaMirror.code, viaMirror.stderr, inStore.code)
		}
		if denied(viaSession) != closed || (!closed && len(viaSession.stdout) == 0) {
			t.Errorf("sessions/%s/header.json: exit %d %q; in the store: exit %d", name, viaSession.code, viaSession.stderr, inStore.code)
		}
		if denied(statSession) != closed {
			t.Errorf("stat sessions/%s/header.json: exit %d %q; in the store: exit %d", name, statSession.code, statSession.stderr, inStore.code)
		}
	}
	// directory listings: the closed project's, in the store and through store/ and by-project/
	project := filepath.Base(closedProject)
	for _, p := range []string{closedProject, filepath.Join(mnt, "store", project), filepath.Join(mnt, "by-project", project)} {
		if r := asUser("ls", p); !denied(r) {
			t.Errorf("ls %s as the user: exit %d %q %q", p, r.code, r.stdout, r.stderr)
		}
	}
	if r := asUser("ls", filepath.Join(mnt, "sessions")); r.code != 0 || strings.Contains(string(r.stdout), "closed-one") ||
		!strings.Contains(string(r.stdout), demo.Spilled) {
		t.Errorf("ls sessions/ as the user: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := run(t, "", "ls", filepath.Join(mnt, "sessions")); !strings.Contains(string(r.stdout), "closed-one") {
		t.Errorf("ls sessions/ as root lacks the closed session: %q", r.stdout)
	}
	// the store-level files tell the user of no session it may not read, and root of every one
	storeFilesHide(t, mnt, asUser, "closed-one", demo.Spilled)

	// the spill file: a hard link to a 0600 root file, refused in the spill root and through the mount
	spillDir := filepath.Join(mnt, "sessions", demo.Spilled, "spill")
	var served string
	for _, line := range strings.Fields(string(mustRun(t, "ls", spillDir))) {
		if line != "index.json" {
			served = filepath.Join(spillDir, line)
		}
	}
	if served == "" {
		t.Fatalf("no spill file served in %s", spillDir)
	}
	if r := asUser("cat", spillFiles[0]); !denied(r) {
		t.Fatalf("the spill file in its root: exit %d (the setup is wrong)", r.code)
	}
	if r := asUser("cat", served); !denied(r) || len(r.stdout) != 0 {
		t.Errorf("a 0600 root spill file (a hard link) read by the user through the mount: exit %d %q (%d bytes)", r.code, r.stderr, len(r.stdout))
	}
	if r := run(t, "", "cat", served); r.code != 0 || string(r.stdout) != string(spillBytes) {
		t.Errorf("root cannot read the spill file: exit %d %s", r.code, r.stderr)
	}
	// the same inode made readable: served to the user, judged by what it is
	if err := os.Chmod(secret, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the spill file readable to the user once it is 0644", func() (bool, string) {
		r := asUser("cat", served)
		return r.code == 0 && string(r.stdout) == string(spillBytes), string(r.stderr)
	})
}

// TestMountCopyRemovable: `rsync -a MNT/sessions/ DEST/` by an ordinary user gives a copy that user can
// remove again (directories report their owner's write bit); on a writable mount the documented excludes
// leave ctl and append out of the copy, and removing a name in the mount is refused, never a silent success.
func TestMountCopyRemovable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test creates a user and must run as root (as CI does)")
	}
	uid, gid := testUser(t)
	as := []string{"setpriv", "--reuid=" + uid, "--regid=" + gid, "--clear-groups", "--"}
	base, err := os.MkdirTemp("", "dshfs-copy-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if base, err = filepath.EvalSymlinks(base); err != nil {
		t.Fatal(err)
	}
	cli(t, 0, "demo", base)
	mustRun(t, "chmod", "-R", "a+rX", base)
	store := filepath.Join(base, "sessions")
	mnt := filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(base, "copy")
	if err := os.Mkdir(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "chown", uid+":"+gid, dest)
	m := startMountAt(t, mnt, nil, []string{dshfsBin(t), "mount", "--read-only", "--allow-other", store, mnt})
	if r := run(t, "", as[0], append(as[1:], "rsync", "-a", mnt+"/sessions/", dest+"/")...); r.code != 0 {
		t.Fatalf("rsync -a as the user: exit %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dest, "demo-clean", "events.jsonl")); err != nil {
		t.Fatalf("the copy lacks demo-clean/events.jsonl: %v", err)
	}
	if r := run(t, "", as[0], append(as[1:], "rm", "-rf", dest+"/demo-clean")...); r.code != 0 {
		t.Errorf("the user cannot remove its own rsync copy: exit %d %s", r.code, r.stderr)
	}
	m.signal(t, syscall.SIGTERM)
	m.waitExit(t)

	// a writable mount: the excludes of docs/backups.md leave the control files out
	w := startMountAt(t, mnt, nil, []string{dshfsBin(t), "mount", store, mnt})
	copy2 := filepath.Join(base, "copy2")
	mustRun(t, "rsync", "-a", "--exclude=/*/ctl", "--exclude=/*/append", mnt+"/sessions/", copy2+"/")
	if ctl, _ := filepath.Glob(filepath.Join(copy2, "*", "ctl")); len(ctl) != 0 {
		t.Errorf("the copy holds control files: %v", ctl)
	}
	if app, _ := filepath.Glob(filepath.Join(copy2, "*", "append")); len(app) != 0 {
		t.Errorf("the copy holds append files: %v", app)
	}
	victim := filepath.Join(mnt, "sessions", "demo-clean", "events.jsonl")
	if r := run(t, "", "rm", victim); r.code == 0 || !strings.Contains(string(r.stderr), "Operation not permitted") {
		t.Errorf("rm of a view in a writable mount: exit %d %q", r.code, r.stderr)
	}
	if r := run(t, "", "rmdir", filepath.Join(mnt, "sessions", "demo-clean", "turns")); r.code == 0 {
		t.Errorf("rmdir of a directory in a writable mount succeeded")
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("the view is gone after a refused rm: %v", err)
	}
	w.signal(t, syscall.SIGTERM)
	w.waitExit(t)
}

// storeFilesHide checks the store-level files of an --allow-other mount: read by another user (asUser),
// index.html, status.json and stats.json name no session hidden from it and say nothing that counts it,
// while index.html lists a session shown to it; read by the mounting user, they show hidden too.
func storeFilesHide(t *testing.T, mnt string, asUser func(string, ...string) result, hidden, shown string) {
	t.Helper()
	for _, f := range []string{"index.html", "status.json", "stats.json"} {
		path := filepath.Join(mnt, f)
		r := asUser("cat", path)
		if r.code != 0 || len(r.stdout) == 0 {
			t.Errorf("%s as the user: exit %d %q", f, r.code, r.stderr)
			continue
		}
		if strings.Contains(string(r.stdout), hidden) {
			t.Errorf("%s read by the user names %s, a session it may not read:\n%s", f, hidden, r.stdout)
		}
		if strings.Contains(string(r.stdout), "decodes") || strings.Contains(string(r.stdout), "renderedBytes") {
			t.Errorf("%s read by the user shows the mount's counters of every session:\n%s", f, r.stdout)
		}
	}
	if r := asUser("cat", filepath.Join(mnt, "index.html")); shown != "" && !strings.Contains(string(r.stdout), shown) {
		t.Errorf("index.html read by the user lacks %s, a session it may read", shown)
	}
	own := string(mustRun(t, "cat", filepath.Join(mnt, "index.html")))
	if !strings.Contains(own, hidden) {
		t.Errorf("index.html read by the mounting user lacks %s", hidden)
	}
	var mine, theirs struct{ Sessions int }
	if err := json.Unmarshal(mustRun(t, "cat", filepath.Join(mnt, "status.json")), &mine); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(asUser("cat", filepath.Join(mnt, "status.json")).stdout, &theirs); err != nil {
		t.Fatal(err)
	}
	if theirs.Sessions >= mine.Sessions {
		t.Errorf("status.json counts %d sessions for the user, %d for the mounting user: the hidden one is counted", theirs.Sessions, mine.Sessions)
	}
}
