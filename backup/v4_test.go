package backup

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/dshfs/dshfs/internal/fixtures"
)

// TestV4BackupRestore: a store of v4 sessions is backed up, verified and restored with every v4 file
// byte for byte, and each session counted as check reads it.
func TestV4BackupRestore(t *testing.T) {
	ctx := context.Background()
	root := fixtures.CopyTree(t, fixtures.Path(t, "generations", "v4", "zstd-root"))
	opts := testOptions()
	st, err := opts.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "b")
	m, err := FromStore(ctx, st, root, dest, opts)
	if err != nil {
		t.Fatal(err)
	}
	if m.Expected.Sessions != 11 || m.Expected.Events != 366 {
		t.Fatalf("manifest totals %+v", m.Expected)
	}
	if _, problems, _ := Verify(ctx, dest, opts); len(problems) != 0 {
		t.Fatalf("verify: %s", problemKinds(problems))
	}
	out := filepath.Join(t.TempDir(), "restored")
	if _, err := Restore(ctx, dest, out, opts); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "*", "*", "session.v4.jsonl.zstd"))
	if len(files) != 11 {
		t.Fatalf("%d v4 files in the source", len(files))
	}
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		want, _ := os.ReadFile(f)
		for _, dir := range []string{dest, out} {
			got, err := os.ReadFile(filepath.Join(dir, rel))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s in %s: %v, %d of %d bytes", rel, dir, err, len(got), len(want))
			}
		}
	}
}
