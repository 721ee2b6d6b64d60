// Package convert copies every session of one store into another, across backends (JSONL raw ⇄ zstd ⇄
// SQLite), keeping logical events and headers identical.
//
// What "identical" means, and why conversion is careful rather than a loop of appends:
//
//   - The stored log is converted, not the repaired one: a crashed session stays crashed (its open turn
//     is closed only when someone resumes it), and a torn tail — bytes or rows after the committed prefix
//     — is not part of the stored log, so it is reported and left behind.
//   - A session the source refuses (corrupt, unsupported) cannot be read faithfully, and an event the
//     destination cannot hold as written (a fractional time or an envelope member the SQLite schema has
//     no column for) would be changed by storing it: such sessions are skipped, by name and reason.
//   - Conversion resumes: a session already identical in the destination is skipped; one whose stored log
//     there is a prefix of the source's (an interrupted conversion) is completed; any other difference is
//     refused and never overwritten.
//   - Batches: a SQLite destination takes each session as one append (as the harness imports); a JSONL
//     destination takes batches that end where the harness's do (after a step/end, turn/end or
//     session/end-seed) once they hold a quarter of the limit, and never exceed it, so no zstd frame grows
//     past what a reader accepts and a long session is not one fsync per step.
package convert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
	"github.com/dshfs/dshfs/surface"
)

// Outcome is what happened to one session.
type Outcome string

// Outcomes.
const (
	Converted Outcome = "converted" // written to the destination
	Completed Outcome = "completed" // the destination held a prefix; the rest was appended
	Identical Outcome = "identical" // already in the destination as it is in the source
	Skipped   Outcome = "skipped"   // refused by the source or not representable in the destination
	Differs   Outcome = "differs"   // the destination holds a different session of that id: left alone
	Failed    Outcome = "failed"    // a read or write failed
	Missing   Outcome = "missing"   // a session asked for by id (Options.Sessions) that the source does not hold
)

// Report is one session's result.
type Report struct {
	ID      string
	Outcome Outcome
	Events  int    // logical events in the converted log
	Reason  string // why it was skipped, differs or failed; for a converted one, a note (a torn tail left behind)
}

// Options configure a conversion.
type Options struct {
	// Verify re-reads every session from a fresh destination instance and compares it after writing.
	Verify bool
	// Reopen opens a second, independent instance of the destination for Verify.
	Reopen func() (eventstore.Backend, error)
	// Progress is called after each session with the sessions and events done so far.
	Progress func(sessions, total, events int)
	// BatchLimit caps the events of one JSONL batch (a zstd frame); 0 means 4096.
	BatchLimit int
	// Sessions, when not empty, are the only ids converted (a handover of one session, or of a fork of it):
	// each is reported, an id the source does not list as Missing.
	Sessions []string
}

// storer is a backend whose stored events read back in a normalized form (SQLite: the optional envelope
// members reordered), or that cannot hold some events at all.
type storer interface {
	Stored(events []event.Event) ([]event.Event, error)
}

// expected is the log as the destination will give it back.
func expected(dst eventstore.Backend, events []event.Event) ([]event.Event, error) {
	if s, ok := dst.(storer); ok {
		return s.Stored(events)
	}
	return events, nil
}

// writesV4 reports whether dst writes format v4 sessions (a JSONL root, a fleet store): a v4 session is
// then converted as v4 — its header and events as the v4 restore gives them, stored in v4's shapes by the
// destination's v4 writer — and read back through the same restore.
func writesV4(dst eventstore.Backend) bool {
	w, ok := dst.(eventstore.GenerationWriter)
	return ok && w.WritesGeneration(4)
}

// expectedOf is p's log as the destination will give it back: a v4 log as it is (its rows are one event
// each, restored to the same events), a v0 one as expected says.
func expectedOf(dst eventstore.Backend, p *eventstore.Prefix) ([]event.Event, error) {
	if p.Generation == 4 {
		return p.Events, nil
	}
	return expected(dst, p.Events)
}

