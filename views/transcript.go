package views

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dshfs/dshfs/compaction"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/status"
	"github.com/dshfs/dshfs/spill"
	"github.com/dshfs/dshfs/surface"
)

// The transcript (`dshfs cat --view transcript`, and its page, `--view transcript-html`) is the session
// for a person: turns as sections, steps below them, the messages, reasoning folded, tool calls with their
// arguments and results, and — what no model-history exporter shows — the evidence, each mark with the
// seq it comes from: tool calls with an unknown outcome, crash repairs, compaction checkpoints and what
// they shadowed, pruned results, failed and stale compactions, seed (fork and resume) boundaries, spill
// locators and their status. One walk over the log writes both: Markdown (CommonMark) and one
// self-contained HTML page (html.go). Both are deterministic: times in UTC from the log's own data, no
// locale.

// transcriptCut is how many bytes of one argument or result the transcript shows; the rest is cut with
// its size and the event to read in full (events/<seq>.<type>.json).
const transcriptCut = 2000

// messageCut is the same for one message's text (a user's or the assistant's, reasoning, a compaction's
// summary): far more than any message a person reads in a transcript, and a bound on what one event costs
// the human views, whatever the log holds (a 50 MB pasted message would make a page of 150 MB).
const messageCut = 64 << 10

// prettyLimit is the longest tool-call argument text the transcript indents; a longer one is shown as
// written, cut like any other.
const prettyLimit = 64 << 10

// readCut is how much of a string the transcript decodes from an event (event.ParseClipped): enough to
// cut it at messageCut on a character boundary. A 50 MB message then costs a rendering 64 KiB and a
// count, never a 50 MB string, and concurrent readers of the page do not each hold one.
const readCut = messageCut + utf8.UTFMax

// transcriptState is what rendering the transcript knows of the log beside the event at hand.
type transcriptState struct {
	unknown map[int64]status.UnknownOutcome // by the seq of the tool/call
	records map[int64]compaction.Record     // by compaction/start seq
	prunes  map[int64]compaction.Prune      // by compaction/prune seq
	spills  map[int64][]spill.Row           // by citing seq
	classes []surface.Class
	events  []event.Event
	// seedLength is the header's seedLength for a fork (the seq of its end-seed), -1 otherwise
	seedLength int64

	outside      string // the heading of the section after a turn's end, until something is written there
	inCompaction bool   // between a compaction/start and its end: the checkpoint message is the compaction's
}

// Transcript renders the Markdown transcript.
func (s *Session) Transcript() ([]byte, error) {
	w := &mdWriter{}
	if err := s.writeTranscript(w); err != nil {
		return nil, err
	}
	return w.appendTo(make([]byte, 0, w.len())), nil
}

// TranscriptHTML renders the transcript as one HTML page. The page's table of contents comes before its
// body, and a page kept whole beside its body in pieces would cost twice its size (40 MB for 500k events,
// at the very moment the page's own allocation starts a collection): so a first walk finds the contents
// and the size, and a second writes the page into memory of exactly that size.
func (s *Session) TranscriptHTML() ([]byte, error) {
	st, err := s.transcriptState()
	if err != nil {
		return nil, err
	}
	var size countWriter
	first := &htmlWriter{body: body{w: &size}}
	s.walkTranscript(first, st)
	head, tail := first.pageHead(s.ID), first.pageTail()
	out := appendWriter(make([]byte, 0, len(head)+int(size)+len(tail)))
	out = append(out, head...)
	s.walkTranscript(&htmlWriter{body: body{w: &out}}, st)
	return append(out, tail...), nil
}

// countWriter counts what is written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

// appendWriter appends what is written to it.
type appendWriter []byte

func (a *appendWriter) Write(p []byte) (int, error) {
	*a = append(*a, p...)
	return len(p), nil
}

// writeTranscriptTo writes the transcript, or with html its page, to out as it is rendered: the Markdown
// a piece at a time, the page's body (which follows its table of contents) once the walk is over. Errors
// from out come back wrapped in *WriteError.
func (s *Session) writeTranscriptTo(out io.Writer, html bool) error {
	if html {
		w := &htmlWriter{}
		if err := s.writeTranscript(w); err != nil {
			return err
		}
		if err := w.writePage(s.ID, out); err != nil {
			return &WriteError{Err: err}
		}
		return nil
	}
	w := &mdWriter{body: body{w: out}}
	if err := s.writeTranscript(w); err != nil {
		return err
	}
	if w.err != nil {
		return &WriteError{Err: w.err}
	}
	return nil
}

