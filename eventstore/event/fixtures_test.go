package event

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/dshfs/dshfs/internal/fixtures"
)

// fixturesDir returns the shared fixtures directory; tests that need it fail, never skip, without it.
func fixturesDir(tb testing.TB) string { return fixtures.Path(tb) }

// sessionFiles maps each session directory name (the encoded id) under a raw store root to its
// session.jsonl path.
func sessionFiles(tb testing.TB, root string) map[string]string {
	tb.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == "session.jsonl" {
			out[filepath.Base(filepath.Dir(path))] = path
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	if len(out) == 0 {
		tb.Fatalf("no sessions under %s", root)
	}
	return out
}

// sortedKeys returns a map's keys in order so test output is stable.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// splitRecords splits a raw log into its header record (with LF), its complete event lines (without
// LF) and the torn LF-less tail fragment, if any.
func splitRecords(tb testing.TB, data []byte) (header []byte, lines [][]byte, torn []byte) {
	tb.Helper()
	i := bytes.IndexByte(data, '\n')
	if i < 0 {
		tb.Fatal("log without header line")
	}
	header, rest := data[:i+1], data[i+1:]
	for len(rest) > 0 {
		j := bytes.IndexByte(rest, '\n')
		if j < 0 {
			return header, lines, rest
		}
		lines = append(lines, rest[:j])
		rest = rest[j+1:]
	}
	return header, lines, nil
}

// firstDiff reports the first differing line of two LF-separated texts.
func firstDiff(got, want []byte) string {
	g := bytes.Split(got, []byte("\n"))
	w := bytes.Split(want, []byte("\n"))
	for i := 0; i < len(g) || i < len(w); i++ {
		var a, b []byte
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if !bytes.Equal(a, b) {
			return "line " + itoa(i+1) + ":\n got: " + string(a) + "\nwant: " + string(b)
		}
	}
	return "no difference"
}

func itoa(i int) string { return FormatNumber(float64(i)) }

// allFixtureLines returns every complete event line of every raw fixture session.
func allFixtureLines(tb testing.TB) [][]byte {
	tb.Helper()
	fx := fixturesDir(tb)
	var out [][]byte
	for _, root := range []string{"upstream/raw", "upstream/colliders", "generated/raw"} {
		files := sessionFiles(tb, filepath.Join(fx, root))
		for _, name := range sortedKeys(files) {
			data, err := os.ReadFile(files[name])
			if err != nil {
				tb.Fatal(err)
			}
			_, lines, _ := splitRecords(tb, data)
			out = append(out, lines...)
		}
	}
	return out
}