// Run converts every session of src into dst.
func Run(ctx context.Context, src *eventstore.Store, dst eventstore.Backend, opts Options) ([]Report, error) {
	l, err := src.List(ctx)
	if err != nil {
		return nil, err
	}
	entries := append([]eventstore.Entry(nil), l.Entries...)
	var reports []Report
	if len(opts.Sessions) > 0 {
		entries, reports = only(entries, opts.Sessions)
	}
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].ID < entries[j].ID })
	events := 0
	for i, e := range entries {
		if err := ctx.Err(); err != nil {
			return reports, err
		}
		r := one(ctx, src, dst, e, opts)
		events += r.Events
		reports = append(reports, r)
		if opts.Progress != nil {
			opts.Progress(i+1, len(entries), events)
		}
	}
	if len(opts.Sessions) == 0 {
		// a root error is no session of the ones asked for: it only counts when the whole store is converted
		for _, re := range l.RootErrors {
			reports = append(reports, Report{ID: re.Path, Outcome: Skipped, Reason: re.Message})
		}
	}
	if opts.Verify && opts.Reopen != nil {
		if err := verify(ctx, src, reports, opts.Reopen); err != nil {
			return reports, err
		}
	}
	return reports, nil
}

// only keeps the listed entries of the given ids (each once), and reports each id the listing lacks as
// Missing.
func only(entries []eventstore.Entry, ids []string) ([]eventstore.Entry, []Report) {
	byID := map[string]eventstore.Entry{}
	for _, e := range entries {
		if _, dup := byID[e.ID]; !dup {
			byID[e.ID] = e
		}
	}
	var kept []eventstore.Entry
	var missing []Report
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if e, ok := byID[id]; ok {
			kept = append(kept, e)
		} else {
			missing = append(missing, Report{ID: id, Outcome: Missing, Reason: "the source holds no session of this id"})
		}
	}
	return kept, missing
}

// laterText names a log of a later format generation and the releases that write it.
func laterText(p *eventstore.Prefix) string {
	return "session artifact " + string(event.Stringify(event.String(p.Path))) + " is format generation v" +
		strconv.Itoa(p.Generation) + ", written by " + generation.WrittenBy(p.Generation)
}

func one(ctx context.Context, src *eventstore.Store, dst eventstore.Backend, e eventstore.Entry, opts Options) Report {
	r := Report{ID: e.ID}
	if e.Refusal != nil {
		r.Outcome, r.Reason = Skipped, "refused by the source: "+e.Refusal.Error()
		return r
	}
	// Inspect applies every check the harness's load applies: a session it refuses is not converted.
	ins, err := src.Inspect(ctx, e.ID)
	if err != nil {
		if eventstore.Classify(err) == eventstore.KindIO {
			r.Outcome, r.Reason = Failed, "the source cannot be read: "+err.Error()
		} else {
			r.Outcome, r.Reason = Skipped, "refused by the source: "+err.Error()
		}
		return r
	}
	p := ins.Prefix
	if p.Generation != 0 && !(p.Generation == 4 && writesV4(dst)) {
		// its events are of a later format; written into a v0 log they would be a log no harness reads
		r.Outcome, r.Reason = Skipped, laterText(p)+"; this destination is written in generation v0 only and leaves it out"
		if p.Generation == 4 {
			// the releases that write v4 no longer ship the SQLite provider: no harness reads a v4 session there
			r.Reason += " (the harness's SQLite provider never had format v4)"
		}
		return r
	}
	r.Events = len(p.Events)
	if p.Torn != nil {
		r.Reason = fmt.Sprintf("a torn tail of %d bytes after the committed log was not converted", p.Torn.Bytes)
	}
	want, err := expectedOf(dst, p)
	if err != nil {
		r.Outcome, r.Reason = Skipped, "not representable in the destination: "+err.Error()
		return r
	}
	cur, err := dst.LoadStored(ctx, e.ID)
	switch {
	case eventstore.IsNotFound(err):
		if err := write(ctx, dst, p.Header, p.Events, nil, opts); err != nil {
			r.Outcome, r.Reason = failure(err)
			return r
		}
		r.Outcome = Converted
		return r
	case err != nil && eventstore.Classify(err) == eventstore.KindIO:
		r.Outcome, r.Reason = Failed, "the destination cannot be read: "+err.Error()
		return r
	case err != nil:
		r.Outcome, r.Reason = Differs, "the destination holds a session of this id that it refuses: "+err.Error()
		return r
	case cur.Generation != p.Generation:
		r.Outcome, r.Reason = Differs, "the destination holds this id as another format generation: "+laterText(cur)
		return r
	}
	if !bytes.Equal(cur.Header.WithDepth().Meta(), p.Header.WithDepth().Meta()) {
		r.Outcome, r.Reason = Differs, "the destination holds a session of this id with another header: "+string(cur.Header.Meta())
		return r
	}
	if cur.Torn != nil {
		r.Outcome, r.Reason = Differs, "the destination's copy has a torn tail"
		return r
	}
	n := len(cur.Events)
	if n > len(want) {
		r.Outcome, r.Reason = Differs, fmt.Sprintf("the destination holds %d events, the source %d", n, len(want))
		return r
	}
	for i := 0; i < n; i++ {
		if !bytes.Equal(cur.Events[i].Raw, want[i].Raw) {
			r.Outcome, r.Reason = Differs, fmt.Sprintf("the destination's copy differs from the source's from seq %d on: it is not a prefix of the source's log; left alone", i)
			return r
		}
	}
	if n == len(want) {
		r.Outcome = Identical
		return r
	}
	if err := write(ctx, dst, p.Header, p.Events[n:], cur, opts); err != nil {
		r.Outcome, r.Reason = failure(err)
		return r
	}
	r.Outcome = Completed
	return r
}

