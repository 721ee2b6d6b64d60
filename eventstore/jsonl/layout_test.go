package jsonl

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/internal/namecodec"
)

// layoutHeader reads id and cwd from a transcript's header line the way the harness's JSON.parse would see
// them for these fixtures (ordinary strings).
type layoutHeader struct {
	ID  string  `json:"id"`
	Cwd *string `json:"cwd"`
}

// Every session directory of the real stores is named exactly as these encoders name it.
func TestLayoutMatchesFixtureDirectories(t *testing.T) {
	root := zstFixturesRoot(t)
	stores, err := filepath.Glob(filepath.Join(root, "upstream", "colliders", "*"))
	if err != nil {
		t.Fatal(err)
	}
	stores = append(stores,
		filepath.Join(root, "upstream", "raw"),
		filepath.Join(root, "upstream", "zstd"),
		filepath.Join(root, "generated", "raw"),
		filepath.Join(root, "generated", "zstd"),
	)
	seen, noCwd := 0, 0
	for _, store := range stores {
		transcripts, err := filepath.Glob(filepath.Join(store, "*", "*", "session.jsonl*"))
		if err != nil {
			t.Fatal(err)
		}
		if len(transcripts) == 0 {
			t.Fatalf("no transcripts under %s", store)
		}
		for _, path := range transcripts {
			sessionDir := filepath.Dir(path)
			encoded, project := filepath.Base(sessionDir), filepath.Base(filepath.Dir(sessionDir))
			h := layoutReadHeader(t, path)
			seen++
			id, ok := namecodec.DecodeSegment(encoded)
			if !ok || id != h.ID {
				t.Errorf("%s: namecodec.DecodeSegment(%q) = %q, %v; header id %q", path, encoded, id, ok, h.ID)
			}
			if enc, err := namecodec.EncodeSegment(h.ID); err != nil || enc != encoded {
				t.Errorf("%s: namecodec.EncodeSegment(%q) = %q, %v", path, h.ID, enc, err)
			}
			want := NoCwdDir
			if h.Cwd != nil {
				want, err = namecodec.ProjectKey(*h.Cwd)
				if err != nil {
					t.Fatal(err)
				}
			} else {
				noCwd++
			}
			if project != want {
				t.Errorf("%s: project dir %q, ProjectKey gives %q", path, project, want)
			}
		}
	}
	if seen < 61+43+60+10 || noCwd == 0 {
		t.Fatalf("checked %d transcripts (%d without cwd); fixtures are incomplete", seen, noCwd)
	}
}

func layoutReadHeader(t *testing.T, path string) layoutHeader {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var line []byte
	if strings.HasSuffix(path, ".zstd") {
		frames, _, err := ScanFrames(b, 1)
		if err != nil || len(frames) != 1 {
			t.Fatalf("%s: header frame: %v", path, err)
		}
		if line, err = DecodeFrame(b, frames[0]); err != nil {
			t.Fatal(err)
		}
	} else {
		line, _, _ = bytes.Cut(b, []byte("\n"))
	}
	var h layoutHeader
	if err := json.Unmarshal(line, &h); err != nil || h.ID == "" {
		t.Fatalf("%s: header: %v", path, err)
	}
	return h
}