func (s *Session) writeTranscript(w transcriptWriter) error {
	st, err := s.transcriptState()
	if err != nil {
		return err
	}
	s.walkTranscript(w, st)
	return nil
}

// transcriptState is what a walk of the transcript knows of the log before it starts: found once, so
// that two walks of one snapshot (TranscriptHTML) see the same spill statuses.
func (s *Session) transcriptState() (transcriptState, error) {
	if s.Refusal != nil {
		return transcriptState{}, s.Refusal
	}
	classes, err := s.classify()
	if err != nil {
		return transcriptState{}, err
	}
	recs, prunes, err := s.Compactions()
	if err != nil {
		return transcriptState{}, err
	}
	rows, err := s.SpillRows()
	if err != nil {
		return transcriptState{}, err
	}
	st := transcriptState{unknown: map[int64]status.UnknownOutcome{}, records: map[int64]compaction.Record{},
		prunes: map[int64]compaction.Prune{}, spills: map[int64][]spill.Row{},
		classes: classes, events: s.Events(), seedLength: s.forkSeed()}
	for _, u := range status.UnknownOutcomes(s.Events()) {
		st.unknown[u.CallSeq] = u
	}
	for _, r := range recs {
		st.records[r.StartSeq] = r
	}
	for _, p := range prunes {
		st.prunes[p.Seq] = p
	}
	for _, r := range rows {
		st.spills[r.Seq] = append(st.spills[r.Seq], r)
	}
	return st, nil
}

// walkTranscript writes the transcript to w. st is taken by value: a walk's own progress (the section
// it is in) starts afresh at every walk.
func (s *Session) walkTranscript(w transcriptWriter, st transcriptState) {
	s.transcriptHead(w)
	for _, e := range s.Events() {
		st.event(w, e)
		w.done()
	}
	s.transcriptTail(w)
	w.spill()
}

func (s *Session) transcriptHead(w transcriptWriter) {
	w.heading(1, txt("Session "), code(s.ID))
	var items [][]span
	if h := s.Header; h != nil {
		items = append(items, []span{txt("created: " + time.UnixMilli(h.CreatedAt).UTC().Format("2006-01-02 15:04:05.000 UTC"))})
		if h.Cwd != nil && h.Cwd.Kind == event.KindString {
			items = append(items, []span{txt("working directory: "), code(h.Cwd.Str)})
		}
		if h.ParentSession != nil && h.ParentSession.Kind == event.KindString {
			item := []span{txt("forked from "), code(h.ParentSession.Str), txt(" ("), link("parent", "parent"), txt(")")}
			if h.SeedLength != nil {
				item = append(item, txt(": the first "+numText(*h.SeedLength)+" events were copied from it"))
			}
			items = append(items, item)
		}
		if h.DelegationDepth > 0 {
			items = append(items, []span{txt("delegation depth: " + strconv.FormatInt(h.DelegationDepth, 10))})
		}
	}
	turns := 0
	for _, e := range s.Events() {
		if e.Type == "turn/start" {
			turns++
		}
	}
	items = append(items, []span{txt(strconv.Itoa(len(s.Events())) + " events, " + strconv.Itoa(turns) + " turns")})
	if s.Pending > 0 {
		items = append(items, []span{txt(strconv.Itoa(s.Pending) + " events accepted and not yet durable (this mount writes the session)")})
	}
	w.list(items)
	w.para(txt("Marks start with "), code("[!]"), txt(" and name the seq they come from; "), code("events/<seq>.<type>.json"),
		txt(" holds each event whole."))
}

func (s *Session) transcriptTail(w transcriptWriter) {
	if len(s.Closers) > 0 {
		w.heading(2, txt("Open turn"))
		var types []span
		for i, e := range s.Closers {
			if i > 0 {
				types = append(types, txt(", "))
			}
			types = append(types, code(e.Type))
		}
		w.mark("Crash: the log ends inside a turn.", append(append([]span{txt("A "), code("resume"),
			txt(" would close it with " + strconv.Itoa(len(s.Closers)) + " synthetic events (")}, types...),
			txt("); until then nothing is repaired."))...)
	}
	if s.Torn != nil {
		w.mark("Torn tail.", txt("The artifact ends in an incomplete record, which no view includes; "), code("raw.jsonl"), txt(" shows it."))
	}
}