func failure(err error) (Outcome, string) {
	var ce *eventstore.CommandError
	if errors.As(err, &ce) && ce.Failure == eventstore.Invalid {
		return Skipped, "not representable in the destination: " + err.Error()
	}
	return Failed, err.Error()
}

// write stores events in dst: materialized with the first batch when cur is nil, else appended after cur,
// under the destination's writer lock.
func write(ctx context.Context, dst eventstore.Backend, h event.Header, events []event.Event, cur *eventstore.Prefix, opts Options) error {
	batches := batchesFor(dst, events, opts.BatchLimit)
	var art eventstore.Artifact
	if cur == nil {
		var first []event.Event
		if len(batches) > 0 {
			first, batches = batches[0], batches[1:]
		}
		a, err := dst.Materialize(ctx, h, first)
		if err != nil {
			return err
		}
		art = a
	} else {
		art = cur.Artifact
	}
	if len(batches) == 0 {
		return nil
	}
	lock, err := eventstore.WriteLock(ctx, dst, h.ID)
	if err != nil {
		return err
	}
	defer lock.Release()
	for _, b := range batches {
		if art, err = dst.AppendBatch(ctx, h, art, b, nil); err != nil {
			return err
		}
	}
	return nil
}

// batchesFor splits a log into the destination's batches: one for a backend that stores a session as
// rows (SQLite), the harness's batches, capped at limit events, for a transcript file.
func batchesFor(dst eventstore.Backend, events []event.Event, limit int) [][]event.Event {
	if len(events) == 0 {
		return nil
	}
	if _, rows := dst.(storer); rows {
		return [][]event.Event{events}
	}
	if limit <= 0 {
		limit = 4096
	}
	var out [][]event.Event
	start := 0
	for i, e := range events {
		n := i + 1 - start
		end := e.Type == "step/end" || e.Type == "turn/end" || e.Type == "session/end-seed"
		if (end && n >= limit/4) || n >= limit || i == len(events)-1 {
			out = append(out, events[start:i+1])
			start = i + 1
		}
	}
	return out
}

