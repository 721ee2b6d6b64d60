package mount

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPermAllows(t *testing.T) {
	const alice, bob = 1000, 1001
	const staff, users = 50, 100
	for _, c := range []struct {
		name string
		p    perm
		c    cred
		want uint32
		ok   bool
	}{
		{"owner reads 0600", perm{uid: alice, gid: staff, mode: 0o600}, cred{uid: alice, groups: []uint32{users}}, 4, true},
		{"other refused 0600", perm{uid: alice, gid: staff, mode: 0o600}, cred{uid: bob, groups: []uint32{users}}, 4, false},
		{"group member reads 0640", perm{uid: alice, gid: staff, mode: 0o640}, cred{uid: bob, groups: []uint32{users, staff}}, 4, true},
		{"owner bits rule the owner", perm{uid: alice, gid: staff, mode: 0o044}, cred{uid: alice, groups: []uint32{staff}}, 4, false},
		{"group bits rule a member", perm{uid: alice, gid: staff, mode: 0o704}, cred{uid: bob, groups: []uint32{staff}}, 4, false},
		{"search-only dir searched", perm{uid: alice, gid: staff, mode: 0o711}, cred{uid: bob, groups: nil}, 1, true},
		{"search-only dir not listed", perm{uid: alice, gid: staff, mode: 0o711}, cred{uid: bob, groups: nil}, 5, false},
		{"0700 dir not searched", perm{uid: 0, gid: 0, mode: 0o700}, cred{uid: bob, groups: []uint32{users}}, 1, false},
	} {
		if got := c.p.allows(c.c, c.want); got != c.ok {
			t.Errorf("%s: allows = %v, want %v", c.name, got, c.ok)
		}
	}
}

// TestChainAllows: a readable file below a directory the caller may not search is refused, as the kernel
// refuses it; the same file below searchable directories is read.
func TestChainAllows(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	open, closed := filepath.Join(dir, "open"), filepath.Join(dir, "closed")
	for _, d := range []string{open, closed} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	var c permCache
	// a stranger: no uid or group that owns anything here; the temp dir's parents are searchable by
	// everyone only if the machine's /tmp is, so the verdict on "open" is compared with the kernel's own
	stranger := cred{uid: 0xfffffff0, groups: []uint32{0xfffffff0}}
	kernelSays := true
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			kernelSays = false
		}
		if d == "/" {
			break
		}
	}
	if got := c.chainAllows(stranger, filepath.Join(open, "f"), 4, nil); got != kernelSays {
		t.Errorf("a 0644 file below 0755 directories: allowed %v, want %v", got, kernelSays)
	}
	if c.chainAllows(stranger, filepath.Join(closed, "f"), 4, nil) {
		t.Error("a 0644 file below a 0700 directory is allowed to a stranger")
	}
	if c.chainAllows(stranger, filepath.Join(open, "f"), 4, &perm{uid: 0, gid: 0, mode: 0o600}) {
		t.Error("the file's own 0600 mode (given) is not applied")
	}
	if c.chainAllows(stranger, "relative/f", 4, nil) {
		t.Error("a relative path is allowed")
	}
}