// transcribed are the event types the transcript shows; every other event is only an anchor (and a spill
// locator's citing seq), so that the log's stream chunks and requests — most of a long session — are never
// parsed.
var transcribed = map[string]bool{"turn/start": true, "step/start": true, "turn/end": true, "user/message": true,
	"assistant/message": true, "tool/call": true, "tool/result": true, "compaction/start": true, "compaction/end": true,
	"compaction/prune": true, "session/end-seed": true}

func (st *transcriptState) event(w transcriptWriter, e event.Event) {
	w.anchor(e.Seq)
	if !transcribed[e.Type] {
		st.spillMarks(w, e)
		return
	}
	rec, err := e.Clipped(readCut)
	if err != nil {
		return
	}
	data, _ := rec.Get("data")
	seq := "seq " + strconv.FormatInt(e.Seq, 10)
	if e.Type == "turn/start" {
		st.outside = ""
	} else if st.outside != "" {
		// what happens between turns (a compaction by command, a seed boundary) gets a section of its own,
		// not the last step's
		w.pendingHeading(st.outside)
		defer w.flushPending()
	}
	switch e.Type {
	case "turn/start":
		n, _ := data.Get("turn")
		w.heading(2, txt("Turn "+numText(n)))
	case "step/start":
		n, _ := data.Get("step")
		w.heading(3, txt("Step "+numText(n)))
	case "turn/end":
		reason, _ := data.Get("reason")
		kind, _ := reason.Get("kind")
		n, _ := data.Get("turn")
		st.outside = "After turn " + numText(n)
		switch kind.Str {
		case "completed":
		case "interrupted":
			w.mark("Crash repair", txt("("+seq+"): turn "+numText(n)+" was closed as "), code("interrupted"),
				txt(" by a resume; the harness did not finish it."))
		default:
			w.para(em("Turn "+numText(n)+" ended: "+kind.Str), txt(" ("+seq+")"))
		}
	case "user/message":
		if st.inCompaction {
			return // the checkpoint's own message, shown with its compaction
		}
		st.shadowedMark(w, e)
		w.para(bold("User"), txt(" ("+seq+")"))
		w.quote(contentText(data, messageCut), e)
	case "assistant/message":
		st.shadowedMark(w, e)
		msg, _ := data.Get("message")
		w.para(bold("Assistant"), txt(" ("+seq+")"))
		content, _ := msg.Get("content")
		for _, c := range content.Arr {
			typ, _ := c.Get("type")
			text, _ := c.Get("text")
			switch typ.Str {
			case "reasoning":
				w.details("Reasoning", clipValue(text, messageCut), e)
			case "text":
				w.quote(clipValue(text, messageCut), e)
			}
		}
	case "tool/call":
		name, _ := data.Get("name")
		id, _ := data.Get("callId")
		w.para(bold("Tool call"), txt(" "), code(name.Str), txt(" ("+seq+", call "), code(id.Str), txt(")"))
		args, ok := e.Member("data")
		if ok {
			args, ok = event.Lookup(args, "arguments")
		}
		if !ok {
			args = []byte("null") // what the arguments of a call that names none print as
		}
		w.fenced("json", prettyArguments(args, transcriptCut), e)
		if u, ok := st.unknown[e.Seq]; ok {
			if u.ResolvedBySeq >= 0 {
				w.mark("Unknown outcome", txt("("+seq+"): the session crashed before a result was recorded; the repair at seq "+
					strconv.FormatInt(u.ResolvedBySeq, 10)+" says only "), code("TOOL_OUTCOME_UNKNOWN"), txt(". Verify its effect before retrying."))
			} else {
				w.mark("Unknown outcome", txt("("+seq+"): no result was recorded for this call. Verify its effect before retrying."))
			}
		}
	case "tool/result":
		st.shadowedMark(w, e)
		msg, _ := data.Get("message")
		content, _ := msg.Get("content")
		for _, c := range content.Arr {
			id, _ := c.Get("toolCallId")
			isErr, _ := c.Get("isError")
			label := "Tool result"
			if isErr.Kind == event.KindBool && isErr.Bool {
				label = "Tool result (error)"
			}
			w.para(bold(label), txt(" ("+seq+", call "), code(id.Str), txt(")"))
			inner, _ := c.Get("content")
			w.fenced("", contentText(event.Object(event.Member{Key: "content", Value: inner}), transcriptCut), e)
		}
	case "compaction/start":
		st.inCompaction = true
		st.compactionMark(w, e)
	case "compaction/end":
		st.inCompaction = false
	case "compaction/prune":
		p, ok := st.prunes[e.Seq]
		if !ok {
			return
		}
		text := "(" + seq + "): " + seqsText(p.ShadowedSeqs) + " replaced"
		if p.ReplacementSeq >= 0 {
			text += " by the shorter result at seq " + strconv.FormatInt(p.ReplacementSeq, 10)
		}
		w.mark("Pruned", txt(text+"; the originals are in "), link("shadowed/", "shadowed/"), txt("."))
	case "session/end-seed":
		// the marker a seeded session's constructor appends at seq = seed length: at the header's seedLength
		// it ends what a fork copied, anywhere else it is where a stored log was resumed
		// (docs/harness.md#fork-resume-and-the-end-seed)
		if st.seedLength >= 0 && e.Seq == st.seedLength {
			w.mark("Fork boundary", txt("("+seq+"): the "+strconv.FormatInt(e.Seq, 10)+" events above were copied from the parent session ("),
				link("parent", "parent"), txt("); this session's own begin here."))
		} else {
			w.mark("Resume boundary", txt("("+seq+"): the stored log was loaded and resumed here; what follows was written after the resume."))
		}
	}
	st.spillMarks(w, e)
}

