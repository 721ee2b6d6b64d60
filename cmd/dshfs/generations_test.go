package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/fixtures"
)

// storeBytes is every file of a store by its root-relative path.
func storeBytes(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGenerationStoresServed: stores the harness writes from 0.1.3 on — sessions kept only as
// session.v2/v3.jsonl[.zstd], and v0 logs with their v3 successors beside them — list every session from its
// current generation (never absent, never served from the v0 file): check passes, cat prints the events and
// the header exactly as the harness's published codec restores them, status names the current file, and a
// v3 session's messages are refused with the reason.
func TestGenerationStoresServed(t *testing.T) {
	for _, set := range [][2]string{{"v3", "raw"}, {"v3", "zstd"}, {"v2", "raw"}, {"v2", "zstd"}, {"beside", "raw"}, {"beside", "zstd"}} {
		t.Run(set[0]+"/"+set[1], func(t *testing.T) {
			store := fixtures.CopyTree(t, fixtures.Path(t, "generations", set[0], set[1]))
			gen := set[0]
			if gen == "beside" {
				gen = "v3"
			}
			file := "session." + gen + ".jsonl"
			if set[1] == "zstd" {
				file += ".zstd"
			}
			sessions, _ := filepath.Glob(filepath.Join(store, "*", "*")) // the fixture ids need no encoding
			if len(sessions) < 5 {
				t.Fatalf("%d fixture sessions", len(sessions))
			}
			code, out, stderr := runCLI("ls", "--json", store)
			if code != 0 || strings.Count(out, "\n") != len(sessions) || stderr != "" {
				t.Fatalf("ls: exit %d, %d lines\n%s%s", code, strings.Count(out, "\n"), out, stderr)
			}
			for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
				v, err := event.Parse([]byte(l))
				if err != nil {
					t.Fatal(err)
				}
				if r := get(t, v, "refusal"); r != "null" || !strings.HasPrefix(get(t, v, "header"), `{"version":`+gen[1:]+`,`) {
					t.Fatalf("ls entry %s", l)
				}
			}
			if code, out, _ = runCLI("check", store); code != 0 || out != "" {
				t.Fatalf("check: exit %d\n%s", code, out)
			}
			for _, dir := range sessions {
				id := filepath.Base(dir)
				golden, err := os.ReadFile(fixtures.Path(t, "generations", "golden", gen+"-"+set[1], id+".jsonl"))
				if err != nil {
					t.Fatal(err)
				}
				first, events, _ := strings.Cut(string(golden), "\n")
				if code, out, stderr := runCLI("cat", store, id); code != 0 || out != events {
					t.Fatalf("cat %s: exit %d %s (events differ from the codec's restore)", id, code, stderr)
				}
				code, out, _ := runCLI("cat", "--view", "header", store, id)
				if code != 0 || !strings.HasPrefix(first, `{"header":`+strings.TrimSuffix(out, "\n")+`,`) {
					t.Fatalf("header %s: exit %d %s, golden %s", id, code, out, first)
				}
				code, out, _ = runCLI("cat", "--view", "status", store, id)
				st := parseStatus(t, out)
				if code != 0 || get(t, st, "state") == `"refused"` || !strings.HasSuffix(get(t, st, "location"), "/"+file+`"`) {
					t.Fatalf("status %s: exit %d %s", id, code, out)
				}
				code, out, _ = runCLI("cat", "--view", "raw", store, id)
				if code != 0 || !strings.HasPrefix(out, `{"type":"session","version":`+gen[1:]+`,`) {
					t.Fatalf("raw %s: exit %d %.100q", id, code, out)
				}
				code, _, stderr := runCLI("cat", "--view", "messages", store, id)
				if gen == "v3" && (code == 0 || !strings.Contains(stderr, "the messages of a format v3 session are not derived")) {
					t.Fatalf("messages of v3 %s: exit %d %s", id, code, stderr)
				}
				if gen == "v2" && code != 0 {
					t.Fatalf("messages of v2 %s: exit %d %s", id, code, stderr)
				}
				for _, view := range []string{"surface", "shadowed", "compactions", "spill", "transcript"} {
					if code, _, stderr := runCLI("cat", "--view", view, store, id); code != 0 {
						t.Fatalf("%s of %s: exit %d %s", view, id, code, stderr)
					}
				}
			}
		})
	}
}

// TestGenerationWritesChangeNothing: create of an id that exists only as v3, and every write to a session
// whose v0 log has a v3 successor beside it, is refused and changes no byte of the store.
func TestGenerationWritesChangeNothing(t *testing.T) {
	const id = "main-session-fa821f4b-98fd-46aa-86bc-0955a88ef4b8"
	for _, set := range [][2]string{{"v3", "zstd"}, {"v3", "raw"}, {"beside", "raw"}, {"beside", "zstd"}} {
		t.Run(set[0]+"/"+set[1], func(t *testing.T) {
			store := fixtures.CopyTree(t, fixtures.Path(t, "generations", set[0], set[1]))
			before := storeBytes(t, store)
			in := filepath.Join(t.TempDir(), "in.jsonl")
			if err := os.WriteFile(in, []byte(`{"type":"turn/start","seq":70,"time":1,"data":{"turn":9}}`+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				args []string
				want string
			}{
				{[]string{"create", "--cwd", "/home/dev/projects/acme-api", store, id}, `session "` + id + `" already exists`},
				{[]string{"create", "--cwd", "/elsewhere", store, id}, `session "` + id + `" already exists`},
				{[]string{"append", store, id, in}, "generation v3"},
				{[]string{"resume", store, id}, "generation v3"},
				{[]string{"fork", store, id, "5", "kid"}, "generation v3"},
				{[]string{"compact", store, id, "1", "2"}, "generation v3"},
			} {
				code, _, stderr := runCLI(c.args...)
				if code == 0 || !strings.Contains(stderr, c.want) {
					t.Errorf("dshfs %v: exit %d %s\nwant %s", c.args, code, stderr, c.want)
				}
			}
			if after := storeBytes(t, store); !reflect.DeepEqual(before, after) {
				var names []string
				for k := range after {
					names = append(names, k)
				}
				t.Fatalf("the store changed; it now holds %v", names)
			}
		})
	}
}

// TestForkIntoAnIdHeldAsV3: a fork of a v0 session into an id that exists only as a v3 file is refused,
// and nothing is written.
func TestForkIntoAnIdHeldAsV3(t *testing.T) {
	const clean = "main-session-fa821f4b-98fd-46aa-86bc-0955a88ef4b8"
	store := fixtures.CopyTree(t, fixtures.Path(t, "generated", "raw"))
	v3 := fixtures.Path(t, "generations", "v3", "raw", "--home-dev-projects-acme-api--", clean, "session.v3.jsonl")
	held := filepath.Join(store, "--home-dev-projects-acme-api--", "held")
	if err := os.MkdirAll(held, 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(v3)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(held, "session.v3.jsonl"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	before := storeBytes(t, store)
	if code, _, stderr := runCLI("fork", store, clean, "35", "held"); code != exitFound || !strings.Contains(stderr, `session "held" already exists`) {
		t.Fatalf("fork: exit %d %s", code, stderr)
	}
	if after := storeBytes(t, store); !reflect.DeepEqual(before, after) {
		t.Fatal("the store changed")
	}
}
