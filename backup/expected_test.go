package backup

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/demo"
	"github.com/dshfs/dshfs/spill"
)

func testOptions() Options {
	return Options{
		Open: func(root string) (*eventstore.Store, error) {
			b, err := jsonl.OpenDefault(root, "", jsonl.Zstd) // encoding detected from the root
			if err != nil {
				return nil, err
			}
			return eventstore.New(b), nil
		},
		Spill: spill.NewRoots(nil),
	}
}

// demoBackup takes a backup of the demo store (no mount) and returns its directory and manifest.
func demoBackup(t *testing.T) (string, *Manifest) {
	t.Helper()
	dir := t.TempDir()
	if err := demo.Write(dir); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "sessions")
	opts := testOptions()
	st, err := opts.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "b")
	m, err := FromStore(context.Background(), st, root, dest, opts)
	if err != nil {
		t.Fatal(err)
	}
	return dest, m
}

func problemKinds(ps []Problem) string {
	var ks []string
	for _, p := range ps {
		ks = append(ks, p.Kind+": "+p.Message)
	}
	return strings.Join(ks, "\n")
}

// TestExpectedTotals: the manifest records the totals of what was copied, verify counts the same from the
// copy, and a copy trimmed consistently (a session removed with its manifest entry, which the per-session
// checks cannot see) fails on the totals; so does a manifest without them.
func TestExpectedTotals(t *testing.T) {
	dest, m := demoBackup(t)
	if m.Expected == nil || m.Expected.Sessions != int64(len(m.Sessions)) || m.Expected.Sessions == 0 || m.Expected.Events == 0 || m.Expected.Files != m.Expected.Sessions {
		t.Fatalf("expected totals %+v for %d sessions", m.Expected, len(m.Sessions))
	}
	ctx := context.Background()
	counts, problems, ioErr := Verify(ctx, dest, testOptions())
	if len(problems) > 0 || ioErr || counts != *m.Expected {
		t.Fatalf("verify of a fresh backup: counts %+v want %+v, io %v, problems:\n%s", counts, *m.Expected, ioErr, problemKinds(problems))
	}
	read, err := ReadManifest(dest)
	if err != nil || read.Expected == nil || *read.Expected != *m.Expected {
		t.Fatalf("read back: %v %+v", err, read.Expected)
	}

	// a session dropped from the copy and from the manifest's entries alike
	dropped := *read
	gone := dropped.Sessions[0]
	dropped.Sessions = dropped.Sessions[1:]
	if err := os.RemoveAll(filepath.Join(dest, filepath.Dir(filepath.FromSlash(gone.Path)))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dest, ManifestFile), dropped.JSON(), 0o644); err != nil {
		t.Fatal(err)
	}
	counts, problems, _ = Verify(ctx, dest, testOptions())
	if counts.Sessions != m.Expected.Sessions-1 || !strings.Contains(problemKinds(problems), "expected: the copy holds") ||
		!strings.Contains(problemKinds(problems), "manifest: the manifest lists") {
		t.Errorf("a trimmed backup: counts %+v, problems:\n%s", counts, problemKinds(problems))
	}
	if _, err := Restore(ctx, dest, filepath.Join(t.TempDir(), "r"), testOptions()); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("restore of a trimmed backup: %v", err)
	}
	var warned []string
	opts := testOptions()
	opts.Force = true
	opts.Warn = func(f string, a ...any) { warned = append(warned, f) }
	if _, err := Restore(ctx, dest, filepath.Join(t.TempDir(), "r"), opts); err != nil || len(warned) == 0 {
		t.Errorf("restore --force of a trimmed backup: %v, warnings %q", err, warned)
	}

	// no totals at all (an older dshfs's manifest, or one edited)
	dropped.Expected = nil
	if err := os.WriteFile(filepath.Join(dest, ManifestFile), dropped.JSON(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, problems, _ = Verify(ctx, dest, testOptions()); !strings.Contains(problemKinds(problems), "records no expected totals") {
		t.Errorf("a manifest without totals: problems:\n%s", problemKinds(problems))
	}
}

// TestBackupIncomplete: a copy holding fewer sessions than the source listed is refused.
func TestBackupIncomplete(t *testing.T) {
	dir := t.TempDir()
	if err := demo.Write(dir); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "sessions")
	opts := testOptions()
	opts.SourceSessions = 1000
	st, err := opts.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FromStore(context.Background(), st, root, filepath.Join(t.TempDir(), "b"), opts); err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Errorf("a copy short of the source's sessions: %v", err)
	}
}

// TestRestoreEmpty: a backup of no sessions verifies (it is what it says) but is restored only when
// allowed.
func TestRestoreEmpty(t *testing.T) {
	root := t.TempDir()
	opts := testOptions()
	st, err := opts.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dest := filepath.Join(t.TempDir(), "b")
	m, err := FromStore(ctx, st, root, dest, opts)
	if err != nil || m.Expected == nil || *m.Expected != (Expected{}) {
		t.Fatalf("empty backup: %v %+v", err, m)
	}
	if counts, problems, _ := Verify(ctx, dest, opts); len(problems) > 0 || counts != (Expected{}) {
		t.Fatalf("verify of an empty backup: %+v\n%s", counts, problemKinds(problems))
	}
	if _, err := Restore(ctx, dest, filepath.Join(t.TempDir(), "r"), opts); err == nil || !strings.Contains(err.Error(), "--allow-empty") {
		t.Errorf("restore of an empty backup: %v", err)
	}
	opts.AllowEmpty = true
	if _, err := Restore(ctx, dest, filepath.Join(t.TempDir(), "r"), opts); err != nil {
		t.Errorf("restore --allow-empty: %v", err)
	}
}

func TestEnclosingMount(t *testing.T) {
	mounts := parseMounts([]byte("proc /proc proc rw 0 0\n" +
		"dshfs /mnt/a\\040b fuse.dshfs rw 0 0\n" +
		"dshfs /mnt/a\\040b/inner fuse.dshfs rw 0 0\n" +
		"other /mnt/x fuse.sshfs rw 0 0\n"))
	for path, want := range map[string]string{
		"/mnt/a b":                "/mnt/a b",
		"/mnt/a b/sessions/x":     "/mnt/a b",
		"/mnt/a b/inner/store":    "/mnt/a b/inner",
		"/mnt/a bc":               "",
		"/mnt/x/y":                "", // not dshfs
		"/mnt/a b/../elsewhere/s": "",
	} {
		m, ok := EnclosingMount(mounts, path)
		if ok != (want != "") || m.Point != want {
			t.Errorf("EnclosingMount(%q) = %q %v, want %q", path, m.Point, ok, want)
		}
	}
}

// TestProbeDeadline: a probe that does not return is abandoned at its deadline.
func TestProbeDeadline(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	start := time.Now()
	_, err := Probe(50*time.Millisecond, func() (int, error) { <-block; return 0, nil })
	if !errors.Is(err, ErrUnresponsive) || time.Since(start) > 5*time.Second {
		t.Errorf("a blocked probe: %v after %v", err, time.Since(start))
	}
	if v, err := Probe(time.Minute, func() (int, error) { return 7, nil }); v != 7 || err != nil {
		t.Errorf("a quick probe: %v %v", v, err)
	}
}
