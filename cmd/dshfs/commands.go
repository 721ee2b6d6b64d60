package main

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
)

func cmdLs(ctx context.Context, args []string, out *bufio.Writer) (int, error) {
	o, pos, err := parseArgs(args, map[string]bool{"config": true, "json": true})
	if err != nil {
		return exitUsageErr, err
	}
	if len(pos) != 1 {
		return exitUsageErr, &usageError{"ls needs exactly one STORE"}
	}
	if err := checkConfig(o.config); err != nil {
		return exitUsageErr, err
	}
	st, err := openStore(pos[0])
	if err != nil {
		return exitUsageErr, err
	}
	l, err := st.List(ctx)
	if err != nil {
		return exitUsageErr, err
	}
	for _, e := range l.Entries {
		if o.json {
			header := event.Value{}
			if e.Header != nil {
				header, _ = event.Parse(e.Header.Meta())
			}
			rev := event.Value{}
			if e.Revision != "" {
				rev = event.String(e.Revision)
			}
			line := event.Object(
				event.Member{Key: "id", Value: event.String(e.ID)},
				event.Member{Key: "projectDir", Value: event.String(e.ProjectDir)},
				event.Member{Key: "revision", Value: rev},
				event.Member{Key: "header", Value: header},
				event.Member{Key: "refusal", Value: refusalValue(e.Refusal)},
			)
			out.Write(append(event.Stringify(line), '\n'))
			continue
		}
		state, created, cwd, parent := "ok", "", "", ""
		if e.Refusal != nil {
			state = "refused"
		}
		if h := e.Header; h != nil {
			created = strconv.FormatInt(h.CreatedAt, 10)
			cwd, parent = optString(h.Cwd), optString(h.ParentSession)
		}
		fmt.Fprintf(out, "%s\t%s\t%s\t%s\t%s\n", e.ID, state, created, cwd, parent)
	}
	return exitOK, nil
}

func optString(v *event.Value) string {
	if v == nil {
		return ""
	}
	if v.Kind == event.KindString {
		return v.Str
	}
	return string(event.Stringify(*v))
}

func refusalValue(err error) event.Value {
	if err == nil {
		return event.Value{}
	}
	return event.Object(
		event.Member{Key: "kind", Value: event.String(string(eventstore.Classify(err)))},
		event.Member{Key: "message", Value: event.String(err.Error())},
	)
}

func cmdCat(ctx context.Context, args []string, out *bufio.Writer) (int, error) {
	o, pos, err := parseArgs(args, map[string]bool{"config": true, "inspect": true, "view": true})
	if err != nil {
		return exitUsageErr, err
	}
	if len(pos) != 2 {
		return exitUsageErr, &usageError{"cat needs STORE and ID"}
	}
	if err := checkConfig(o.config); err != nil {
		return exitUsageErr, err
	}
	switch o.view {
	case "events", "raw", "header", "status":
	case "surface", "messages", "shadowed", "compactions", "prunes", "spill":
		return exitUsageErr, fmt.Errorf("view %q is not built yet (events, raw, header and status work so far)", o.view)
	default:
		if name, _, ok := strings.Cut(o.view, ":"); ok && (name == "event" || name == "turn" || name == "trace") {
			return exitUsageErr, fmt.Errorf("view %q is not built yet (events, raw, header and status work so far)", o.view)
		}
		return exitUsageErr, &usageError{fmt.Sprintf("unknown view %q", o.view)}
	}
	st, err := openStore(pos[0])
	if err != nil {
		return exitUsageErr, err
	}
	id := pos[1]
	if o.view == "raw" {
		raw, err := st.ReadRaw(ctx, id)
		if err != nil {
			return failCode(err), err
		}
		out.Write(raw)
		return exitOK, nil
	}
	sess := loadSession(ctx, st, id, o.inspect)
	if sess.err != nil && eventstore.IsNotFound(sess.err) {
		return exitUsageErr, sess.err
	}
	switch o.view {
	case "status":
		out.Write(sess.status())
		return exitOK, nil
	case "header":
		if sess.err == nil {
			out.Write(append(sess.header.Meta(), '\n'))
			return exitOK, nil
		}
		if line := headerLineOf(ctx, st, id); line != nil {
			out.Write(append(line, '\n'))
		}
		return failCode(sess.err), sess.err
	}
	if sess.err != nil {
		return failCode(sess.err), sess.err
	}
	for _, e := range sess.events {
		out.Write(e.Raw)
		out.WriteByte('\n')
	}
	return exitOK, nil
}

