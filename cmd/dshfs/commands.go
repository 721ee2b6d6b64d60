package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/dshfs/dshfs/config"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/postgres"
	"github.com/dshfs/dshfs/spill"
	"github.com/dshfs/dshfs/views"
)

func cmdLs(ctx context.Context, args []string, out *bufio.Writer, stderr io.Writer) (int, error) {
	o, pos, err := parseArgs(args, map[string]bool{"config": true, "json": true})
	if err != nil {
		return exitUsageErr, err
	}
	if len(pos) != 1 {
		return exitUsageErr, &usageError{"ls needs exactly one STORE"}
	}
	cfg, err := loadConfig(o.config)
	if err != nil {
		return exitUsageErr, err
	}
	st, err := openExisting(pos[0], readOnly(cfg)) // reading never writes: a SQLite store is opened read-only
	if err != nil {
		return exitUsageErr, err
	}
	l, err := st.List(ctx)
	if err != nil {
		return exitUsageErr, err
	}
	warnEmpty(stderr, st, l)
	// a fleet store's sessions carry what their hosts' syncs found (a diverged copy, a stale one)
	var syncStates map[string]postgres.SyncState
	if fb, ok := st.Backend().(*postgres.Backend); ok {
		if syncStates, err = fb.SyncStates(ctx); err != nil {
			return exitUsageErr, err
		}
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
			members := []event.Member{
				{Key: "id", Value: event.String(e.ID)},
				{Key: "projectDir", Value: event.String(e.ProjectDir)},
				{Key: "revision", Value: rev},
				{Key: "header", Value: header},
				{Key: "refusal", Value: refusalValue(e.Refusal)},
			}
			if e.Host != "" { // a fleet store's: the session's source host
				members = append(members, event.Member{Key: "host", Value: event.String(e.Host)})
			}
			if ss, ok := syncStates[e.ID]; ok {
				members = append(members, event.Member{Key: "syncState", Value: event.Object(
					event.Member{Key: "state", Value: event.String(ss.State)},
					event.Member{Key: "host", Value: event.String(ss.Host)},
					event.Member{Key: "reason", Value: event.String(ss.Reason)})})
			}
			line := event.Object(members...)
			out.Write(append(event.Stringify(line), '\n'))
			continue
		}
		state, created, cwd, parent := "ok", "", "", ""
		if ss, ok := syncStates[e.ID]; ok {
			state = ss.State
		}
		if e.Refusal != nil {
			state = "refused"
		}
		if h := e.Header; h != nil {
			created = isoTime(h.CreatedAt)
			cwd, parent = optString(h.Cwd), optString(h.ParentSession)
		}
		fmt.Fprintf(out, "%s\t%s\t%s\t%s\t%s\n", textField(e.ID), state, created, textField(cwd), textField(parent))
	}
	// root errors do not hide the sessions, but they are findings: reported as check reports them
	for _, r := range l.RootErrors {
		fmt.Fprintf(stderr, "dshfs: root error: %s\n", textField(r.Message))
	}
	if len(l.RootErrors) > 0 {
		return exitFound, nil
	}
	return exitOK, nil
}

// textField makes a data-derived string safe for one tab-separated line: control characters (a newline or
// a tab in an id) are written as JSON escapes, so one session stays one line.
func textField(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			q := string(event.Stringify(event.String(s)))
			return q[1 : len(q)-1]
		}
	}
	return s
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
	cfg, err := loadConfig(o.config)
	if err != nil {
		return exitUsageErr, err
	}
	view, ok := views.ParseView(o.view)
	if !ok {
		return exitUsageErr, &usageError{fmt.Sprintf("unknown view %q (events, raw, header, status, surface, messages, shadowed, transcript, transcript-html, usage, usage-svg, event:SEQ, turn:N, trace:SEQ, compactions, prunes, spill)", o.view)}
	}
	st, err := openExisting(pos[0], readOnly(cfg)) // reading never writes: a SQLite store is opened read-only
	if err != nil {
		return exitUsageErr, err
	}
	defer wholeLoadCollector()()
	// the events view (and one event's) reads the chunk rows packed; every other view reads the members'
	// records, which a load expands in place for less memory than a snapshot expanding its rows later
	expanded := view.Kind != views.KindEvents && view.Kind != views.KindEvent
	sess, err := views.Load(ctx, st, pos[1], views.Options{Inspect: o.inspect, Spill: spillRoots(cfg, st), Expanded: expanded})
	if err != nil {
		return failCode(err), err
	}
	// streamed, so a large session's text is not held twice; a refused session's header view still
	// shows its first line
	if err := sess.WriteView(ctx, out, view); err != nil {
		var we *views.WriteError
		if errors.Is(err, views.ErrNotFound) || errors.As(err, &we) {
			return exitUsageErr, err
		}
		return failCode(err), err
	}
	return exitOK, nil
}

