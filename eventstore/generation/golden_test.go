package generation_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/generation"
	"github.com/dshfs/dshfs/internal/fixtures"
)

// artifactFile is one fixture artifact with what its name says.
type artifactFile struct {
	path       string
	id         string
	gen        int
	compressed bool
}

// fixtureArtifacts lists every v2/v3 artifact under fixtures/generations/<gen>/<encoding>, failing when
// there are none (a missing fixture set must not pass as an empty loop).
func fixtureArtifacts(t *testing.T) []artifactFile {
	t.Helper()
	var out []artifactFile
	for _, gen := range []int{2, 3} {
		for _, enc := range []string{"raw", "zstd"} {
			name := "session.v" + strconv.Itoa(gen) + ".jsonl"
			if enc == "zstd" {
				name += ".zstd"
			}
			paths, err := filepath.Glob(fixtures.Path(t, "generations", "v"+strconv.Itoa(gen), enc, "*", "*", name))
			if err != nil {
				t.Fatal(err)
			}
			if len(paths) < 5 {
				t.Fatalf("v%d/%s: only %d fixture artifacts", gen, enc, len(paths))
			}
			for _, p := range paths {
				out = append(out, artifactFile{path: p, id: filepath.Base(filepath.Dir(p)), gen: gen, compressed: enc == "zstd"})
			}
		}
	}
	return out
}

func (a artifactFile) golden(t *testing.T) string {
	enc := "raw"
	if a.compressed {
		enc = "zstd"
	}
	return fixtures.Path(t, "generations", "golden", "v"+strconv.Itoa(a.gen)+"-"+enc, a.id+".jsonl")
}

// TestGoldenFixtures decodes every fixture artifact, v2 and v3, raw and compressed, and compares the
// restored header, inherited count and events byte for byte with what the harness's codec restores.
func TestGoldenFixtures(t *testing.T) {
	for _, a := range fixtureArtifacts(t) {
		t.Run(strings.TrimPrefix(a.path, fixtures.Path(t, "generations")), func(t *testing.T) {
			b, err := os.ReadFile(a.path)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(a.golden(t))
			if err != nil {
				t.Fatal(err)
			}
			art, err := generation.Decode(a.gen, a.compressed, b)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			got := art.AppendRestored(nil)
			if !bytes.Equal(got, want) {
				t.Fatalf("restored output differs from %s:\n%s", a.golden(t), firstDiff(got, want))
			}
			if art.Header.ID != a.id || art.Header.Version != a.gen {
				t.Errorf("header id %q version %d, want %q %d", art.Header.ID, art.Header.Version, a.id, a.gen)
			}
			for i, e := range art.Events {
				if e.Seq != int64(i) {
					t.Fatalf("event %d has seq %d", i, e.Seq)
				}
			}
			if art.Committed != int64(len(b)) {
				t.Errorf("committed %d of %d bytes of an intact artifact", art.Committed, len(b))
			}
		})
	}
}

// firstDiff shows the first differing line of two restored outputs.
func firstDiff(got, want []byte) string {
	g, w := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl []byte
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if !bytes.Equal(gl, wl) {
			return "line " + strconv.Itoa(i+1) + ":\n got  " + string(gl) + "\n want " + string(wl)
		}
	}
	return "(equal lines, different length)"
}
