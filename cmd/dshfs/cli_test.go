package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/fixtures"
)

const crashID = "main-session-30628611-e45f-4f98-9688-010e1428e585"
const tornID = "main-session-c652f155-0402-4151-9cf3-89ee925d873b"

// statusKeys is the session status schema of docs/tree.md, in order, with custody (the fleet store's) last.
var statusKeys = []string{"id", "state", "backend", "location", "formatVersion", "revision", "events", "nextSeq",
	"durableSeq", "pending", "balanced", "openTurn", "repairNeeded", "repairPreview", "tornBytes",
	"unknownOutcomes", "activeCompaction", "refusal", "lastError", "lastCommand", "custody"}

func parseStatus(t *testing.T, out string) event.Value {
	t.Helper()
	if !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 {
		t.Fatalf("status is not one LF-terminated line: %q", out)
	}
	v, err := event.Parse([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(v.Keys(), ","); got != strings.Join(statusKeys, ",") {
		t.Fatalf("status keys\n got %s\nwant %s", got, strings.Join(statusKeys, ","))
	}
	return v
}

func get(t *testing.T, v event.Value, key string) string {
	t.Helper()
	m, ok := v.Get(key)
	if !ok {
		t.Fatalf("no %s", key)
	}
	return string(event.Stringify(m))
}

func TestStatusView(t *testing.T) {
	zstd := fixtures.Path(t, "generated", "zstd")
	raw := fixtures.Path(t, "generated", "raw")
	cases := []struct {
		name  string
		args  []string
		want  map[string]string
		check func(t *testing.T, v event.Value)
	}{
		{"crashed session, stored view", []string{"cat", zstd, crashID, "--view", "status"}, map[string]string{
			"state": `"cold"`, "backend": `"jsonl"`, "formatVersion": "0", "events": "52", "nextSeq": "52", "durableSeq": "51",
			"pending": "0", "balanced": "false", "openTurn": "2", "repairNeeded": "true", "tornBytes": "0",
			"activeCompaction": "null", "refusal": "null", "lastError": "null", "lastCommand": "null",
		}, func(t *testing.T, v event.Value) {
			preview, _ := v.Get("repairPreview")
			if len(preview.Arr) != 3 {
				t.Fatalf("repairPreview has %d closers, want 3", len(preview.Arr))
			}
			u, _ := v.Get("unknownOutcomes")
			if len(u.Arr) != 1 || get(t, u.Arr[0], "callSeq") != "51" || get(t, u.Arr[0], "resolvedBySeq") != "null" ||
				get(t, u.Arr[0], "name") == "null" || strings.Join(u.Arr[0].Keys(), ",") != "callId,callSeq,turn,step,name,resolvedBySeq" {
				t.Fatalf("unknownOutcomes %s", event.Stringify(u))
			}
		}},
		{"crashed session, inspected view", []string{"cat", "--inspect", "--view=status", zstd, crashID}, map[string]string{
			"events": "55", "balanced": "true", "openTurn": "null", "repairNeeded": "true",
		}, func(t *testing.T, v event.Value) {
			u, _ := v.Get("unknownOutcomes")
			if len(u.Arr) != 1 || get(t, u.Arr[0], "resolvedBySeq") != "52" {
				t.Fatalf("an outcome stays unknown after repair, resolved by the synthetic result: %s", event.Stringify(u))
			}
		}},
		{"torn raw tail", []string{"cat", raw, tornID, "--view", "status"}, map[string]string{
			"backend": `"jsonl+raw"`, "events": "48", "repairNeeded": "true",
		}, func(t *testing.T, v event.Value) {
			if get(t, v, "tornBytes") == "0" {
				t.Fatal("torn raw tail not reported")
			}
		}},
		{"clean session", []string{"cat", raw, "main-session-fa821f4b-98fd-46aa-86bc-0955a88ef4b8", "--view", "status"}, map[string]string{
			"balanced": "true", "repairNeeded": "false", "repairPreview": "[]", "unknownOutcomes": "[]", "tornBytes": "0",
		}, nil},
		{"refused session", []string{"cat", fixtures.Path(t, "upstream", "refused-root"), "goal-session-placeholder", "--view", "status"}, map[string]string{
			"state": `"refused"`, "formatVersion": "null", "events": "0",
			"refusal": `{"kind":"corrupt","message":"corrupt session log: first line is not a session header"}`,
		}, func(t *testing.T, v event.Value) {
			if get(t, v, "location") == `""` || get(t, v, "revision") == `""` {
				t.Fatal("a refused session still reports its artifact and revision")
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, stderr := runCLI(c.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			v := parseStatus(t, out)
			for k, want := range c.want {
				if got := get(t, v, k); got != want {
					t.Errorf("%s = %s, want %s", k, got, want)
				}
			}
			if c.check != nil {
				c.check(t, v)
			}
		})
	}
}

func TestExitCodesAndErrors(t *testing.T) {
	raw := fixtures.Path(t, "generated", "raw")
	cfg := filepath.Join(t.TempDir(), "dshfs.toml")
	if err := os.WriteFile(cfg, []byte("read_only = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		args    []string
		code    int
		stderr  string // substring
		stdout  string // prefix
		wantOut bool
	}{
		{"no args", nil, 2, "usage:", "", false},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`, "", false},
		{"unknown flag", []string{"ls", "--frob", raw}, 2, "dshfs: unknown flag --frob\nusage: dshfs ls [--config FILE] [--json] STORE\nsee dshfs help ls\n", "", false},
		{"missing flag value", []string{"cat", raw, crashID, "--view"}, 2, "flag --view needs a value", "", false},
		{"unknown view", []string{"cat", raw, crashID, "--view", "nope"}, 2, `unknown view "nope"`, "", false},
		{"event past the end", []string{"cat", raw, crashID, "--view", "event:52"}, 2, "no such item", "", false},
		{"trace past the end", []string{"cat", raw, crashID, "--view", "trace:99"}, 2, "no such item", "", false},
		{"no such turn", []string{"cat", raw, crashID, "--view", "turn:9"}, 2, "no such item", "", false},
		{"malformed parameter", []string{"cat", raw, crashID, "--view", "turn:x"}, 2, `unknown view "turn:x"`, "", false},
		{"unknown id", []string{"cat", raw, "no-such-session"}, 2, `session "no-such-session" not found`, "", false},
		{"sqlite store", []string{"ls", fixtures.Path(t, "generated", "sqlite-v17.db")}, 0, "", "main-session-30628611", true},
		{"sqlite prefix", []string{"check", "sqlite:" + fixtures.Path(t, "generated", "sqlite-v17.db")}, 0, "", "", false},
		{"sqlite cat", []string{"cat", "--view", "header", fixtures.Path(t, "generated", "sqlite-v17.db"), crashID}, 0, "", `{"version":0,"id":"` + crashID, true},
		{"sqlite older schema", []string{"ls", fixtures.Path(t, "generated", "sqlite-v14.db")}, 2, "has schema version 14, incompatible with this build (17)", "", false},
		{"sqlite raw view", []string{"cat", "--view", "raw", fixtures.Path(t, "generated", "sqlite-v17.db"), crashID}, 2, "keeps no raw transcript", "", false},
		{"missing config", []string{"ls", "--config", "/nonexistent/dshfs.toml", raw}, 2, "--config", "", false},
		{"config accepted", []string{"ls", raw, "--config", cfg}, 0, "", "main-session-", true},
		{"flags after positionals", []string{"cat", raw, crashID, "--view", "header"}, 0, "", `{"version":0,"id":"` + crashID, true},
		{"explicit raw prefix", []string{"cat", "jsonl+raw:" + raw, crashID, "--view=header"}, 0, "", `{"version":0`, true},
		// every session is refused for its artifact in the other encoding (as the harness's lookup of it is)
		{"wrong explicit encoding", []string{"check", "jsonl:" + raw}, 1, "", crashID + "\tcorrupt\tsession artifact ", true},
		{"refused events view", []string{"cat", fixtures.Path(t, "upstream", "refused-root"), "goal-session-placeholder"}, 1,
			"corrupt session log: first line is not a session header", "", false},
		{"refused header view shows the line", []string{"cat", "--view", "header", fixtures.Path(t, "upstream", "refused-root"), "goal-session-placeholder"}, 0,
			"", `{"type":"session","version":0,"id":"goal-session-placeholder"`, true},
		{"refused raw view", []string{"cat", "--view", "raw", fixtures.Path(t, "upstream", "refused-root"), "goal-session-placeholder"}, 0,
			"", `{"type":"session","version":0,"id":"goal-session-placeholder"`, true},
		{"refused messages view", []string{"cat", "--view", "messages", fixtures.Path(t, "upstream", "refused-root"), "goal-session-placeholder"}, 1,
			"first line is not a session header", "", false},
		{"check one id", []string{"check", raw, crashID}, 0, "", "", false},
		{"check json refused", []string{"check", "--json", fixtures.Path(t, "upstream", "refused-root")}, 1, "",
			`{"id":"goal-`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, stderr := runCLI(c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, c.code, stderr)
			}
			if !strings.Contains(stderr, c.stderr) {
				t.Errorf("stderr %q lacks %q", stderr, c.stderr)
			}
			if c.wantOut && !strings.HasPrefix(out, c.stdout) {
				t.Errorf("stdout %.200q does not start with %q", out, c.stdout)
			}
			if !c.wantOut && out != "" {
				t.Errorf("unexpected stdout %.200q", out)
			}
		})
	}
}

func TestLsJSON(t *testing.T) {
	code, out, _ := runCLI("ls", "--json", fixtures.Path(t, "generated", "zstd"))
	if code != 0 {
		t.Fatal(code)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines", len(lines))
	}
	for _, l := range lines {
		v, err := event.Parse([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(v.Keys(), ",") != "id,projectDir,revision,header,refusal" {
			t.Fatalf("keys %v", v.Keys())
		}
		if get(t, v, "refusal") != "null" || get(t, v, "projectDir") != `"--home-dev-projects-acme-api--"` {
			t.Fatalf("entry %s", l)
		}
		h, _ := v.Get("header")
		if get(t, h, "id") != get(t, v, "id") || get(t, h, "version") != "0" {
			t.Fatalf("header %s", l)
		}
	}
}

const compactionID = "main-session-39ade10b-6855-483e-897d-dd835505a4e6"

func TestProjectionViews(t *testing.T) {
	raw := fixtures.Path(t, "generated", "raw")
	_, events, _ := runCLI("cat", raw, compactionID, "--view", "events")
	lines := strings.Split(strings.TrimSuffix(events, "\n"), "\n")

	t.Run("event:SEQ is line SEQ of events", func(t *testing.T) {
		for _, seq := range []int{0, 71, len(lines) - 1} {
			code, out, _ := runCLI("cat", raw, compactionID, "--view", fmt.Sprintf("event:%d", seq))
			if code != 0 || out != lines[seq]+"\n" {
				t.Fatalf("event:%d = %q", seq, out)
			}
		}
	})
	t.Run("compactions", func(t *testing.T) {
		code, out, _ := runCLI("cat", raw, compactionID, "--view", "compactions")
		recs := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if code != 0 || len(recs) != 2 {
			t.Fatalf("exit %d, %q", code, out)
		}
		for _, r := range recs {
			v, err := event.Parse([]byte(r))
			if err != nil || get(t, v, "state") != `"complete"` {
				t.Fatalf("record %s", r)
			}
		}
		if code, out, _ := runCLI("cat", raw, compactionID, "--view", "prunes"); code != 0 {
			t.Fatalf("prunes: %d %q", code, out)
		}
	})
	t.Run("trace of a shadowed event", func(t *testing.T) {
		code, out, _ := runCLI("cat", raw, compactionID, "--view", "shadowed")
		if code != 0 || out == "" {
			t.Fatalf("shadowed: %d %q", code, out)
		}
		first, _ := event.Parse([]byte(strings.SplitN(out, "\n", 2)[0]))
		seq := get(t, first, "seq")
		code, out, _ = runCLI("cat", raw, compactionID, "--view", "trace:"+seq)
		v, err := event.Parse([]byte(out))
		if code != 0 || err != nil {
			t.Fatalf("trace: %d %q", code, out)
		}
		if get(t, v, "state") != `"shadowed"` || get(t, v, "replacedBy") == "null" ||
			strings.Join(v.Keys(), ",") != "seq,type,state,replacedBy,replacementChain,replacedEventSeqs,sourceEventSeqs,derivedEventSeqs" {
			t.Fatalf("trace %s", out)
		}
	})
	t.Run("turn:N holds the turn's brackets", func(t *testing.T) {
		code, out, _ := runCLI("cat", raw, compactionID, "--view", "turn:2")
		ls := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if code != 0 || !strings.Contains(ls[0], `"type":"turn/start"`) || !strings.Contains(ls[len(ls)-1], `"type":"turn/end"`) {
			t.Fatalf("turn:2 = %q", out)
		}
	})
	t.Run("status names no active compaction", func(t *testing.T) {
		_, out, _ := runCLI("cat", raw, compactionID, "--view", "status")
		if v := parseStatus(t, out); get(t, v, "activeCompaction") != "null" {
			t.Fatalf("activeCompaction %s", get(t, v, "activeCompaction"))
		}
	})
	t.Run("spill view of fixtures: every locator outside the roots", func(t *testing.T) {
		code, out, _ := runCLI("cat", fixtures.Path(t, "upstream", "raw"), "{{sessionId}}", "--view", "spill")
		if code != 0 || !strings.HasPrefix(out, "[") {
			t.Fatalf("spill: %d %q", code, out)
		}
	})
}

// TestCheckRefusesSurfaceViolations: the load validation runs the surface fold, so a log the harness
// refuses for surface reasons is refused by check, with the harness's wrapped text.
func TestCheckRefusesSurfaceViolations(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "--p--", "s")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	log := `{"type":"session","version":0,"id":"s","createdAt":1,"cwd":"/p","delegationDepth":0}
{"type":"user/message","seq":0,"time":1,"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"}}}
`
	if err := os.WriteFile(filepath.Join(dir, "session.jsonl"), []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI("check", root)
	want := "s\tcorrupt\tstored session \"s\" failed validation: Error: invalid seed event at index 0: session event \"user/message\" is surface-eligible and requires a surfaceOp marker\n"
	if code != 1 || out != want {
		t.Fatalf("exit %d\n got %q\nwant %q", code, out, want)
	}
}

// TestUsageErrorsShort: a usage error prints the mistake, the command's synopsis and where its help is —
// not the whole usage of every command.
func TestUsageErrorsShort(t *testing.T) {
	for _, c := range []struct {
		args  []string
		lines int
		want  string
	}{
		{[]string{"fork", "--frob"}, 3, "see dshfs help fork\n"},
		{[]string{"mount"}, 3, "usage: dshfs mount [--config FILE]"},
		{[]string{"frobnicate"}, 2, "see dshfs help\n"},
	} {
		code, _, stderr := runCLI(c.args...)
		if code != 2 || strings.Count(stderr, "\n") != c.lines || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q: want %d lines with %q", c.args, code, stderr, c.lines, c.want)
		}
	}
}

// TestNegativeNumberIsAnArgument: `fork STORE ID -1` reads -1 as the boundary, not as an unknown flag.
func TestNegativeNumberIsAnArgument(t *testing.T) {
	_, pos, err := parseArgs([]string{"store", "id", "-1", "--config", "x"}, map[string]bool{"config": true})
	if err != nil || len(pos) != 3 || pos[2] != "-1" {
		t.Errorf("parseArgs: %q %v", pos, err)
	}
	if _, _, err := parseArgs([]string{"-1x"}, map[string]bool{}); err == nil {
		t.Error("-1x is accepted as an argument")
	}
	code, _, stderr := runCLI("fork", t.TempDir(), "some-id", "-1")
	if strings.Contains(stderr, "unknown flag") || code == 0 {
		t.Errorf("fork STORE ID -1: exit %d %q", code, stderr)
	}
}

// TestLsCreatedAtISO: ls prints createdAt in ISO-8601 UTC; ls --json keeps the stored epoch milliseconds.
func TestLsCreatedAtISO(t *testing.T) {
	store := filepath.Join(t.TempDir(), "sessions")
	if code, _, stderr := runCLI("create", store, "iso-session"); code != 0 {
		t.Fatalf("create: %s", stderr)
	}
	code, out, stderr := runCLI("ls", store)
	f := strings.Split(strings.TrimSuffix(out, "\n"), "\t")
	if code != 0 || len(f) != 5 || !regexp.MustCompile(`^20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`).MatchString(f[2]) {
		t.Fatalf("ls: exit %d %q %s", code, out, stderr)
	}
	code, js, _ := runCLI("ls", "--json", store)
	var row struct{ Header struct{ CreatedAt int64 } }
	if code != 0 || json.Unmarshal([]byte(js), &row) != nil {
		t.Fatalf("ls --json: exit %d %q", code, js)
	}
	if got := time.UnixMilli(row.Header.CreatedAt).UTC().Format("2006-01-02T15:04:05.000Z"); got != f[2] {
		t.Errorf("ls prints %s, --json holds %d (%s)", f[2], row.Header.CreatedAt, got)
	}
}
