package backup

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/internal/fixtures"
)

// treeFiles reads every regular file under root by its root-relative path.
func treeFiles(t *testing.T, root string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		out[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBackupCarriesEveryGeneration: a backup of a store whose sessions hold a v0 log and its v3 successor
// copies both files of each session byte for byte and lists the older one in the manifest; verify checks
// the older files too (a changed or missing one is a problem); a restore brings back both, byte-identical.
// The sessions are read from their v3 files, so verify finds nothing wrong and the restore needs no force.
func TestBackupCarriesEveryGeneration(t *testing.T) {
	ctx := context.Background()
	for _, enc := range []string{"raw", "zstd"} {
		t.Run(enc, func(t *testing.T) {
			root := fixtures.CopyTree(t, fixtures.Path(t, "generations", "beside", enc))
			source := treeFiles(t, root)
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
			copied := treeFiles(t, dest)
			for rel, want := range source {
				if !bytes.Equal(copied[rel], want) {
					t.Fatalf("%s: the backup holds %d bytes, the store %d", rel, len(copied[rel]), len(want))
				}
			}
			if len(m.Sessions) != 5 && len(m.Sessions) != 6 {
				t.Fatalf("%d sessions in the manifest", len(m.Sessions))
			}
			for _, s := range m.Sessions {
				if !strings.Contains(s.Path, "session.v3.jsonl") || len(s.Beside) != 1 ||
					!strings.HasSuffix(s.Beside[0].Path, "/session.jsonl"+map[string]string{"raw": "", "zstd": ".zstd"}[enc]) ||
					s.Refusal != "" {
					t.Fatalf("manifest entry %+v", s)
				}
			}
			if m.Expected.Files != int64(2*len(m.Sessions)) {
				t.Fatalf("expected %d files", m.Expected.Files)
			}

			if _, problems, _ := Verify(ctx, dest, opts); len(problems) != 0 {
				t.Fatalf("verify found %d problems:\n%s", len(problems), problemKinds(problems))
			}

			restored := filepath.Join(t.TempDir(), "r")
			if _, err := Restore(ctx, dest, restored, opts); err != nil {
				t.Fatal(err)
			}
			back := treeFiles(t, restored)
			if len(back) != len(source) {
				t.Fatalf("restored %d files, the store held %d", len(back), len(source))
			}
			for rel, want := range source {
				if !bytes.Equal(back[rel], want) {
					t.Fatalf("%s: restored %d bytes, the store held %d", rel, len(back[rel]), len(want))
				}
			}

			// an older generation changed in the backup is found
			pred := filepath.Join(dest, filepath.FromSlash(m.Sessions[0].Beside[0].Path))
			if err := os.WriteFile(pred, []byte("changed\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, problems, _ := Verify(ctx, dest, opts)
			if !strings.Contains(problemKinds(problems), "size: generation file "+m.Sessions[0].Beside[0].Path) {
				t.Fatalf("a changed older generation is not found:\n%s", problemKinds(problems))
			}
			os.Remove(pred)
			_, problems, _ = Verify(ctx, dest, opts)
			if !strings.Contains(problemKinds(problems), "missing: generation file") {
				t.Fatalf("a missing older generation is not found:\n%s", problemKinds(problems))
			}
		})
	}
}
