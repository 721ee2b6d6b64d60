package command

import (
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dshfs/dshfs/compaction"
	"github.com/dshfs/dshfs/eventstore"
)

// Request is one parsed command and where it goes.
type Request struct {
	Session string  // the session the command is for; "" for a store command
	Line    string  // the command as ctl words, one space apart: status.json's "command"
	Cmd     Command // nil when the input did not parse
}

// MaxCtlLine is the longest ctl write accepted: a command is a verb and a few words (ids, a cwd, seqs).
const MaxCtlLine = 64 << 10

// ParseCtl parses one line written to a ctl file: a session's when session is set, the store's when it
// is "". The error is an *eventstore.CommandError (Invalid: BAD_COMMAND, UNKNOWN_COMMAND, BAD_INPUT, or
// the harness's INVALID_BOUNDARY); the Request then still carries the line, for the record.
func ParseCtl(session, line string) (Request, error) {
	if len(line) > MaxCtlLine {
		// the kernel splits a write(2) larger than the mount's max_write into several requests, each of which
		// would otherwise run as a command of its own
		return Request{Session: session, Line: "?"}, bad(eventstore.CodeBadCommand,
			"a ctl write carries one command of at most "+strconv.Itoa(MaxCtlLine)+" bytes; this one has "+strconv.Itoa(len(line)))
	}
	if body := strings.TrimSpace(line); strings.ContainsAny(body, "\n\r") {
		words := strings.Fields(line)
		return Request{Session: session, Line: strings.Join(words, " ")}, bad(eventstore.CodeBadCommand,
			"a ctl write carries exactly one command line; write each command separately")
	}
	words := strings.Fields(line)
	req := Request{Session: session, Line: strings.Join(words, " ")}
	if len(words) == 0 {
		return req, bad(eventstore.CodeBadCommand, "empty command")
	}
	var err error
	if session == "" {
		req.Cmd, err = parseStore(words)
	} else {
		req.Cmd, err = parseSession(session, words)
	}
	return req, err
}

// ParseCLI parses a CLI write command into the Request its ctl line would be: verb is the CLI command
// (create, or a session command such as resume, fork, compact), operands what follows STORE (a session
// command's ID first), cwd the --cwd flag. The CLI checks its own arity first, for its usage text; what
// the operands mean is decided here, with the ctl's refusals and texts.
func ParseCLI(verb string, operands []string, cwd string) (Request, error) {
	if verb == "create" {
		return parseCLICreate(operands, cwd, "")
	}
	if len(operands) == 0 || operands[0] == "" {
		return Request{Line: verb}, bad(eventstore.CodeBadInput, "session id must be a non-empty string")
	}
	words := append([]string{verb}, operands[1:]...)
	req := Request{Session: operands[0], Line: strings.Join(words, " ")}
	var err error
	req.Cmd, err = parseSession(req.Session, words)
	return req, err
}

// parseCLICreate is `dshfs create [--cwd DIR] STORE [ID]`: the id is taken as given (it may contain
// spaces or start with cwd=), the cwd comes from the flag.
func parseCLICreate(operands []string, cwd, gen string) (Request, error) {
	c := Create{Cwd: cwd, Generation: gen}
	words := []string{"create"}
	if len(operands) > 0 {
		c.ID = operands[0]
		words = append(words, c.ID)
	}
	if cwd != "" {
		words = append(words, "cwd="+cwd)
	}
	if gen != "" {
		words = append(words, "generation="+gen)
		if err := checkGeneration(gen); err != nil {
			return Request{Line: strings.Join(words, " ")}, err
		}
	}
	req := Request{Line: strings.Join(words, " ")}
	switch {
	case len(operands) > 1:
		return req, bad(eventstore.CodeBadCommand, createUsage)
	case len(operands) == 1 && c.ID == "":
		return req, bad(eventstore.CodeBadInput, "session id must be a non-empty string")
	}
	if err := checkCwd(cwd); err != nil {
		return req, err
	}
	req.Cmd = c
	return req, nil
}

const (
	createUsage   = "usage: create [ID] [cwd=/abs/path] [generation=auto|0|4]"
	sessionVerbs  = "flush, resume, fork [BOUNDARY] [CHILD_ID], compact [START END], prune, close"
	storeVerbs    = "flush, create [ID] [cwd=/abs/path], rescan, quiesce [SECONDS], resume-writes"
	compactUsage  = "usage: compact [START END]"
	forkUsage     = "usage: fork [BOUNDARY] [CHILD_ID]"
	quiesceUsage  = "usage: quiesce [SECONDS]"
	noArgsMessage = " takes no arguments"
)

func parseSession(session string, words []string) (Command, error) {
	verb, args := words[0], words[1:]
	switch verb {
	case "flush", "resume", "prune", "close":
		if len(args) != 0 {
			return nil, bad(eventstore.CodeBadCommand, verb+noArgsMessage)
		}
		return map[string]Command{"flush": Flush{}, "resume": Resume{}, "prune": Prune{}, "close": Close{}}[verb], nil
	case "fork":
		return parseFork(session, args)
	case "compact":
		return parseCompact(args)
	}
	return nil, bad(eventstore.CodeUnknownCommand, "unknown session command "+strconv.Quote(verb)+" ("+sessionVerbs+")")
}

