package generation_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/generation"
	"github.com/dshfs/dshfs/internal/fixtures"
)

// v4Artifacts lists the session artifacts of one v4 fixture root with the generation and encoding their
// names state, failing when there are none.
func v4Artifacts(t *testing.T, root string) []artifactFile {
	t.Helper()
	paths, err := filepath.Glob(fixtures.Path(t, "generations", "v4", root, "*", "*", "session.v*.jsonl*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 4 {
		t.Fatalf("v4/%s: only %d fixture artifacts", root, len(paths))
	}
	var out []artifactFile
	for _, p := range paths {
		name := filepath.Base(p)
		gen := 4
		if strings.HasPrefix(name, "session.v5.") {
			gen = 5
		}
		out = append(out, artifactFile{path: p, id: filepath.Base(filepath.Dir(p)), gen: gen, compressed: strings.HasSuffix(name, ".zstd")})
	}
	return out
}

func decodeV4(b []byte, a artifactFile) (*generation.Artifact, error) {
	return generation.DecodeWith(b, generation.Options{Generation: a.gen, Compressed: a.compressed,
		Recovery: generation.Recoverable, MaxFrameBytes: generation.DefaultMaxFrameBytes})
}

// TestV4Fixtures decodes every v4 fixture session, raw and compressed, in both layouts the harness writes
// (a migration's header frame and one body frame; a live session's frame per batch), and compares the
// logical header, the inherited cut and every event byte for byte with what the harness's v4 restore
// yields for it (fixtures/generations/v4/expected).
func TestV4Fixtures(t *testing.T) {
	for _, root := range []string{"raw-root", "zstd-root"} {
		for _, a := range v4Artifacts(t, root) {
			t.Run(root+"/"+a.id, func(t *testing.T) {
				exp := func(ext string) []byte {
					b, err := os.ReadFile(fixtures.Path(t, "generations", "v4", "expected", root, a.id+ext))
					if err != nil {
						t.Fatal(err)
					}
					return b
				}
				b, err := os.ReadFile(a.path)
				if err != nil {
					t.Fatal(err)
				}
				art, err := decodeV4(b, a)
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				if !bytes.Equal(art.Header.Raw, bytes.TrimSpace(exp(".header.json"))) {
					t.Errorf("header\n got  %s\n want %s", art.Header.Raw, exp(".header.json"))
				}
				var meta struct {
					InheritedEventCount int64 `json:"inheritedEventCount"`
					Events              int   `json:"events"`
				}
				if err := json.Unmarshal(exp(".meta.json"), &meta); err != nil {
					t.Fatal(err)
				}
				if art.InheritedEventCount != meta.InheritedEventCount || len(art.Events) != meta.Events {
					t.Errorf("cut %d, %d events; want %d, %d", art.InheritedEventCount, len(art.Events), meta.InheritedEventCount, meta.Events)
				}
				var got []byte
				for _, e := range art.Events {
					got = append(append(got, e.Raw...), '\n')
				}
				if want := exp(".events.jsonl"); !bytes.Equal(got, want) {
					t.Fatalf("events differ:\n%s", firstDiff(got, want))
				}
				if art.Committed != int64(len(b)) {
					t.Errorf("committed %d of %d bytes of an intact artifact", art.Committed, len(b))
				}
			})
		}
	}
}

// TestV4Refusals decodes the fixtures the harness refuses and compares class and text with its refusal.
func TestV4Refusals(t *testing.T) {
	for _, a := range v4Artifacts(t, "refuse-root") {
		t.Run(a.id, func(t *testing.T) {
			want, err := os.ReadFile(fixtures.Path(t, "generations", "v4", "expected", "refuse-root", a.id+".error.txt"))
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(a.path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = decodeV4(b, a)
			if err == nil {
				t.Fatal("decoded an artifact the harness refuses")
			}
			if got := jsErrorName(err) + ": " + err.Error(); got != strings.TrimSpace(string(want)) {
				t.Errorf("refusal\n got  %s\n want %s", got, want)
			}
		})
	}
}

// jsErrorName is the harness's class name of a refusal.
func jsErrorName(err error) string {
	var named interface{ JSErrorName() string }
	if errors.As(err, &named) {
		return named.JSErrorName()
	}
	var u *generation.UnsupportedGenerationError
	if errors.As(err, &u) {
		return string(generation.ClassUnsupported)
	}
	return "Error"
}
