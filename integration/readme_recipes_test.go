package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeRecipes are the fenced shell blocks of README.md's "## Recipes" section, in order.
func readmeRecipes(t *testing.T) []string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "\n## Recipes\n")
	if start < 0 {
		t.Fatal(`README.md has no "## Recipes" section`)
	}
	text = text[start+1:]
	if end := strings.Index(text[3:], "\n## "); end >= 0 {
		text = text[:end+3]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)\n```sh\n(.*?)\n```\n").FindAllStringSubmatch(text, -1) {
		blocks = append(blocks, m[1]+"\n")
	}
	return blocks
}

// TestReadmeRecipes runs every shell block of README.md's recipes section verbatim, in order, against a
// writable mount of the demo store, with the system's jq (Debian's 1.6 on CI) and dshfs on PATH, in a
// scratch working directory and with a scratch $HOME: each exits 0 and prints what the README says it
// prints, or at least something. A script (a block starting with #!) runs with the arguments its usage
// line names; a block holding a here-document runs whole.
func TestReadmeRecipes(t *testing.T) {
	blocks := readmeRecipes(t)
	if len(blocks) < 6 {
		t.Fatalf("README.md's recipes section has %d shell blocks", len(blocks))
	}
	dir := t.TempDir()
	cli(t, 0, "demo", dir) // in its own process: the writer locks it takes end with it
	store := filepath.Join(dir, "sessions")
	cfg := filepath.Join(dir, "dshfs.toml")
	if err := os.WriteFile(cfg, []byte("[spill]\nroots = [\""+filepath.Join(dir, "spill")+"\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := startMount(t, "--config", cfg, store)
	// one minimal complete turn (the README's append recipe writes its own turn.jsonl)
	turn := filepath.Join(dir, "surrogate-turn.jsonl")
	if err := os.WriteFile(turn, []byte(`{"type":"turn/start","data":{"turn":1}}
{"type":"step/start","data":{"turn":1,"step":1}}
{"type":"user/message","data":{"id":"u1","role":"user","content":[{"type":"text","text":"hello"}],"source":{"kind":"user"}},"surfaceOp":"append"}
{"type":"assistant/message","data":{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","content":[{"type":"text","text":"hi"}],"source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-flash"}}},"sourceEventSeqs":[],"surfaceOp":"append"}
{"type":"step/end","data":{"turn":1,"step":1}}
{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	// a session whose user wrote half an emoji, as the harness logs it (a lone surrogate): jq 1.6 cannot
	// parse that line, so the recipes must skip it and the last jq recipe must name it
	mustRun(t, "mkdir", filepath.Join(m.dir, "sessions", "recipe-surrogate"))
	lone := strings.Replace(string(turnBytes(t, turn)), `"text":"hello"`, `"text":"cut \ud83d"`, 1)
	if err := os.WriteFile(filepath.Join(m.dir, "sessions", "recipe-surrogate", "append"), []byte(lone), 0); err != nil {
		t.Fatal(err)
	}
	backups := filepath.Join(dir, "backups")
	// the arguments of each script, by its usage line
	scriptArgs := map[string][]string{
		"# append-flush MNT ID FILE":  {m.dir, "my-session", filepath.Join(dir, "turn.jsonl")},
		"# dsh-backup [STORE] [BASE]": {store, backups},
	}
	// what each block must print, by a line it holds (the outputs the README shows)
	wants := map[string]*regexp.Regexp{
		"grep -l 'FAIL'":                     regexp.MustCompile(`/sessions/[^/\n]+/events\.jsonl\n`),
		"select(.type==\"tool/call\")":       regexp.MustCompile(`\{"session":"demo-[a-z-]+","name":"[^"]+","args":`),
		"append-flush MNT ID FILE":           regexp.MustCompile(`(?m)^\d+ events? made durable; durable through seq \d+$`),
		"dsh-backup [STORE] [BASE]":          regexp.MustCompile(`verified: \d+ sessions, \d+ events, \d+ files`),
		"catch true":                         regexp.MustCompile(`^\S+/sessions/recipe-surrogate/events\.jsonl:3\n$`),
		"cat $M/sessions/clean-turn1/parent": regexp.MustCompile(`^clean-turn1\ndemo-clean\n$`),
		"echo compact >":                     regexp.MustCompile(`^Compacted 7 history items \(~\d+ tokens\)\.\n$`),
		"wc -l $M/sessions/demo-fork-parent": regexp.MustCompile(`(?s)^\s*2 \S*surface\.jsonl\n\s*7 \S*shadowed\.jsonl\n`),
	}
	bin := filepath.Dir(dshfsBin(t))
	home := filepath.Join(dir, "home") // the rsync recipe copies to ~/: never the real home
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "M="+m.dir, "PATH="+bin+":"+os.Getenv("PATH"), "HOME="+home)
	type step struct {
		block int
		text  string   // what the README shows (for the error)
		argv  []string // how it runs
	}
	// a script runs whole with its arguments; any other block line by line (each line is one command,
	// comments aside), so that every command must exit 0, not only a block's last
	var steps []step
	for i, block := range blocks {
		scripted := false
		for usage, args := range scriptArgs {
			if strings.HasPrefix(block, "#!/bin/sh\n"+usage) {
				script := filepath.Join(dir, fmt.Sprintf("recipe-%d.sh", i+1))
				if err := os.WriteFile(script, []byte(block), 0o755); err != nil {
					t.Fatal(err)
				}
				steps = append(steps, step{i, block, append([]string{script}, args...)})
				scripted = true
			}
		}
		if strings.HasPrefix(block, "#!") && !scripted {
			t.Fatalf("recipe %d is a script the test has no arguments for:\n%s", i+1, block)
		}
		if scripted {
			continue
		}
		if strings.Contains(block, "<<'EOF'") {
			steps = append(steps, step{i, block, []string{"sh", "-e", "-c", block}})
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				steps = append(steps, step{i, line, []string{"sh", "-c", line}})
			}
		}
	}
	checked := map[string]bool{}
	for _, s := range steps {
		ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
		cmd := exec.CommandContext(ctx, s.argv[0], s.argv[1:]...)
		cmd.Env, cmd.Dir = env, dir
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Errorf("recipe %d failed (%v):\n%s\nstdout:\n%s\nstderr:\n%s\nmount log:\n%s", s.block+1, err, s.text, stdout.String(), stderr.String(), m.log)
			continue
		}
		// commands that print nothing by design: a ctl write, the copy
		silent := strings.HasPrefix(s.text, "echo ") && !strings.Contains(s.text, "&& jq") ||
			strings.HasPrefix(s.text, "mkdir ")
		if stdout.Len() == 0 && !silent {
			t.Errorf("recipe %d printed nothing:\n%s\nstderr:\n%s", s.block+1, s.text, stderr.String())
		}
		for key, re := range wants {
			if !strings.Contains(s.text, key) {
				continue
			}
			checked[key] = true
			if !re.Match(stdout.Bytes()) {
				t.Errorf("recipe %d: output does not match %s:\n%s\nstdout:\n%s\nstderr:\n%s", s.block+1, re, s.text, stdout.String(), stderr.String())
			}
		}
		if strings.Contains(s.text, "rsync -a $M/store/") {
			// the copy is a store the CLI lists: every demo session
			if out := cli(t, 0, "ls", filepath.Join(home, "dsh-store-copy")); bytes.Count(out, []byte("demo-")) < 6 {
				t.Errorf("the rsync copy of store/ lists:\n%s", out)
			}
		}
	}
	for key := range wants {
		if !checked[key] {
			t.Errorf("no recipe holds %q any more: the test's expectations need updating with the README", key)
		}
	}
}

func turnBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
