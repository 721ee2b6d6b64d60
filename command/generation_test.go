package command_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/dshfs/dshfs/command"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/fixtures"
)

// TestCreateGeneration: a created session's generation is the command's, else the Env's ([writer]
// generation), and "auto" follows the store — v4 in a root holding v4 sessions, v0 in a v0 root — and what
// is created is read back in that generation, ready to be appended to.
func TestCreateGeneration(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, root, env, line string
		want                  string // the artifact's file name
	}{
		{"auto in a v4 store", "v4", "auto", "create new cwd=/home/dev/projects/acme-api", "session.v4.jsonl.zstd"},
		{"default in a v4 store", "v4", "", "create new cwd=/home/dev/projects/acme-api", "session.v4.jsonl.zstd"},
		{"auto in a v0 store", "v0", "auto", "create new cwd=/home/dev/projects/acme-api", "session.jsonl.zstd"},
		{"the Env's 0 in a v4 store", "v4", "0", "create new cwd=/home/dev/projects/acme-api", "session.jsonl.zstd"},
		{"the command's 4 in a v0 store", "v0", "0", "create new cwd=/home/dev/projects/acme-api generation=4", "session.v4.jsonl.zstd"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := fixtures.Path(t, "generations", "v4", "zstd-root")
			if c.root == "v0" {
				src = fixtures.Path(t, "generations", "beside", "zstd")
				// the same sessions without their v3 successors: a v0 store
			}
			root := fixtures.CopyTree(t, src)
			if c.root == "v0" {
				matches, _ := filepath.Glob(filepath.Join(root, "*", "*", "session.v3.jsonl.zstd"))
				for _, m := range matches {
					if err := os.Remove(m); err != nil {
						t.Fatal(err)
					}
				}
			}
			b, err := jsonl.Open(root, jsonl.Zstd)
			if err != nil {
				t.Fatal(err)
			}
			st := eventstore.New(b)
			env := command.Env{Store: st, Generation: c.env, Front: command.CLI}
			if r := env.Line(ctx, "", c.line); r.Err != nil {
				t.Fatalf("%s: %v", c.line, r.Err)
			}
			if _, err := os.Stat(filepath.Join(root, "--home-dev-projects-acme-api--", "new", c.want)); err != nil {
				t.Fatalf("created: %v", err)
			}
			p, err := b.LoadStored(ctx, "new")
			if err != nil || len(p.Events) != 0 {
				t.Fatalf("read back: %v", err)
			}
			if r := env.Line(ctx, "new", "resume"); r.Err != nil {
				t.Fatalf("resume of the new session: %v", r.Err)
			}
		})
	}
	t.Run("refused", func(t *testing.T) {
		b, err := jsonl.Open(t.TempDir(), jsonl.Zstd)
		if err != nil {
			t.Fatal(err)
		}
		env := command.Env{Store: eventstore.New(b), Front: command.CLI}
		if r := env.Line(ctx, "", "create new generation=3"); r.Err == nil || r.Err.Failure != eventstore.Invalid {
			t.Fatalf("generation=3: %v", r.Err)
		}
	})
}
