package command_test

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/command"
	"github.com/dshfs/dshfs/compaction"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/fixtures"
)

// The generated fixture sessions (../shared/fixtures/generated/NAMES.tsv).
const (
	clean     = "main-session-fa821f4b-98fd-46aa-86bc-0955a88ef4b8" // turns 0..35 and 36..69
	compacted = "main-session-39ade10b-6855-483e-897d-dd835505a4e6"
	crashed   = "main-session-30628611-e45f-4f98-9688-010e1428e585" // turn 2 open
)

// fixtureStore is a private copy of the generated raw store.
func fixtureStore(t *testing.T) *eventstore.Store {
	t.Helper()
	b, err := jsonl.Open(fixtures.CopyTree(t, fixtures.Path(t, "generated", "raw")), jsonl.None)
	if err != nil {
		t.Fatal(err)
	}
	st := eventstore.New(b)
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	return st
}

func at(n int64) *int64 { return &n }

// cliCall is a CLI write command: `dshfs VERB [--cwd CWD] STORE OPERANDS...`.
type cliCall struct {
	verb     string
	operands []string
	cwd      string
}

// TestFrontEndsAgree runs every command given both ways — as the line a ctl file is written, and as the
// CLI's arguments — and shows both parse to the same typed command and the same "command" words, and run
// (each on its own copy of the store) to the same result bytes. The one thing allowed to differ is the
// Front, which only resume's message reads: re-rendered as the mount, the CLI's result is byte for byte
// the mount's. Commands only the mount has (the store ctl, flush, close) run through the ctl path alone.
func TestFrontEndsAgree(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		session string   // the ctl the line is written to ("" the store's)
		line    string   // the ctl line
		cli     *cliCall // nil: a command the CLI does not have
		want    command.Command
		words   string // status.json "command"
		code    string // the refusal's code; "" for success
		message string // the mount's message
		cliMsg  string // the CLI's message, when it says something else
	}{
		{name: "resume", session: clean, line: "resume", cli: &cliCall{"resume", []string{clean}, ""},
			want: command.Resume{}, words: "resume",
			message: "resumed: live in this mount, durable through seq 70",
			cliMsg:  "resumed: live in this process until it exits, durable through seq 70"},
		{name: "resume of a crashed session", session: crashed, line: " resume\n", cli: &cliCall{"resume", []string{crashed}, ""},
			want: command.Resume{}, words: "resume",
			message: "resumed: live in this mount, durable through seq 55",
			cliMsg:  "resumed: live in this process until it exits, durable through seq 55"},
		{name: "resume with arguments", session: clean, line: "resume now", cli: &cliCall{"resume", []string{clean, "now"}, ""},
			words: "resume now", code: eventstore.CodeBadCommand, message: "resume takes no arguments"},
		{name: "fork", session: clean, line: "fork 35 kid", cli: &cliCall{"fork", []string{clean, "35", "kid"}, ""},
			want: command.Fork{Boundary: at(35), Child: "kid"}, words: "fork 35 kid", message: `forked: child "kid"`},
		{name: "fork inside a turn", session: clean, line: "fork 3 kid", cli: &cliCall{"fork", []string{clean, "3", "kid"}, ""},
			words: "fork 3 kid", code: eventstore.CodeOpenTurn, want: command.Fork{Boundary: at(3), Child: "kid"},
			message: `fork boundary 3 in session "` + clean + `" ends inside open turn 1`},
		{name: "fork past the end", session: clean, line: "fork 70", cli: &cliCall{"fork", []string{clean, "70"}, ""},
			words: "fork 70", code: eventstore.CodeInvalidBoundary, want: command.Fork{Boundary: at(70)},
			message: `fork boundary 70 does not exist in session "` + clean + `" (last seq: 69)`},
		{name: "fork at a word", session: clean, line: "fork x", cli: &cliCall{"fork", []string{clean, "x"}, ""},
			words: "fork x", code: eventstore.CodeInvalidBoundary,
			message: `fork boundary for session "` + clean + `" must be a non-negative safe integer, got x`},
		{name: "fork at a padded number", session: clean, line: "fork 035", cli: &cliCall{"fork", []string{clean, "035"}, ""},
			words: "fork 035", code: eventstore.CodeInvalidBoundary,
			message: `fork boundary for session "` + clean + `" must be a non-negative safe integer, got 035`},
		{name: "fork at a negative seq", session: clean, line: "fork -1", cli: &cliCall{"fork", []string{clean, "-1"}, ""},
			words: "fork -1", code: eventstore.CodeInvalidBoundary, want: command.Fork{Boundary: at(-1)},
			message: `fork boundary for session "` + clean + `" must be a non-negative safe integer, got -1`},
		{name: "fork at a negative seq to an existing child", session: clean, line: "fork -1 " + compacted, cli: &cliCall{"fork", []string{clean, "-1", compacted}, ""},
			words: "fork -1 " + compacted, code: eventstore.CodeAlreadyExists, want: command.Fork{Boundary: at(-1), Child: compacted}},
		{name: "fork past the safe integers", session: clean, line: "fork 9007199254740992", cli: &cliCall{"fork", []string{clean, "9007199254740992"}, ""},
			words: "fork 9007199254740992", code: eventstore.CodeInvalidBoundary, want: command.Fork{Boundary: at(1 << 53)},
			message: `fork boundary for session "` + clean + `" must be a non-negative safe integer, got 9007199254740992`},
		{name: "fork to an existing child", session: clean, line: "fork 35 " + compacted, cli: &cliCall{"fork", []string{clean, "35", compacted}, ""},
			words: "fork 35 " + compacted, code: eventstore.CodeAlreadyExists, want: command.Fork{Boundary: at(35), Child: compacted}},
		{name: "fork with too many words", session: clean, line: "fork 1 a b", cli: &cliCall{"fork", []string{clean, "1", "a", "b"}, ""},
			words: "fork 1 a b", code: eventstore.CodeBadCommand, message: "usage: fork [BOUNDARY] [CHILD_ID]"},
		{name: "compact a range", session: compacted, line: "compact 111 130", cli: &cliCall{"compact", []string{compacted, "111", "130"}, ""},
			want: command.Compact{Range: &command.Range{Start: 111, End: 130}}, words: "compact 111 130",
			message: "Compacted 8 history items (~713 tokens)."},
		{name: "compact a shadowed range", session: compacted, line: "compact 2 33", cli: &cliCall{"compact", []string{compacted, "2", "33"}, ""},
			want: command.Compact{Range: &command.Range{Start: 2, End: 33}}, words: "compact 2 33", code: compaction.CodeInvalid,
			message: "compactRegion: start seq 2 not found in surface"},
		{name: "compact a crashed session", session: crashed, line: "compact", cli: &cliCall{"compact", []string{crashed}, ""},
			want: command.Compact{}, words: "compact", code: eventstore.CodeOpenTurn},
		{name: "compact words", session: compacted, line: "compact a 1", cli: &cliCall{"compact", []string{compacted, "a", "1"}, ""},
			words: "compact a 1", code: compaction.CodeInvalid,
			message: `compact START END takes two surface seqs (non-negative integers), got "a" "1"`},
		{name: "compact one seq", session: compacted, line: "compact 1", cli: &cliCall{"compact", []string{compacted, "1"}, ""},
			words: "compact 1", code: eventstore.CodeBadCommand, message: "usage: compact [START END]"},
		{name: "prune without a turn", session: clean, line: "prune", cli: &cliCall{"prune", []string{clean}, ""},
			want: command.Prune{}, words: "prune", code: compaction.CodeNoOpenTurn},
		{name: "an unknown session command", session: clean, line: "frobnicate", cli: &cliCall{"frobnicate", []string{clean}, ""},
			words: "frobnicate", code: eventstore.CodeUnknownCommand,
			message: `unknown session command "frobnicate" (flush, resume, fork [BOUNDARY] [CHILD_ID], compact [START END], prune, close)`},
		{name: "create", line: "create new cwd=/srv", cli: &cliCall{"create", []string{"new"}, "/srv"},
			want: command.Create{ID: "new", Cwd: "/srv"}, words: "create new cwd=/srv", message: `created "new"`},
		{name: "create an existing session", line: "create " + clean, cli: &cliCall{"create", []string{clean}, ""},
			want: command.Create{ID: clean}, words: "create " + clean, code: eventstore.CodeAlreadyExists},
		{name: "create with a relative cwd", line: "create new cwd=srv", cli: &cliCall{"create", []string{"new"}, "srv"},
			words: "create new cwd=srv", code: eventstore.CodeBadInput, message: `cwd must be an absolute path, got "srv"`},
		{name: "flush, not live", session: clean, line: "flush", want: command.Flush{}, words: "flush",
			message: "nothing pending: the session is not live in this mount"},
		{name: "close, not live", session: clean, line: "close", want: command.Close{}, words: "close",
			message: "not live in this mount: nothing to release"},
		{name: "store flush", line: "flush", want: command.FlushAll{}, words: "flush", message: "flushed 0 live sessions"},
		{name: "rescan", line: "rescan", want: command.Rescan{}, words: "rescan",
			message: "rescanned the store; 0 sessions released after a conflict"},
		{name: "resume-writes, not quiesced", line: "resume-writes", want: command.ResumeWrites{}, words: "resume-writes",
			message: "not quiesced: nothing to resume"},
		{name: "quiesce", line: "quiesce 2.5", want: command.Quiesce{For: 2500 * time.Millisecond}, words: "quiesce 2.5"},
		{name: "quiesce forever", line: "quiesce 86401", words: "quiesce 86401", code: eventstore.CodeBadInput,
			message: `quiesce takes a number of seconds in (0, 86400], got "86401"`},
		{name: "an empty line", line: " \n", words: "", code: eventstore.CodeBadCommand, message: "empty command"},
		{name: "an unknown store command", line: "resume", words: "resume", code: eventstore.CodeUnknownCommand,
			message: `unknown store command "resume" (flush, create [ID] [cwd=/abs/path], rescan, quiesce [SECONDS], resume-writes)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			req, err := command.ParseCtl(c.session, c.line)
			if !reflect.DeepEqual(req.Cmd, c.want) || req.Line != c.words || req.Session != c.session {
				t.Fatalf("ctl %q parsed to %#v (%q), want %#v (%q)", c.line, req.Cmd, req.Line, c.want, c.words)
			}
			mount := command.Env{Store: fixtureStore(t), Front: command.Mount}
			mr := run(ctx, mount, req, err)
			check(t, "mount", mr, c.code, c.message)
			if c.cli == nil {
				return
			}
			creq, cerr := command.ParseCLI(c.cli.verb, c.cli.operands, c.cli.cwd)
			if !reflect.DeepEqual(creq, req) {
				t.Fatalf("the CLI parsed to %#v, the ctl to %#v", creq, req)
			}
			if !reflect.DeepEqual(eventstore.AsCommandError(cerr), eventstore.AsCommandError(err)) {
				t.Fatalf("the CLI's parse refusal %v, the ctl's %v", cerr, err)
			}
			cr := run(ctx, command.Env{Store: fixtureStore(t), Front: command.CLI}, creq, cerr)
			want := c.message
			if c.cliMsg != "" {
				want = c.cliMsg
			}
			check(t, "CLI", cr, c.code, want)
			if cr.Front = command.Mount; !bytes.Equal(cr.JSON(), mr.JSON()) {
				t.Fatalf("the results differ:\n  CLI: %s mount: %s", cr.JSON(), mr.JSON())
			}
		})
	}
}

// run is what both front-ends do with a parsed request.
func run(ctx context.Context, env command.Env, req command.Request, err error) command.Result {
	if err != nil {
		return env.Refused(req, err)
	}
	return env.Run(ctx, req)
}

func check(t *testing.T, front string, r command.Result, code, message string) {
	t.Helper()
	if code == "" && r.Err != nil || code != "" && (r.Err == nil || r.Err.Code != code) {
		t.Fatalf("%s: %s, want code %q", front, r.JSON(), code)
	}
	if message != "" && r.Message() != message {
		t.Fatalf("%s: message %q, want %q", front, r.Message(), message)
	}
	if r.Message() == "" && r.Line != "" {
		t.Fatalf("%s: no message: %s", front, r.JSON())
	}
}

// TestQuiesceHoldsWrites: quiesce and resume-writes through the store ctl, and the compaction refusal in
// between, which keeps the quiesce's reason and code.
func TestQuiesceHoldsWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var changes []command.Change
	env := command.Env{Store: fixtureStore(t), Changed: func(_ context.Context, c command.Change) { changes = append(changes, c) }}
	r := env.Line(ctx, "", "quiesce 30")
	if r.Err != nil || !strings.HasPrefix(r.Message(), "quiesced until ") {
		t.Fatalf("quiesce: %s", r.JSON())
	}
	r = env.Line(ctx, compacted, "compact")
	if r.Err == nil || r.Err.Code != eventstore.CodeQuiesced || r.Err.Failure != eventstore.Busy {
		t.Fatalf("compact while quiesced: %s", r.JSON())
	}
	if r = env.Line(ctx, "", "resume-writes"); r.Message() != "writes resumed: held batches are being written" {
		t.Fatalf("resume-writes: %s", r.JSON())
	}
	if r = env.Line(ctx, "", "create q"); r.Err != nil {
		t.Fatalf("create: %s", r.JSON())
	}
	if want := []command.Change{command.LiveStatus, command.Listing}; !reflect.DeepEqual(changes, want) {
		t.Errorf("changes %v, want %v", changes, want)
	}
}

// TestStoreFlushRecordsEachSession: a store flush reports each live session's own flush.
func TestStoreFlushRecordsEachSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := command.Env{Store: fixtureStore(t)}
	if r := env.Line(ctx, clean, "resume"); r.Err != nil {
		t.Fatalf("resume: %s", r.JSON())
	}
	r := env.Line(ctx, "", "flush")
	if r.Err != nil || r.Message() != "flushed 1 live sessions" || len(r.Sessions) != 1 || r.Sessions[0].ID != clean {
		t.Fatalf("store flush: %s %+v", r.JSON(), r.Sessions)
	}
	if got, want := string(r.Sessions[0].Result.JSON()), `{"command":"flush","errno":null,"code":null,"message":"0 events made durable; durable through seq 70","line":null}`+"\n"; got != want {
		t.Errorf("session flush: %s, want %s", got, want)
	}
	if r := env.Line(ctx, clean, "close"); r.Message() != "flushed and released" {
		t.Errorf("close: %s", r.JSON())
	}
}

// TestCtlOneCommandPerWrite: a ctl write carries exactly one command line of at most MaxCtlLine bytes; a
// write the kernel split (larger than max_write) or one holding two lines is refused whole, as BAD_COMMAND.
func TestCtlOneCommandPerWrite(t *testing.T) {
	for _, c := range []struct {
		line, want string // want: "" to parse, else a fragment of the refusal
	}{
		{"flush\n", ""},
		{"flush\r\n", ""},
		{"  flush  \n\n", ""},
		{"flush\nclose\n", "exactly one command line"},
		{"create a\rcreate b", "exactly one command line"},
		{"create big" + strings.Repeat(" ", command.MaxCtlLine), "at most 65536 bytes"},
	} {
		_, err := command.ParseCtl("s", c.line)
		if c.want == "" {
			if err != nil {
				t.Errorf("%q: %v", c.line, err)
			}
			continue
		}
		ce := eventstore.AsCommandError(err)
		if ce == nil || ce.Code != eventstore.CodeBadCommand || !strings.Contains(ce.Message, c.want) {
			t.Errorf("%.40q: %v, want BAD_COMMAND %q", c.line, err, c.want)
		}
	}
}
