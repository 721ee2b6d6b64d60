package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/dshfs/dshfs/command"
	"github.com/dshfs/dshfs/config"
	"github.com/dshfs/dshfs/eventstore"
)

// The write commands for scripts that do not mount (docs/cli.md): each is one writer run through the same
// session engine and the same writer lock as the mount. On success they print the command's result as one
// JSON line — the object a read of ctl returns — and exit 0; a refusal (busy, invalid, exists, refused log)
// exits 1 and anything else (a missing session, an I/O failure) exits 2, with the reason on stderr.

// writeStore opens the STORE argument of a write command with its config.
func writeStore(o opts, spec string) (*eventstore.Store, config.Config, error) {
	cfg, err := loadConfig(o.config)
	if err != nil {
		return nil, cfg, err
	}
	st, err := openStore(spec, cfg)
	return st, cfg, err
}

// commandCode is the exit code of a failed write command.
func commandCode(err error) int {
	if eventstore.AsCommandError(err).Failure.Refusal() {
		return exitFound
	}
	return exitUsageErr
}

// finish prints a successful result, or returns the failure with its exit code; the store is closed
// (flushed and released) either way.
func finish(ctx context.Context, st *eventstore.Store, out *bufio.Writer, r eventstore.Result) (int, error) {
	if err := st.Close(ctx); err != nil && r.Err == nil {
		r.Err = eventstore.AsCommandError(err)
	}
	if r.Err != nil {
		return commandCode(r.Err), r.Err
	}
	out.Write(r.JSON())
	return exitOK, nil
}

// cmdAppend appends newline-delimited events (the append file's syntax) from FILE or stdin to a session:
// all lines are validated and accepted together or none is, then flushed and released.
func cmdAppend(ctx context.Context, args []string, stdin io.Reader, out *bufio.Writer, stderr io.Writer) (int, error) {
	o, pos, err := parseArgs(args, map[string]bool{"config": true, "force": true})
	if err != nil {
		return exitUsageErr, err
	}
	if len(pos) < 2 || len(pos) > 3 {
		return exitUsageErr, &usageError{"append needs STORE ID [FILE|-]"}
	}
	in := stdin
	if len(pos) == 3 && pos[2] != "-" {
		f, err := os.Open(pos[2])
		if err != nil {
			return exitUsageErr, err
		}
		defer f.Close()
		in = f
	}
	data, err := io.ReadAll(in)
	if err != nil {
		return exitUsageErr, err
	}
	id := pos[1]
	req := command.Request{Session: id, Line: "append", Cmd: command.Append{Input: data}}
	return runRequest(ctx, o, pos[0], req, out, func(r command.Result) {
		if done, ok := r.Done.(command.Appended); ok && done.OpenTurn != nil {
			fmt.Fprintf(stderr, "dshfs: session %q now ends inside open turn %d: the next writer must run resume\n", id, *done.OpenTurn)
		}
	})
}

// cmdResume is the harness's resume: commit the crash repair and a session/end-seed.
func cmdResume(ctx context.Context, args []string, out *bufio.Writer) (int, error) {
	o, pos, err := parseArgs(args, map[string]bool{"config": true, "force": true})
	if err != nil {
		return exitUsageErr, err
	}
	if len(pos) != 2 {
		return exitUsageErr, &usageError{"resume needs STORE ID"}
	}
	return runCommand(ctx, o, "resume", pos, out)
}

// cmdFork is the harness's fork: a child holding the parent's stable prefix and a session/end-seed.
func cmdFork(ctx context.Context, args []string, out *bufio.Writer) (int, error) {
	o, pos, err := parseArgs(args, map[string]bool{"config": true})
	if err != nil {
		return exitUsageErr, err
	}
	if len(pos) < 2 || len(pos) > 4 {
		return exitUsageErr, &usageError{"fork needs STORE ID [BOUNDARY] [CHILD_ID]"}
	}
	return runCommand(ctx, o, "fork", pos, out)
}

// cmdCreate materializes a header-only session (the id defaults to a new UUIDv4).
func cmdCreate(ctx context.Context, args []string, out *bufio.Writer) (int, error) {
	o, pos, err := parseArgs(args, map[string]bool{"config": true, "cwd": true, "generation": true})
	if err != nil {
		return exitUsageErr, err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return exitUsageErr, &usageError{"create needs STORE [ID]"}
	}
	req, err := command.ParseCLICreate(pos[1:], o.cwd, o.generation)
	if err != nil {
		return commandCode(err), err
	}
	return runRequest(ctx, o, pos[0], req, out, nil)
}

// cmdCompact is a manual compaction (ctl compact): the head-anchored span, or the surface range START..END,
// summarized by the configured summarizer; refused, failed and changed attempts say why and exit 1.
func cmdCompact(ctx context.Context, args []string, out *bufio.Writer) (int, error) {
	o, pos, err := parseArgs(args, map[string]bool{"config": true, "force": true})
	if err != nil {
		return exitUsageErr, err
	}
	if len(pos) != 2 && len(pos) != 4 {
		return exitUsageErr, &usageError{"compact needs STORE ID [START END]"}
	}
	return runCommand(ctx, o, "compact", pos, out)
}

// runCommand runs a write command given as STORE and its operands: parsed by the command layer with the
// ctl's rules (a refusal there exits before the store is opened), run against the store as the mount runs
// it, and printed as the ctl result line.
func runCommand(ctx context.Context, o opts, verb string, pos []string, out *bufio.Writer) (int, error) {
	req, err := command.ParseCLI(verb, pos[1:], o.cwd)
	if err != nil {
		return commandCode(err), err
	}
	return runRequest(ctx, o, pos[0], req, out, nil)
}

// runRequest runs a request against the store spec names, as the mount runs it, and prints the ctl result
// line; tell (may be nil) hears the result first.
func runRequest(ctx context.Context, o opts, spec string, req command.Request, out *bufio.Writer, tell func(command.Result)) (int, error) {
	st, cfg, err := writeStore(o, spec)
	if err != nil {
		return exitUsageErr, err
	}
	if err := acknowledge(ctx, st, o, req.Session); err != nil {
		return finish(ctx, st, out, eventstore.Result{Command: req.Cmd.Name(), Err: eventstore.AsCommandError(err)})
	}
	env := command.Env{Store: st, Compaction: cfg.Compaction, Pruner: cfg.Pruner, Generation: cfg.Writer.Generation, Front: command.CLI}
	r := env.Run(ctx, req)
	if tell != nil {
		tell(r)
	}
	return finish(ctx, st, out, r.Record())
}

// acknowledge is --force: the user made sure that no harness runs session id, so the changes another
// process made to it are accepted as they are (a lease another process holds, or a descriptor it has
// open for writing, still refuses the write).
func acknowledge(ctx context.Context, st *eventstore.Store, o opts, id string) error {
	if !o.force || id == "" {
		return nil
	}
	err := st.Acknowledge(ctx, id)
	if eventstore.IsNotFound(err) {
		return nil // the command itself says the session is missing
	}
	return err
}