// parseFork is `fork [BOUNDARY] [CHILD_ID]`. A boundary that is not an integer written the canonical
// way ("x", "01", "+1", "1.5") is refused here with the harness's INVALID_BOUNDARY text: it has no typed
// value. An integer out of range (-1, 2^53) is a typed boundary that Store.Fork refuses with the same
// text, in the harness's order (after an existing child and a missing parent).
func parseFork(session string, args []string) (Command, error) {
	if len(args) > 2 {
		return nil, bad(eventstore.CodeBadCommand, forkUsage)
	}
	var f Fork
	if len(args) > 0 {
		b, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || strconv.FormatInt(b, 10) != args[0] {
			return nil, eventstore.InvalidBoundary(session, args[0])
		}
		f.Boundary = &b
	}
	if len(args) > 1 {
		f.Child = args[1]
	}
	return f, nil
}

// parseCompact is `compact` or `compact START END`.
func parseCompact(args []string) (Command, error) {
	switch len(args) {
	case 0:
		return Compact{}, nil
	case 2:
		start, err1 := strconv.ParseInt(args[0], 10, 64)
		end, err2 := strconv.ParseInt(args[1], 10, 64)
		if err1 != nil || err2 != nil || start < 0 || end < 0 {
			return nil, &eventstore.CommandError{Failure: eventstore.Invalid, Code: compaction.CodeInvalid,
				Message: "compact START END takes two surface seqs (non-negative integers), got " + strconv.Quote(args[0]) + " " + strconv.Quote(args[1])}
		}
		return Compact{Range: &Range{Start: start, End: end}}, nil
	}
	return nil, bad(eventstore.CodeBadCommand, compactUsage)
}

func parseStore(words []string) (Command, error) {
	verb, args := words[0], words[1:]
	switch verb {
	case "flush", "rescan", "resume-writes":
		if len(args) != 0 {
			return nil, bad(eventstore.CodeBadCommand, verb+noArgsMessage)
		}
		return map[string]Command{"flush": FlushAll{}, "rescan": Rescan{}, "resume-writes": ResumeWrites{}}[verb], nil
	case "create":
		return parseCreate(args)
	case "quiesce":
		return parseQuiesce(args)
	}
	return nil, bad(eventstore.CodeUnknownCommand, "unknown store command "+strconv.Quote(verb)+" ("+storeVerbs+")")
}

// ParseCLICreate is `dshfs create [--cwd DIR] [--generation auto|0|4] STORE [ID]`.
func ParseCLICreate(operands []string, cwd, generation string) (Request, error) {
	return parseCLICreate(operands, cwd, generation)
}

// checkGeneration refuses a generation dshfs does not create sessions in.
func checkGeneration(g string) error {
	switch g {
	case "auto", "0", "4":
		return nil
	}
	return bad(eventstore.CodeBadInput, "generation must be auto, 0 or 4 (the generations dshfs writes), got "+strconv.Quote(g))
}

// parseCreate is `create [ID] [cwd=/abs/path] [generation=auto|0|4]`, in any order.
func parseCreate(args []string) (Command, error) {
	var c Create
	id := false
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "cwd="); ok {
			if err := checkCwd(v); err != nil {
				return nil, err
			}
			c.Cwd = v
			continue
		}
		if v, ok := strings.CutPrefix(a, "generation="); ok {
			if err := checkGeneration(v); err != nil {
				return nil, err
			}
			c.Generation = v
			continue
		}
		if id {
			return nil, bad(eventstore.CodeBadCommand, createUsage)
		}
		c.ID, id = a, true
	}
	return c, nil
}

// checkCwd refuses a relative cwd: the harness records the directory a session runs in, and a relative
// one would mean something different to every reader.
func checkCwd(cwd string) error {
	if cwd != "" && !filepath.IsAbs(cwd) {
		return bad(eventstore.CodeBadInput, "cwd must be an absolute path, got "+strconv.Quote(cwd))
	}
	return nil
}

// parseQuiesce is `quiesce [SECONDS]`, SECONDS in (0, MaxQuiesce].
func parseQuiesce(args []string) (Command, error) {
	if len(args) > 1 {
		return nil, bad(eventstore.CodeBadCommand, quiesceUsage)
	}
	q := Quiesce{For: DefaultQuiesce}
	if len(args) == 1 {
		secs, err := strconv.ParseFloat(args[0], 64)
		if err != nil || secs <= 0 || secs > MaxQuiesce.Seconds() {
			return nil, bad(eventstore.CodeBadInput, "quiesce takes a number of seconds in (0, "+strconv.Itoa(int(MaxQuiesce.Seconds()))+"], got "+strconv.Quote(args[0]))
		}
		q.For = time.Duration(secs * float64(time.Second))
	}
	return q, nil
}

// bad is a refusal of the input itself: nothing was run.
func bad(code, msg string) *eventstore.CommandError {
	return &eventstore.CommandError{Failure: eventstore.Invalid, Code: code, Message: msg}
}