// spillMarks marks the spill locators an event cites, with their status now.
func (st *transcriptState) spillMarks(w transcriptWriter, e event.Event) {
	for _, r := range st.spills[e.Seq] {
		spans := []span{txt("(seq " + strconv.FormatInt(e.Seq, 10) + "): "), code(r.Locator), txt(" — " + string(r.Status))}
		if r.File != "" {
			spans = append(spans, txt(", served as "), link(r.File, r.File))
		}
		w.mark("Spill locator", spans...)
	}
}

// shadowed reports whether a replacement shadowed the event at seq.
func (st *transcriptState) shadowed(seq int64) bool {
	return seq >= 0 && seq < int64(len(st.classes)) && st.classes[seq] == surface.Shadowed
}

// shadowedMark says so before an event a replacement shadowed: the model no longer sees it.
func (st *transcriptState) shadowedMark(w transcriptWriter, e event.Event) {
	if st.shadowed(e.Seq) {
		w.mark("Shadowed", txt("(seq "+strconv.FormatInt(e.Seq, 10)+"): a compaction or prune replaced this; the model no longer sees it ("),
			link("trace", "trace/"+traceName(e.Seq)), txt(")."))
	}
}

func (st *transcriptState) compactionMark(w transcriptWriter, e event.Event) {
	r, ok := st.records[e.Seq]
	if !ok {
		return
	}
	seq := "seq " + strconv.FormatInt(e.Seq, 10)
	file := "compactions/" + spill.NameSegment(r.CompactionID) + ".json"
	head := []span{txt("(" + seq + ", "), link(file, file), txt("): ")}
	switch r.State {
	case compaction.Complete:
		text := seqsText(r.ShadowedSeqs)
		if r.ShadowedTokenCount.Kind == event.KindNumber {
			text += " (about " + numText(r.ShadowedTokenCount) + " tokens)"
		}
		text += " replaced by the summary below (seq " + strconv.FormatInt(r.ReplacementSeq, 10) + "); the originals are in "
		tail := "."
		if st.shadowed(r.ReplacementSeq) {
			tail += " A later compaction shadowed this summary in turn."
		}
		w.mark("Compaction checkpoint", append(head, txt(text), link("shadowed/", "shadowed/"), txt(tail))...)
		if sum := summaryText(st, r); sum.total > 0 {
			w.quote(sum, e)
		}
	case compaction.Failed:
		w.mark("Failed compaction", append(head, txt(errorText(r.Error)+"; nothing was replaced."))...)
	case compaction.Stale:
		w.mark("Stale compaction", append(head, txt("it started and never ended (a crash or a resume came first); nothing was replaced."))...)
	case compaction.Open:
		w.mark("Compaction in progress", append(head, txt("started, no summary committed yet."))...)
	}
}

