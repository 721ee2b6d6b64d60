package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/fixtures"
	"github.com/dshfs/dshfs/internal/namecodec"
)

// goldenSet pairs a fixture store root with the directory of the harness's answers for its sessions.
type goldenSet struct {
	name, root, golden string
	perRoot            bool // colliders: one golden dir per root, named after the root
	database           bool // root is a SQLite database: its sessions are the golden directory's
}

// nativeDatabase copies the database the harness's rc.8 SQLite provider wrote itself (WAL mode,
// top-level sessions with delegation_depth NULL) into a private directory: the provider refuses a
// group- or world-writable one, and a read must be seen to leave the directory as it was.
func nativeDatabase(t *testing.T) string {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(fixtures.Path(t, "generated", "sqlite-native-v17.db"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "sessions.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// dirNames lists a directory's entries, for checking that reading a store left it as it was.
func dirNames(t *testing.T, dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

func goldenSets(t *testing.T) []goldenSet {
	sets := []goldenSet{
		{"upstream-raw", fixtures.Path(t, "upstream", "raw"), fixtures.Path(t, "golden", "upstream"), false, false},
		{"upstream-zstd", fixtures.Path(t, "upstream", "zstd"), fixtures.Path(t, "golden", "upstream"), false, false},
		{"generated-raw", fixtures.Path(t, "generated", "raw"), fixtures.Path(t, "golden", "generated-raw"), false, false},
		{"generated-zstd", fixtures.Path(t, "generated", "zstd"), fixtures.Path(t, "golden", "generated-zstd"), false, false},
		{"generated-sqlite-native", nativeDatabase(t), fixtures.Path(t, "golden", "generated-sqlite-native"), false, true},
	}
	colliders, err := os.ReadDir(fixtures.Path(t, "upstream", "colliders"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range colliders {
		sets = append(sets, goldenSet{"colliders/" + c.Name(), fixtures.Path(t, "upstream", "colliders", c.Name()),
			fixtures.Path(t, "golden", "colliders", c.Name()), true, false})
	}
	return sets
}

// runCLI runs the command in-process and returns its exit code, stdout and stderr.
func runCLI(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// firstDiff names the first differing line of two texts, for readable golden failures.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n got: %.400s\nwant: %.400s", i+1, gl, wl)
		}
	}
	return "identical lines (different trailing bytes?)"
}

// setSessions are a golden set's sessions: a JSONL root's session directories, or for a database the
// sessions its golden directory answers for.
func setSessions(t *testing.T, set goldenSet) []fixtures.Session {
	if !set.database {
		return fixtures.Sessions(t, set.root)
	}
	entries, err := os.ReadDir(set.golden)
	if err != nil {
		t.Fatal(err)
	}
	var out []fixtures.Session
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, fixtures.Session{Root: set.root, EncodedID: e.Name(), Path: set.root})
		}
	}
	return out
}

func TestGoldenConformance(t *testing.T) {
	sessions := 0
	for _, set := range goldenSets(t) {
		var before string
		if set.database {
			before = dirNames(t, filepath.Dir(set.root))
		}
		for _, s := range setSessions(t, set) {
			id, ok := namecodec.DecodeSegment(s.EncodedID)
			if !ok {
				t.Fatalf("%s: undecodable session dir %q", set.name, s.EncodedID)
			}
			gdir := filepath.Join(set.golden, s.EncodedID)
			if set.perRoot {
				gdir = set.golden
			}
			sessions++
			t.Run(set.name+"/"+s.EncodedID, func(t *testing.T) {
				for _, c := range []struct {
					file string
					args []string
				}{
					{"stored.jsonl", []string{"cat", "--view", "events", set.root, id}},
					{"events.jsonl", []string{"cat", set.root, id, "--inspect", "--view", "events"}},
					{"header.json", []string{"cat", "--view=header", set.root, id}},
					{"messages.jsonl", []string{"cat", "--inspect", set.root, id, "--view", "messages"}},
				} {
					want, err := os.ReadFile(filepath.Join(gdir, c.file))
					if err != nil {
						t.Fatal(err)
					}
					code, got, stderr := runCLI(c.args...)
					if code != 0 {
						t.Fatalf("%v: exit %d: %s", c.args, code, stderr)
					}
					if got != string(want) {
						t.Errorf("%s differs from golden %s: %s", strings.Join(c.args[:len(c.args)-2], " "), c.file, firstDiff(got, string(want)))
					}
				}
				// the surface view lists the harness's foldSurface nodes, in order
				code, got, stderr := runCLI("cat", "--inspect", "--view", "surface", set.root, id)
				if code != 0 {
					t.Fatalf("surface view: exit %d: %s", code, stderr)
				}
				var seqs []string
				for _, line := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
					if line == "" {
						continue
					}
					v, err := event.Parse([]byte(line))
					if err != nil {
						t.Fatal(err)
					}
					seq, _ := v.Get("seq")
					seqs = append(seqs, event.FormatNumber(seq.Num))
				}
				golden, err := os.ReadFile(filepath.Join(gdir, "surface.json"))
				if err != nil {
					t.Fatal(err)
				}
				gv, err := event.Parse(golden)
				if err != nil {
					t.Fatal(err)
				}
				nodes, _ := gv.Get("nodes")
				if want := string(event.Stringify(nodes)); "["+strings.Join(seqs, ",")+"]" != want {
					t.Errorf("surface view seqs [%s], golden nodes %s", strings.Join(seqs, ","), want)
				}
			})
		}
		if set.database {
			if after := dirNames(t, filepath.Dir(set.root)); after != before {
				t.Errorf("%s: reading the database changed its directory: %q, was %q", set.name, after, before)
			}
		}
	}
	if sessions < 60+60+5+5+5+43 {
		t.Fatalf("only %d fixture sessions checked", sessions)
	}
}

func TestCheckFixtureRoots(t *testing.T) {
	for _, set := range goldenSets(t) {
		code, out, stderr := runCLI("check", set.root)
		if code != 0 || out != "" {
			t.Errorf("check %s: exit %d, output %q %s", set.name, code, out, stderr)
		}
	}
	refused := fixtures.Path(t, "upstream", "refused-root")
	code, out, _ := runCLI("check", refused)
	if code != 1 {
		t.Fatalf("check refused-root: exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("check refused-root: want 2 refusals, got %q", out)
	}
	for _, l := range lines {
		f := strings.Split(l, "\t")
		if len(f) != 3 || f[1] != "corrupt" || f[2] != "corrupt session log: first line is not a session header" {
			t.Errorf("refusal line %q", l)
		}
	}
	code, out, _ = runCLI("ls", refused)
	if code != 0 || strings.Count(out, "\trefused\t") != 2 {
		t.Errorf("ls refused-root: exit %d %q", code, out)
	}
}
