package generation_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
	"github.com/dshfs/dshfs/internal/harness"
)

// mutationCount is how many random variations TestInteropMutations checks per run; DSHFS_MUTATIONS
// raises it for a longer differential run.
func mutationCount(t *testing.T) int {
	if s := os.Getenv("DSHFS_MUTATIONS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("DSHFS_MUTATIONS=%q", s)
		}
		return n
	}
	return 40
}

// oddValues are the replacement values a mutation plants: each breaks some rule somewhere.
var oddValues = []string{`null`, `-1`, `0`, `1.5`, `-0`, `"x"`, `""`, `[]`, `{}`, `true`, `9007199254740993`, `[1,2]`, `{"op":"replace","start":0,"end":0}`, `"append"`, `2`}

// mutate changes one thing in one row of s: a member replaced, removed or added at some depth, or a row
// duplicated, dropped or moved.
func mutate(t *testing.T, r *rand.Rand, s session) (session, string) {
	out := s.clone()
	i := r.IntN(len(s.lines))
	switch r.IntN(10) {
	case 0:
		if i == 0 {
			i = 1
		}
		out.lines = append(out.lines[:i+1:i+1], out.lines[i:]...)
		return out, "duplicate row " + strconv.Itoa(i)
	case 1:
		if i == 0 {
			i = 1
		}
		out.lines = append(out.lines[:i:i], out.lines[i+1:]...)
		return out, "drop row " + strconv.Itoa(i)
	}
	v := s.row(t, i)
	path, nv := mutateValue(r, v, oddValues[r.IntN(len(oddValues))])
	out.lines[i] = string(event.Stringify(nv))
	return out, "row " + strconv.Itoa(i) + " " + path
}

// mutateValue walks down random members of v and replaces, removes or adds one.
func mutateValue(r *rand.Rand, v event.Value, odd string) (string, event.Value) {
	x, _ := event.Parse([]byte(odd))
	switch {
	case v.Kind == event.KindObject && len(v.Obj) > 0 && r.IntN(6) > 0:
		k := r.IntN(len(v.Obj))
		key := v.Obj[k].Key
		if r.IntN(4) == 0 {
			return "-" + key, del(v, key)
		}
		p, nv := mutateValue(r, v.Obj[k].Value, odd)
		return key + "." + p, set(v, key, nv)
	case v.Kind == event.KindObject && r.IntN(4) == 0:
		return "+extra", set(v, "extra", x)
	case v.Kind == event.KindArray && len(v.Arr) > 0 && r.IntN(6) > 0:
		k := r.IntN(len(v.Arr))
		arr := append([]event.Value(nil), v.Arr...)
		p, nv := mutateValue(r, arr[k], odd)
		arr[k] = nv
		return strconv.Itoa(k) + "." + p, event.Array(arr...)
	}
	return "=" + odd, x
}

// TestInteropMutations is a differential test: random single changes to fixture sessions, raw or in
// batched zstd frames, read strictly or recoverably, each decided by the harness's codec, must be
// decided alike here (same restored bytes, or both refusing with the same text where the refusal is a
// format error).
func TestInteropMutations(t *testing.T) {
	f := harness.GetFormats(t)
	seed := uint64(26)
	if s := os.Getenv("DSHFS_MUTATION_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	r := rand.New(rand.NewPCG(seed, 7))
	bases := []string{cleanID, compactionID, crashID, "main-session-cdf51971"}
	dir := t.TempDir()
	for n := range mutationCount(t) {
		gen := 2 + r.IntN(2)
		base := loadSession(t, gen, bases[r.IntN(len(bases))])
		s, what := mutate(t, r, base)
		compressed, rec := r.IntN(3) == 0, generation.Recovery(r.IntN(2))
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			b := s.text("")
			if compressed {
				b = s.compressed(t, true, false)
			}
			path := s.write(t, filepath.Join(dir, strconv.Itoa(n)), b, compressed)
			decode := f.Decode
			if rec == generation.Recoverable {
				decode = f.DecodeRecoverable
			}
			want, err := decode(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("v%d %s (zstd %v, recovery %d): %s", gen, what, compressed, rec, want.Refusal)
			compare(t, want, path, gen, compressed, rec)
		})
	}
}
