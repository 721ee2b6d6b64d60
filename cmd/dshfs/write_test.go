package main

import (
	"strings"
	"testing"

	"github.com/dshfs/dshfs/internal/fixtures"
)

// TestWriteCommandsPrintCtlResults: the CLI's write commands print the line a read of ctl returns after
// the same command — the ctl's "command" words and message — and refuse with the ctl's texts.
func TestWriteCommandsPrintCtlResults(t *testing.T) {
	const clean = "main-session-fa821f4b-98fd-46aa-86bc-0955a88ef4b8"
	store := fixtures.CopyTree(t, fixtures.Path(t, "generated", "raw"))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"fork", store, clean, "35", "kid"},
			`{"command":"fork 35 kid","errno":null,"code":null,"message":"forked: child \"kid\"","line":null}` + "\n"},
		{[]string{"create", "--cwd", "/srv", store, "new"},
			`{"command":"create new cwd=/srv","errno":null,"code":null,"message":"created \"new\"","line":null}` + "\n"},
		{[]string{"resume", store, clean},
			`{"command":"resume","errno":null,"code":null,"message":"resumed: live in this process until it exits, durable through seq 70","line":null}` + "\n"},
	} {
		if code, stdout, stderr := runCLI(c.args...); code != 0 || stdout != c.want {
			t.Errorf("dshfs %s: exit %d %q %s\nwant %s", c.args[0], code, stdout, stderr, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "--cwd", "srv", store, "rel"}, `cwd must be an absolute path, got "srv"`},
		{[]string{"fork", store, clean, "035"}, `fork boundary for session "` + clean + `" must be a non-negative safe integer, got 035`},
		{[]string{"fork", store, clean, "35", "kid"}, `session "kid" already exists`},
		{[]string{"compact", store, clean, "a", "1"}, `compact START END takes two surface seqs (non-negative integers), got "a" "1"`},
	} {
		if code, _, stderr := runCLI(c.args...); code != exitFound || !strings.Contains(stderr, c.want) {
			t.Errorf("dshfs %v: exit %d %s, want %s", c.args, code, stderr, c.want)
		}
	}
}