// summaryText is the text of a compaction's summary event.
func summaryText(st *transcriptState, r compaction.Record) clip {
	if r.SummarySeq < 0 || r.SummarySeq >= int64(len(st.events)) {
		return clip{}
	}
	rec, err := st.events[r.SummarySeq].Clipped(readCut)
	if err != nil {
		return clip{}
	}
	data, _ := rec.Get("data")
	sum, _ := data.Get("summary")
	return contentText(event.Object(event.Member{Key: "content", Value: sum}), messageCut)
}

func errorText(v event.Value) string {
	if v.Kind == event.KindString {
		return v.Str
	}
	if m, ok := v.Get("message"); ok && m.Kind == event.KindString {
		return m.Str
	}
	return string(event.Stringify(v))
}

// seqsText names the shadowed seqs of a compaction or prune.
func seqsText(v event.Value) string {
	if v.Kind != event.KindArray || len(v.Arr) == 0 {
		return "nothing"
	}
	var seqs []string
	for _, n := range v.Arr {
		seqs = append(seqs, numText(n))
	}
	noun := "events"
	if len(seqs) == 1 {
		noun = "event"
	}
	return noun + " seq " + strings.Join(seqs, ", ")
}

func numText(v event.Value) string {
	if v.Kind == event.KindNumber {
		return event.FormatNumber(v.Num)
	}
	return "?"
}

// traceName is the name of an event's trace file in trace/.
func traceName(seq int64) string { return fmt.Sprintf("%010d.json", seq) }

// contentText is the text of a message's content parts — text as it is, other parts named, one a line —
// cut at limit bytes: parts past the limit are counted, never copied. data may come from a clipped parse
// (event.ParseClipped) that keeps more than limit bytes of each text.
func contentText(data event.Value, limit int) clip {
	content, _ := data.Get("content")
	if content.Kind == event.KindString {
		return clipValue(content, limit)
	}
	var b strings.Builder
	total := 0
	for i, c := range content.Arr {
		typ, _ := c.Get("type")
		part, size := "["+typ.Str+"]", 0
		if typ.Str == "text" {
			t, _ := c.Get("text")
			part, size = t.Str, event.StrLen(t)
		}
		if i > 0 {
			total++
			if b.Len() <= limit {
				b.WriteByte('\n')
			}
		}
		total += max(len(part), size)
		if room := limit + 1 - b.Len(); room > 0 {
			b.WriteString(part[:min(room+utf8.UTFMax, len(part))])
		}
	}
	c := clipText(b.String(), limit)
	c.total = total
	return c
}

// prettyArguments is a tool call's arguments, which the log keeps as a JSON text, indented and cut at
// limit bytes. raw is the arguments member as the event holds it (canonical JSON: a string, or for a
// caller that wrote a value instead, that value as JSON.stringify spells it).
func prettyArguments(raw []byte, limit int) clip {
	var text string
	if len(raw) > 0 && raw[0] == '"' {
		v, err := event.ParseClipped(raw, prettyLimit+1)
		if err != nil {
			return clip{}
		}
		if event.StrLen(v) > prettyLimit {
			// the transcript shows limit bytes of it: indenting (or even decoding) megabytes to show two
			// thousand costs memory in proportion to the log, not to the page
			return clipValue(v, limit)
		}
		text = v.Str
	} else {
		if len(raw) > prettyLimit {
			c := clipText(string(raw[:min(len(raw), limit+utf8.UTFMax)]), limit)
			c.total = len(raw)
			return c
		}
		text = string(raw)
	}
	var out bytes.Buffer
	if json.Indent(&out, []byte(text), "", "  ") == nil {
		return clipText(out.String(), limit)
	}
	return clipText(text, limit)
}

// validText makes a log string (WTF-8: it may hold lone surrogates, as the harness writes them) valid
// UTF-8 for a text file, each invalid sequence shown as U+FFFD.
func validText(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
