package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/internal/fixtures"
	"github.com/dshfs/dshfs/internal/harness"
	"github.com/dshfs/dshfs/internal/pgtest"
)

// TestFleetV4Mount: the harness's v4 store synced into a fleet store by `dshfs sync` is served by a
// fleet mount exactly as a mount of the store itself serves it — events.jsonl, header.json,
// surface.jsonl, messages.jsonl byte for byte — with status.json giving format version 4; `dshfs backup`
// of the fleet store writes each session as a v4 file the harness's v4 code restores to the events the
// mount serves.
func TestFleetV4Mount(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.DSN(srv.NewDatabase(t))
	root := fixtures.CopyTree(t, fixtures.Path(t, "generations", "v4", "zstd-root"))
	hoMust(t, 0, nil, "sync", "--host", "build-4", root, dsn)
	local := mountStore(t, root, "--read-only")
	fleet := startMount(t, "--read-only", dsn).dir
	entries, err := os.ReadDir(filepath.Join(local, "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 11 {
		t.Fatalf("the JSONL mount lists %d sessions", len(entries))
	}
	for _, e := range entries {
		id := e.Name()
		for _, f := range []string{"events.jsonl", "header.json", "surface.jsonl", "messages.jsonl"} {
			want := readFile(t, filepath.Join(local, "sessions", id, f))
			if got := readFile(t, filepath.Join(fleet, "sessions", id, f)); !bytes.Equal(got, want) {
				t.Errorf("%s/%s: the fleet mount serves %d bytes, the JSONL mount %d", id, f, len(got), len(want))
			}
		}
		var st struct {
			FormatVersion float64 `json:"formatVersion"`
		}
		if err := json.Unmarshal(readFile(t, filepath.Join(fleet, "sessions", id, "status.json")), &st); err != nil || st.FormatVersion != 4 {
			t.Errorf("%s: status.json formatVersion %v (%v), want 4", id, st.FormatVersion, err)
		}
	}

	dest := filepath.Join(t.TempDir(), "backup")
	hoMust(t, 0, nil, "backup", dsn, dest)
	hoMust(t, 0, nil, "verify", dest)
	kit := harness.GetFormatsV4(t)
	n := 0
	err = filepath.WalkDir(dest, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasPrefix(d.Name(), "session.") || strings.HasSuffix(d.Name(), ".lock") {
			return err
		}
		if d.Name() != "session.v4.jsonl.zstd" {
			t.Errorf("the backup holds %s", p)
			return nil
		}
		id := filepath.Base(filepath.Dir(p))
		r, err := kit.Decode(p)
		if err != nil {
			return err
		}
		if r.Refusal != "" {
			t.Errorf("%s: the harness's v4 code refuses the backup's file: %s", id, r.Refusal)
			return nil
		}
		if want := readFile(t, filepath.Join(fleet, "sessions", id, "events.jsonl")); !bytes.Equal(r.Events, want) {
			t.Errorf("%s: the harness restores other events from the backup than the fleet mount serves", id)
		}
		n++
		return nil
	})
	if err != nil || n != 11 {
		t.Fatalf("%d v4 files checked in the backup (%v)", n, err)
	}
}