// verify re-reads every converted session from a fresh destination instance: its header and stored events
// must equal the source's, and so must the surface a resume of it derives.
func verify(ctx context.Context, src *eventstore.Store, reports []Report, reopen func() (eventstore.Backend, error)) error {
	dst, err := reopen()
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if c, ok := dst.(interface{ Close() error }); ok {
		defer c.Close()
	}
	dstStore := eventstore.New(dst)
	for i := range reports {
		r := &reports[i]
		if r.Outcome != Converted && r.Outcome != Completed && r.Outcome != Identical {
			continue
		}
		p, err := src.Backend().LoadStored(ctx, r.ID)
		if err != nil {
			r.Outcome, r.Reason = Failed, "verify: the source cannot be read again: "+err.Error()
			continue
		}
		want, err := expectedOf(dst, p)
		if err != nil {
			r.Outcome, r.Reason = Failed, "verify: "+err.Error()
			continue
		}
		got, err := dst.LoadStored(ctx, r.ID)
		if err != nil {
			r.Outcome, r.Reason = Failed, "verify: the destination cannot be read: "+err.Error()
			continue
		}
		if !bytes.Equal(got.Header.WithDepth().Meta(), p.Header.WithDepth().Meta()) {
			r.Outcome, r.Reason = Failed, "verify: the destination's header differs"
			continue
		}
		if got.Torn != nil || len(got.Events) != len(want) {
			r.Outcome, r.Reason = Failed, fmt.Sprintf("verify: the destination holds %d events, the source %d", len(got.Events), len(want))
			continue
		}
		differs := false
		for j := range want {
			if !bytes.Equal(got.Events[j].Raw, want[j].Raw) {
				r.Outcome, r.Reason = Failed, fmt.Sprintf("verify: event %d differs", j)
				differs = true
				break
			}
		}
		if differs {
			continue
		}
		if reason := sameSurface(ctx, src, dstStore, r.ID); reason != "" {
			r.Outcome, r.Reason = Failed, "verify: "+reason
		}
	}
	return nil
}

// surfaceOf is what the harness's inspect() of a session gives a resumed agent: the surface fold of its
// validated events plus the closers a resume appends (a crashed session's open turn closed), and the
// messages derived from it.
type surfaceOf struct {
	nodes    []int64
	replaced []surface.Replacement
	messages [][]byte
	closers  []string // the closers' types: a resume of either copy appends the same ones
}

func inspectSurface(ctx context.Context, st *eventstore.Store, id string) (*surfaceOf, error) {
	ins, err := st.Inspect(ctx, id)
	if err != nil {
		return nil, err
	}
	evs := ins.Events
	if ins.Prefix != nil && ins.Prefix.Generation == 4 {
		// a v4 log's surface is read as the v3 one (generation.SurfaceView), as the views read it
		if evs, err = generation.SurfaceView(4, evs); err != nil {
			return nil, err
		}
	}
	fold, err := surface.Fold(evs)
	if err != nil {
		return nil, err
	}
	msgs, err := surface.DeriveMessages(evs, fold)
	if err != nil {
		return nil, err
	}
	out := &surfaceOf{nodes: fold.Nodes, replaced: fold.Replacements, messages: msgs}
	for _, c := range ins.Closers {
		out.closers = append(out.closers, c.Type)
	}
	return out, nil
}

// sameSurface compares the surface both stores derive for a session after the events compared equal: the
// destination's copy must pass every check of the harness's load, and give a resumed agent the same
// messages. It returns what differs, "" when nothing does.
func sameSurface(ctx context.Context, src, dst *eventstore.Store, id string) string {
	want, err := inspectSurface(ctx, src, id)
	if err != nil {
		return "the source's surface cannot be derived: " + err.Error()
	}
	got, err := inspectSurface(ctx, dst, id)
	if err != nil {
		return "the destination's copy is refused by the load checks: " + err.Error()
	}
	switch {
	case !slices.Equal(got.nodes, want.nodes):
		return fmt.Sprintf("the destination's surface holds %d nodes %v, the source's %d", len(got.nodes), short(got.nodes), len(want.nodes))
	case len(got.replaced) != len(want.replaced):
		return fmt.Sprintf("the destination's surface has %d replacements, the source's %d", len(got.replaced), len(want.replaced))
	case len(got.messages) != len(want.messages):
		return fmt.Sprintf("the destination derives %d messages, the source %d", len(got.messages), len(want.messages))
	case !slices.Equal(got.closers, want.closers):
		return fmt.Sprintf("a resume of the destination's copy closes it with %v, of the source's with %v", got.closers, want.closers)
	}
	for i := range want.replaced {
		g, w := got.replaced[i], want.replaced[i]
		if g.Seq != w.Seq || g.Start != w.Start || g.End != w.End || !slices.Equal(g.ShadowedSeqs, w.ShadowedSeqs) {
			return fmt.Sprintf("the destination's surface replacement %d differs", i)
		}
	}
	for i := range want.messages {
		if !bytes.Equal(got.messages[i], want.messages[i]) {
			return fmt.Sprintf("the destination's derived message %d differs", i)
		}
	}
	return ""
}

// short is at most the first 8 of a list of seqs, for a message.
func short(s []int64) []int64 { return s[:min(len(s), 8)] }