// failCode maps a read failure to an exit code: I/O and lookup problems are 2, content the harness
// refuses is 1.
func failCode(err error) int {
	if eventstore.IsNotFound(err) || eventstore.Classify(err) == eventstore.KindIO {
		return exitUsageErr
	}
	return exitFound
}

// session is one session read for the views: the event list the views share and what status.json needs.
type session struct {
	id       string
	backend  string
	location string
	header   event.Header
	revision string
	events   []event.Event
	closers  []event.Event
	torn     *eventstore.Torn
	err      error
	// hasHeader is set when header holds a parsed header (always for readable sessions; for refused
	// ones when the refusal came after the header was read).
	hasHeader bool
}

func loadSession(ctx context.Context, st *eventstore.Store, id string, inspect bool) *session {
	s := &session{id: id, backend: st.Backend().Name()}
	ins, err := st.Inspect(ctx, id)
	if err != nil {
		s.err = err
		// A refused session still has an artifact: report where it is and which revision was refused.
		if e := entryOf(ctx, st, id); e != nil {
			s.location, s.revision = e.Path, e.Revision
			if e.Header != nil {
				s.header, s.hasHeader = *e.Header, true
			}
		}
		return s
	}
	s.hasHeader = true
	p := ins.Prefix
	s.header, s.revision, s.location, s.torn, s.closers = ins.Header, p.Revision, p.Path, p.Torn, ins.Closers
	if inspect {
		s.events = ins.Events
	} else {
		s.events = ins.Events[:len(ins.Events)-len(ins.Closers)]
	}
	return s
}

func (s *session) status() []byte {
	in := eventstore.StatusInput{ID: s.id, Backend: s.backend, Location: s.location, Revision: s.revision,
		Events: s.events, Closers: s.closers, Torn: s.torn, Refusal: s.err}
	if s.hasHeader {
		in.Header = &s.header
	}
	return append(event.Stringify(eventstore.SessionStatus(in)), '\n')
}

// entryOf finds a session's listing entry: what is known of a refused session comes from there.
func entryOf(ctx context.Context, st *eventstore.Store, id string) *eventstore.Entry {
	l, err := st.List(ctx)
	if err != nil {
		return nil
	}
	for i := range l.Entries {
		if l.Entries[i].ID == id {
			return &l.Entries[i]
		}
	}
	return nil
}

// headerLineOf is a refused session's first line verbatim, for the header view.
func headerLineOf(ctx context.Context, st *eventstore.Store, id string) []byte {
	if e := entryOf(ctx, st, id); e != nil {
		return e.HeaderLine
	}
	return nil
}

func cmdCheck(ctx context.Context, args []string, out *bufio.Writer) (int, error) {
	o, pos, err := parseArgs(args, map[string]bool{"config": true, "json": true})
	if err != nil {
		return exitUsageErr, err
	}
	if len(pos) < 1 {
		return exitUsageErr, &usageError{"check needs a STORE"}
	}
	if err := checkConfig(o.config); err != nil {
		return exitUsageErr, err
	}
	st, err := openStore(pos[0])
	if err != nil {
		return exitUsageErr, err
	}
	found, ioErr := false, false
	report := func(id *string, kind, msg string) {
		found = true
		if !o.json {
			name := "-"
			if id != nil {
				name = *id
			}
			fmt.Fprintf(out, "%s\t%s\t%s\n", name, kind, msg)
			return
		}
		idv := event.Value{}
		if id != nil {
			idv = event.String(*id)
		}
		out.Write(append(event.Stringify(event.Object(
			event.Member{Key: "id", Value: idv},
			event.Member{Key: "kind", Value: event.String(kind)},
			event.Member{Key: "message", Value: event.String(msg)},
		)), '\n'))
	}
	checkOne := func(id string) {
		if _, err := st.Inspect(ctx, id); err != nil {
			if eventstore.Classify(err) == eventstore.KindIO || eventstore.IsNotFound(err) {
				ioErr = true
			}
			report(&id, string(eventstore.Classify(err)), err.Error())
		}
	}
	if len(pos) > 1 {
		for _, id := range pos[1:] {
			checkOne(id)
		}
	} else {
		l, err := st.List(ctx)
		if err != nil {
			return exitUsageErr, err
		}
		for _, e := range l.Entries {
			if e.Refusal != nil {
				id := e.ID
				report(&id, string(eventstore.Classify(e.Refusal)), e.Refusal.Error())
				continue
			}
			checkOne(e.ID)
		}
		for _, r := range l.RootErrors {
			report(nil, "root", r.Message)
		}
	}
	switch {
	case ioErr:
		return exitUsageErr, nil
	case found:
		return exitFound, nil
	}
	return exitOK, nil
}
