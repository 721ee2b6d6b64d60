package generation_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/generation"
	"github.com/dshfs/dshfs/internal/fixtures"
	"github.com/dshfs/dshfs/internal/harness"
)

// loadV4 is a v4 fixture session (raw-root) whose id starts with idPrefix.
func loadV4(t *testing.T, idPrefix string) session {
	t.Helper()
	paths, err := filepath.Glob(fixtures.Path(t, "generations", "v4", "raw-root", "*", idPrefix+"*", "session.v4.jsonl"))
	if err != nil || len(paths) != 1 {
		t.Fatalf("v4 fixture %s: %v %v", idPrefix, paths, err)
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	return session{gen: 4, lines: strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")}
}

// TestV4InteropMutations is a differential test against the harness's own v4 code (decode-v4.mjs): random
// single changes to v4 fixture sessions — a member replaced, removed or added at some depth, a row
// duplicated, dropped or moved — must be decided alike: the same header and events restored, or both
// refusing, with the same class and text where the harness's refusal is a session-format error.
func TestV4InteropMutations(t *testing.T) {
	kit := harness.GetFormatsV4(t)
	seed := uint64(4)
	if s := os.Getenv("DSHFS_MUTATION_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	r := rand.New(rand.NewPCG(seed, 11))
	bases := []string{"main-session-fa821f4b", "main-session-39ade10b", "main-session-cdf51971", "main-session-synthetic-v4"}
	dir := t.TempDir()
	for n := range mutationCount(t) {
		base := loadV4(t, bases[r.IntN(len(bases))])
		s, what := mutate(t, r, base)
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			path := s.write(t, filepath.Join(dir, strconv.Itoa(n)), s.text(""), false)
			want, err := kit.Decode(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s", what, want.Refusal)
			art, derr := generation.DecodeWith(s.text(""), generation.Options{Generation: 4, Recovery: generation.Recoverable})
			switch {
			case want.Refusal == "" && derr != nil:
				t.Fatalf("refused what the harness restores: %v", derr)
			case want.Refusal != "" && derr == nil:
				t.Fatalf("restored what the harness refuses (%s)", want.Refusal)
			case want.Refusal != "":
				if strings.HasPrefix(want.Refusal, "SessionFormat") {
					var fe *generation.FormatError
					var ue *generation.UnsupportedGenerationError
					got := derr.Error()
					if errors.As(derr, &fe) {
						got = string(fe.Class) + ": " + fe.Message
					} else if errors.As(derr, &ue) {
						got = string(generation.ClassUnsupported) + ": " + got
					}
					if got != want.Refusal {
						t.Fatalf("refusal text\n got  %s\n want %s", got, want.Refusal)
					}
				}
			default:
				var got []byte
				for _, e := range art.Events {
					got = append(append(got, e.Raw...), '\n')
				}
				if !bytes.Equal(art.Header.Raw, want.Header) || !bytes.Equal(got, want.Events) {
					t.Fatalf("restored output differs from the harness's:\n%s", firstDiff(got, want.Events))
				}
			}
		})
	}
}
