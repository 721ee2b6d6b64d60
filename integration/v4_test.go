package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/internal/fixtures"
	"github.com/dshfs/dshfs/internal/harness"
)

// TestMountV4 mounts a store the harness's 0.2.x releases wrote (format v4, zstd) and drives it with users'
// tools: every session's events.jsonl is what the harness's v4 restore yields, its views parse with jq,
// its status.json says v4; a turn appended through `append` and flushed through `ctl` lands in the v4 file,
// which the harness's own v4 code restores to exactly what the mount then serves; resume of a session a
// crash left inside a turn closes it so that the harness's code still accepts it; prune through ctl cuts a
// long tool result in v4's shapes.
func TestMountV4(t *testing.T) {
	t.Parallel()
	store := fixtures.CopyTree(t, fixtures.Path(t, "generations", "v4", "zstd-root"))
	m := startMount(t, store)
	sessions := filepath.Join(m.dir, "sessions")
	ids, err := os.ReadDir(sessions)
	if err != nil || len(ids) != 11 {
		t.Fatalf("sessions/: %d entries, %v", len(ids), err)
	}
	for _, d := range ids {
		dir := filepath.Join(sessions, d.Name())
		want := readFile(t, fixtures.Path(t, "generations", "v4", "expected", "zstd-root", d.Name()+".events.jsonl"))
		if got := mustRun(t, "cat", filepath.Join(dir, "events.jsonl")); !bytes.Equal(got, want) {
			t.Fatalf("%s: events.jsonl differs from the harness's v4 restore", d.Name())
		}
		for _, view := range []string{"surface.jsonl", "messages.jsonl", "shadowed.jsonl", "usage.jsonl", "status.json", "header.json"} {
			mustRun(t, "jq", "-e", ".", filepath.Join(dir, view))
		}
		var st struct {
			FormatVersion int
			State         string
		}
		if err := json.Unmarshal(readFile(t, filepath.Join(dir, "status.json")), &st); err != nil || st.FormatVersion != 4 || st.State == "refused" {
			t.Fatalf("%s: status %+v, %v", d.Name(), st, err)
		}
		mustRun(t, "grep", "-q", "^## Turn 1", filepath.Join(dir, "transcript.md"))
	}

	// a session made in a v4 store is a v4 session ([writer] generation = "auto")
	mustRun(t, "mkdir", filepath.Join(sessions, "made-here"))
	made, _ := filepath.Glob(filepath.Join(store, "*", "made-here", "session.v4.jsonl.zstd"))
	if len(made) != 1 {
		t.Fatalf("mkdir in a v4 store made %v", made)
	}

	const id = "main-session-fa821f4b-98fd-46aa-86bc-0955a88ef4b8"
	dir := filepath.Join(sessions, id)
	file := filepath.Join(store, "--home-dev-projects-acme-api--", id, "session.v4.jsonl.zstd")
	before := readFile(t, file)
	turn := filepath.Join(t.TempDir(), "turn.jsonl")
	appended := []string{
		`{"type":"turn/start","data":{"turn":3}}`,
		`{"type":"step/start","data":{"turn":3,"step":1}}`,
		`{"type":"user/message","data":{"content":[{"type":"text","text":"again"}],"source":{"kind":"user"},"role":"user","id":"u-3"},"surfaceOp":"append"}`,
		`{"type":"assistant/message","data":{"turn":3,"step":1,"message":{"role":"assistant","content":[{"type":"tool-call","id":"c-3","name":"bash","arguments":"{}"}],"source":{"kind":"model"},"id":"a-3"}},"surfaceOp":"append"}`,
		`{"type":"tool/call","data":{"turn":3,"step":1,"callId":"c-3","name":"bash","arguments":"{}"}}`,
	}
	if err := os.WriteFile(turn, []byte(strings.Join(appended, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "sh", "-c", `cat "$1" >> "$2/append" && echo flush > "$2/ctl"`, "sh", turn, dir)
	after := readFile(t, file)
	if !bytes.HasPrefix(after, before) || len(after) == len(before) {
		t.Fatalf("the v4 file grew from %d to %d bytes, or changed what it held", len(before), len(after))
	}
	kit := harness.GetFormatsV4(t)
	agree := func(what string) {
		t.Helper()
		r, err := kit.Decode(file)
		if err != nil || r.Refusal != "" {
			t.Fatalf("%s: the harness's v4 code: %v %s", what, err, r.Refusal)
		}
		if got := mustRun(t, "cat", filepath.Join(dir, "events.jsonl")); !bytes.Equal(got, r.Events) {
			t.Fatalf("%s: the mount serves other events than the harness's v4 code restores", what)
		}
	}
	agree("append")

	// a line the v4 reader would refuse: nothing of the request is kept, the reason is in status.json
	bad := `{"type":"tool/result","data":{"turn":3,"step":1,"message":{"role":"user","id":"r","source":{"kind":"tool","callId":"c-3"},"content":[]}},"surfaceOp":"append"}`
	if r := run(t, "", "sh", "-c", `echo "$1" >> "$2/append"`, "sh", bad, dir); r.code == 0 {
		t.Fatal("a v3-shaped tool result was accepted")
	}
	if st := readFile(t, filepath.Join(dir, "status.json")); !bytes.Contains(st, []byte("requires a tool-role message")) {
		t.Fatalf("status.json does not say why: %s", st)
	}

	// the mount's writer lets go, as a crashed harness would; resume closes the open turn
	mustRun(t, "sh", "-c", `echo close > "$1/ctl"`, "sh", dir)
	mustRun(t, "sh", "-c", `echo resume > "$1/ctl"`, "sh", dir)
	agree("resume")
	events := mustRun(t, "cat", filepath.Join(dir, "events.jsonl"))
	if !bytes.Contains(events, []byte(`"code":"TOOL_OUTCOME_UNKNOWN"`)) || !bytes.Contains(events, []byte(`"reason":{"kind":"interrupted"}`)) {
		t.Fatalf("resume did not close the turn with the interrupted repair:\n%s", events[bytes.LastIndex(events[:len(events)-1], []byte("\n"))+1:])
	}

	// a long tool result in an open turn, pruned through ctl in v4's shapes, then the turn ends
	big := strings.Repeat("x", 10000)
	turn4 := []string{
		`{"type":"turn/start","data":{"turn":4}}`,
		`{"type":"step/start","data":{"turn":4,"step":1}}`,
		`{"type":"user/message","data":{"content":[{"type":"text","text":"once more"}],"source":{"kind":"user"},"role":"user","id":"u-4"},"surfaceOp":"append"}`,
		`{"type":"assistant/message","data":{"turn":4,"step":1,"message":{"role":"assistant","content":[{"type":"tool-call","id":"c-4","name":"bash","arguments":"{}"}],"source":{"kind":"model"},"id":"a-4"}},"surfaceOp":"append"}`,
		`{"type":"tool/call","data":{"turn":4,"step":1,"callId":"c-4","name":"bash","arguments":"{}"}}`,
		`{"type":"tool/result","data":{"turn":4,"step":1,"message":{"role":"tool","source":{"kind":"tool","callId":"c-4"},"toolCallId":"c-4","content":[{"type":"text","text":"` + big + `"}],"id":"r-4"}},"surfaceOp":"append"}`,
	}
	if err := os.WriteFile(turn, []byte(strings.Join(turn4, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "sh", "-c", `cat "$1" >> "$2/append" && echo prune > "$2/ctl"`, "sh", turn, dir)
	agree("prune")
	if surf := mustRun(t, "cat", filepath.Join(dir, "surface.jsonl")); !bytes.Contains(surf, []byte("tool result middle pruned")) || bytes.Contains(surf, []byte(big)) {
		t.Fatal("the surface does not hold the pruned copy in place of the long result")
	}
	mustRun(t, "sh", "-c", `printf '%s\n' "$1" "$2" >> "$3/append" && echo flush > "$3/ctl"`, "sh",
		`{"type":"step/end","data":{"turn":4,"step":1}}`, `{"type":"turn/end","data":{"turn":4,"reason":{"kind":"completed"}}}`, dir)
	agree("the pruned turn's end")

	// a manual compaction, then a fork of the compacted session: both v4, both accepted by the harness
	mustRun(t, "sh", "-c", `echo compact > "$1/ctl" && echo flush > "$1/ctl"`, "sh", dir)
	agree("compact")
	nodes := lines(mustRun(t, "cat", filepath.Join(dir, "surface.jsonl")))
	if len(nodes) < 3 || !bytes.Contains(nodes[0], []byte(`"type":"system/message"`)) || !bytes.Contains(nodes[1], []byte(`"kind":"compact-checkpoint"`)) {
		t.Fatalf("the surface after the compaction does not keep the system head followed by the checkpoint: %d nodes", len(nodes))
	}
	// ctl's fork takes the boundary first: the last event
	mustRun(t, "sh", "-c", `echo "fork $(($(wc -l < "$1/events.jsonl") - 1)) child-v4" > "$1/ctl"`, "sh", dir)
	child, _ := filepath.Glob(filepath.Join(store, "*", "child-v4", "session.v4.jsonl.zstd"))
	if len(child) != 1 {
		t.Fatalf("fork made %v", child)
	}
	if r, err := kit.Decode(child[0]); err != nil || r.Refusal != "" {
		t.Fatalf("the harness's v4 code on the child: %v %s", err, r.Refusal)
	}
}