// cmdIndex prints a page of the store's index, the page a mount serves as index.html (or index-N.html):
// every session newest first with its state and evidence counts, linking to its transcript page.
func cmdIndex(ctx context.Context, args []string, out *bufio.Writer) (int, error) {
	o, pos, err := parseArgs(args, map[string]bool{"config": true, "page": true})
	if err != nil {
		return exitUsageErr, err
	}
	if len(pos) != 1 {
		return exitUsageErr, &usageError{"index needs exactly one STORE"}
	}
	page := 1
	if o.page != "" {
		if page, err = strconv.Atoi(o.page); err != nil || page < 1 {
			return exitUsageErr, &usageError{fmt.Sprintf("--page takes a page number from 1, not %q", o.page)}
		}
	}
	cfg, err := loadConfig(o.config)
	if err != nil {
		return exitUsageErr, err
	}
	st, err := openExisting(pos[0], readOnly(cfg))
	if err != nil {
		return exitUsageErr, err
	}
	l, err := st.List(ctx)
	if err != nil {
		return exitUsageErr, err
	}
	opts := views.Options{Spill: spillRoots(cfg, st)}
	b, ok := views.StoreIndex(ctx, l.Entries, page, func(i int) string { return spill.NameSegment(l.Entries[i].ID) },
		func(e eventstore.Entry) *views.Session {
			if e.Refusal != nil {
				return views.FromEntry(st, e, opts)
			}
			s, err := views.Load(ctx, st, e.ID, opts)
			if err != nil {
				return views.FromEntry(st, eventstore.Entry{ID: e.ID, ModTime: e.ModTime, Header: e.Header, Refusal: err}, opts)
			}
			return s
		})
	if !ok {
		return exitUsageErr, &usageError{fmt.Sprintf("the index of %d sessions has %d pages", len(l.Entries), views.IndexPages(len(l.Entries)))}
	}
	out.Write(b)
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

func cmdCheck(ctx context.Context, args []string, out *bufio.Writer, stderr io.Writer) (int, error) {
	o, pos, err := parseArgs(args, map[string]bool{"config": true, "json": true})
	if err != nil {
		return exitUsageErr, err
	}
	if len(pos) < 1 {
		return exitUsageErr, &usageError{"check needs a STORE"}
	}
	cfg, err := loadConfig(o.config)
	if err != nil {
		return exitUsageErr, err
	}
	st, err := openExisting(pos[0], readOnly(cfg)) // reading never writes: a SQLite store is opened read-only
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
			if id != nil {
				name = textField(name)
			}
			fmt.Fprintf(out, "%s\t%s\t%s\n", name, kind, textField(msg))
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
			kind := string(eventstore.Classify(err))
			if eventstore.IsNotFound(err) {
				kind = "missing" // not a finding about a session: there is none
			}
			if kind == string(eventstore.KindIO) || kind == "missing" {
				ioErr = true
			}
			report(&id, kind, err.Error())
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
		warnEmpty(stderr, st, l)
		// Findings are buffered on stdout and printed at the end, so the bar on stderr never interleaves
		// with them on a terminal.
		bar := newProgress(os.Stderr, "checked", len(l.Entries))
		for i, e := range l.Entries {
			bar.step(i)
			if e.Refusal != nil {
				id := e.ID
				report(&id, string(eventstore.Classify(e.Refusal)), e.Refusal.Error())
				continue
			}
			checkOne(e.ID)
		}
		bar.done()
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

// isoTime is an epoch-milliseconds time as ISO-8601 UTC with milliseconds, as JavaScript's toISOString
// prints it (2026-05-12T08:15:01.000Z): what a reader of ls expects, where --json keeps the stored number.
func isoTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// spillRoots is the spill-root policy for a store: the harness's defaults, the configured roots, and the
// spill directory of the dsh home the store belongs to (spill.HomeRoot), where the harness that wrote the
// store kept the files its logs cite.
func spillRoots(cfg config.Config, st *eventstore.Store) *spill.Roots {
	extra := append([]string(nil), cfg.Spill.Roots...)
	if home, ok := spill.HomeRoot(storeRoot(st)); ok {
		extra = append(extra, home)
	}
	return spill.NewRoots(extra)
}
