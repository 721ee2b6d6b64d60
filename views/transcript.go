package views

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dshfs/dshfs/compaction"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/spill"
	"github.com/dshfs/dshfs/surface"
)

// The transcript (transcript.md, `dshfs cat --view transcript`) is the session for a person: turns as
// sections, steps below them, the messages, reasoning folded, tool calls with their arguments and results,
// and — what no model-history exporter shows — the evidence, each mark with the seq it comes from: tool
// calls with an unknown outcome, crash repairs, compaction checkpoints and what they shadowed, pruned
// results, failed and stale compactions, seed (fork and resume) boundaries, spill locators and their
// status. It is deterministic (times in UTC from the log's own data, no locale) and CommonMark.

// transcriptCut is how many bytes of one argument or result the transcript shows; the rest is cut with
// its size and the seq of the event to read in full (events/<seq>.<type>.json).
const transcriptCut = 2000

// mark prefixes every evidence mark, so that `grep -F '**[!]'` finds them all.
const mark = "> **[!] "

// transcriptState is what rendering the transcript knows of the log beside the event at hand.
type transcriptState struct {
	unknown  map[int64]eventstore.UnknownOutcome // by the seq of the tool/call
	repaired map[string]int64                    // callId -> seq of its synthetic TOOL_OUTCOME_UNKNOWN result
	records  map[int64]compaction.Record         // by compaction/start seq
	prunes   map[int64]compaction.Prune          // by compaction/prune seq
	spills   map[int64][]spill.Row               // by citing seq
	classes  []surface.Class
	events   []event.Event
	// seedLength is the header's seedLength for a fork (the seq of its end-seed), -1 otherwise
	seedLength int64

	outside      string // the heading of the section after a turn's end, until something is written there
	inCompaction bool   // between a compaction/start and its end: the checkpoint message is the compaction's
}

// Transcript renders transcript.md.
func (s *Session) Transcript() ([]byte, error) {
	if s.Refusal != nil {
		return nil, s.Refusal
	}
	fold, err := s.Fold()
	if err != nil {
		return nil, err
	}
	recs, prunes, err := s.Compactions()
	if err != nil {
		return nil, err
	}
	rows, err := s.SpillRows()
	if err != nil {
		return nil, err
	}
	st := transcriptState{unknown: map[int64]eventstore.UnknownOutcome{}, repaired: map[string]int64{},
		records: map[int64]compaction.Record{}, prunes: map[int64]compaction.Prune{}, spills: map[int64][]spill.Row{},
		classes: surface.Classify(s.semantic(), fold), events: s.Events}
	st.seedLength = -1
	if h := s.Header; h != nil && h.ParentSession != nil && h.SeedLength != nil && h.SeedLength.Kind == event.KindNumber {
		st.seedLength = int64(h.SeedLength.Num)
	}
	for _, u := range eventstore.UnknownOutcomes(s.Events) {
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
	var w mdWriter
	s.transcriptHead(&w)
	for _, e := range s.Events {
		st.event(&w, e)
	}
	s.transcriptTail(&w)
	return w.b, nil
}

func (s *Session) transcriptHead(w *mdWriter) {
	w.line("# Session `" + inlineCode(s.ID) + "`")
	w.blank()
	if h := s.Header; h != nil {
		w.line("- created: " + time.UnixMilli(h.CreatedAt).UTC().Format("2006-01-02 15:04:05.000 UTC"))
		if h.Cwd != nil && h.Cwd.Kind == event.KindString {
			w.line("- working directory: `" + inlineCode(h.Cwd.Str) + "`")
		}
		if h.ParentSession != nil && h.ParentSession.Kind == event.KindString {
			text := "- forked from `" + inlineCode(h.ParentSession.Str) + "` ([parent](parent))"
			if h.SeedLength != nil {
				text += ": the first " + numText(*h.SeedLength) + " events were copied from it"
			}
			w.line(text)
		}
		if h.DelegationDepth > 0 {
			w.line("- delegation depth: " + strconv.FormatInt(h.DelegationDepth, 10))
		}
	}
	turns := 0
	for _, e := range s.Events {
		if e.Type == "turn/start" {
			turns++
		}
	}
	w.line("- " + strconv.Itoa(len(s.Events)) + " events, " + strconv.Itoa(turns) + " turns")
	if s.Pending > 0 {
		w.line("- " + strconv.Itoa(s.Pending) + " events accepted and not yet durable (this mount writes the session)")
	}
	w.blank()
	w.line("Marks start with `**[!]` and name the seq they come from; `events/<seq>.<type>.json` holds each event whole.")
	w.blank()
}

func (s *Session) transcriptTail(w *mdWriter) {
	if len(s.Closers) > 0 {
		w.line("## Open turn")
		w.blank()
		w.line(mark + "Crash: the log ends inside a turn.** A `resume` would close it with " +
			strconv.Itoa(len(s.Closers)) + " synthetic events (" + closerTypes(s.Closers) + "); until then nothing is repaired.")
		w.blank()
	}
	if s.Torn != nil {
		w.line(mark + "Torn tail.** The artifact ends in an incomplete record, which no view includes; `raw.jsonl` shows it.")
		w.blank()
	}
}

func closerTypes(evs []event.Event) string {
	var names []string
	for _, e := range evs {
		names = append(names, "`"+e.Type+"`")
	}
	return strings.Join(names, ", ")
}

func (st *transcriptState) event(w *mdWriter, e event.Event) {
	rec, err := e.Record()
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
		w.at = len(w.b)
		w.pending = "## " + st.outside + "\n\n"
		defer w.flushPending()
	}
	switch e.Type {
	case "turn/start":
		n, _ := data.Get("turn")
		w.line("## Turn " + numText(n))
		w.blank()
	case "step/start":
		n, _ := data.Get("step")
		w.line("### Step " + numText(n))
		w.blank()
	case "turn/end":
		reason, _ := data.Get("reason")
		kind, _ := reason.Get("kind")
		n, _ := data.Get("turn")
		st.outside = "After turn " + numText(n)
		switch kind.Str {
		case "completed":
		case "interrupted":
			w.line(mark + "Crash repair** (" + seq + "): turn " + numText(n) + " was closed as `interrupted` by a resume; the harness did not finish it.")
			w.blank()
		default:
			w.line("*Turn " + numText(n) + " ended: " + inlineText(kind.Str) + "* (" + seq + ")")
			w.blank()
		}
	case "user/message":
		if st.inCompaction {
			return // the checkpoint's own message, shown with its compaction
		}
		st.shadowedMark(w, e)
		w.line("**User** (" + seq + ")")
		w.blank()
		w.quote(contentText(data))
		w.blank()
	case "assistant/message":
		st.shadowedMark(w, e)
		msg, _ := data.Get("message")
		w.line("**Assistant** (" + seq + ")")
		w.blank()
		content, _ := msg.Get("content")
		for _, c := range content.Arr {
			typ, _ := c.Get("type")
			text, _ := c.Get("text")
			switch typ.Str {
			case "reasoning":
				w.line("<details><summary>Reasoning</summary>")
				w.blank()
				w.quote(text.Str)
				w.blank()
				w.line("</details>")
				w.blank()
			case "text":
				w.quote(text.Str)
				w.blank()
			}
		}
	case "tool/call":
		name, _ := data.Get("name")
		id, _ := data.Get("callId")
		w.line("**Tool call** `" + inlineCode(name.Str) + "` (" + seq + ", call `" + inlineCode(id.Str) + "`)")
		w.blank()
		args, _ := data.Get("arguments")
		w.fenced("json", prettyArguments(args), e)
		if u, ok := st.unknown[e.Seq]; ok {
			if u.ResolvedBySeq >= 0 {
				w.line(mark + "Unknown outcome** (" + seq + "): the session crashed before a result was recorded; the repair at seq " +
					strconv.FormatInt(u.ResolvedBySeq, 10) + " says only `TOOL_OUTCOME_UNKNOWN`. Verify its effect before retrying.")
			} else {
				w.line(mark + "Unknown outcome** (" + seq + "): no result was recorded for this call. Verify its effect before retrying.")
			}
			w.blank()
		}
	case "tool/result":
		st.shadowedMark(w, e)
		msg, _ := data.Get("message")
		content, _ := msg.Get("content")
		for _, c := range content.Arr {
			id, _ := c.Get("toolCallId")
			isErr, _ := c.Get("isError")
			label := "**Tool result**"
			if isErr.Kind == event.KindBool && isErr.Bool {
				label = "**Tool result (error)**"
			}
			w.line(label + " (" + seq + ", call `" + inlineCode(id.Str) + "`)")
			w.blank()
			inner, _ := c.Get("content")
			w.fenced("", contentText(event.Object(event.Member{Key: "content", Value: inner})), e)
		}
	case "compaction/start":
		st.inCompaction = true
		st.compactionMark(w, e, data)
	case "compaction/end":
		st.inCompaction = false
	case "compaction/prune":
		p, ok := st.prunes[e.Seq]
		if !ok {
			return
		}
		text := mark + "Pruned** (" + seq + "): " + seqsText(p.ShadowedSeqs) + " replaced"
		if p.ReplacementSeq >= 0 {
			text += " by the shorter result at seq " + strconv.FormatInt(p.ReplacementSeq, 10)
		}
		w.line(text + "; the originals are in [shadowed/](shadowed/).")
		w.blank()
	case "session/end-seed":
		// the marker a seeded session's constructor appends at seq = seed length: at the header's seedLength
		// it ends what a fork copied, anywhere else it is where a stored log was resumed (spec/events.md §6)
		if st.seedLength >= 0 && e.Seq == st.seedLength {
			w.line(mark + "Fork boundary** (" + seq + "): the " + strconv.FormatInt(e.Seq, 10) + " events above were copied from the parent session ([parent](parent)); this session's own begin here.")
		} else {
			w.line(mark + "Resume boundary** (" + seq + "): the stored log was loaded and resumed here; what follows was written after the resume.")
		}
		w.blank()
	}
	for _, r := range st.spills[e.Seq] {
		text := mark + "Spill locator** (" + seq + "): `" + inlineCode(r.Locator) + "` — " + string(r.Status)
		if r.File != "" {
			text += ", served as [" + r.File + "](" + r.File + ")"
		}
		w.line(text)
		w.blank()
	}
}

// shadowed reports whether a replacement shadowed the event at seq.
func (st *transcriptState) shadowed(seq int64) bool {
	return seq >= 0 && seq < int64(len(st.classes)) && st.classes[seq] == surface.Shadowed
}

// shadowedMark says so before an event a replacement shadowed: the model no longer sees it.
func (st *transcriptState) shadowedMark(w *mdWriter, e event.Event) {
	if st.shadowed(e.Seq) {
		w.line(mark + "Shadowed** (seq " + strconv.FormatInt(e.Seq, 10) + "): a compaction or prune replaced this; the model no longer sees it ([trace](trace/" +
			strconv.FormatInt(e.Seq, 10) + ".json)).")
		w.blank()
	}
}

func (st *transcriptState) compactionMark(w *mdWriter, e event.Event, data event.Value) {
	r, ok := st.records[e.Seq]
	if !ok {
		return
	}
	seq := "seq " + strconv.FormatInt(e.Seq, 10)
	link := "[compactions/" + spill.NameSegment(r.CompactionID) + ".json](compactions/" + spill.NameSegment(r.CompactionID) + ".json)"
	switch r.State {
	case compaction.Complete:
		text := mark + "Compaction checkpoint** (" + seq + ", " + link + "): " + seqsText(r.ShadowedSeqs)
		if r.ShadowedTokenCount.Kind == event.KindNumber {
			text += " (about " + numText(r.ShadowedTokenCount) + " tokens)"
		}
		text += " replaced by the summary below (seq " + strconv.FormatInt(r.ReplacementSeq, 10) + "); the originals are in [shadowed/](shadowed/)."
		if st.shadowed(r.ReplacementSeq) {
			text += " A later compaction shadowed this summary in turn."
		}
		w.line(text)
		w.blank()
		if sum := summaryText(st, r); sum != "" {
			w.quote(sum)
			w.blank()
		}
	case compaction.Failed:
		w.line(mark + "Failed compaction** (" + seq + ", " + link + "): " + inlineText(errorText(r.Error)) + "; nothing was replaced.")
		w.blank()
	case compaction.Stale:
		w.line(mark + "Stale compaction** (" + seq + ", " + link + "): it started and never ended (a crash or a resume came first); nothing was replaced.")
		w.blank()
	case compaction.Open:
		w.line(mark + "Compaction in progress** (" + seq + ", " + link + "): started, no summary committed yet.")
		w.blank()
	}
}

// summaryText is the text of a compaction's summary event.
func summaryText(st *transcriptState, r compaction.Record) string {
	if r.SummarySeq < 0 || r.SummarySeq >= int64(len(st.events)) {
		return ""
	}
	rec, err := st.events[r.SummarySeq].Record()
	if err != nil {
		return ""
	}
	data, _ := rec.Get("data")
	sum, _ := data.Get("summary")
	return contentText(event.Object(event.Member{Key: "content", Value: sum}))
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

// contentText is the text of a message's content parts: text as it is, other parts named.
func contentText(data event.Value) string {
	content, _ := data.Get("content")
	if content.Kind == event.KindString {
		return content.Str
	}
	var parts []string
	for _, c := range content.Arr {
		typ, _ := c.Get("type")
		switch typ.Str {
		case "text":
			t, _ := c.Get("text")
			parts = append(parts, t.Str)
		default:
			parts = append(parts, "["+typ.Str+"]")
		}
	}
	return strings.Join(parts, "\n")
}

// prettyArguments is a tool call's arguments, which the log keeps as a JSON text, indented.
func prettyArguments(v event.Value) string {
	text := v.Str
	if v.Kind != event.KindString {
		text = string(event.Stringify(v))
	}
	var out bytes.Buffer
	if json.Indent(&out, []byte(text), "", "  ") == nil {
		return out.String()
	}
	return text
}

// mdWriter builds the Markdown text. A pending heading is written only if something follows it.
type mdWriter struct {
	b       []byte
	pending string // a heading to put at offset at, once the event being written adds anything
	at      int
}

// flushPending puts the pending heading in place when the event wrote something after it was set.
func (w *mdWriter) flushPending() {
	if w.pending == "" {
		return
	}
	if len(w.b) > w.at {
		w.b = append(w.b[:w.at], append([]byte(w.pending), w.b[w.at:]...)...)
		w.pending = ""
	}
}

func (w *mdWriter) line(s string) { w.b = append(append(w.b, s...), '\n') }
func (w *mdWriter) blank()        { w.b = append(w.b, '\n') }

// quote writes text as a block quote, escaped so that nothing in it can open HTML or end the quote.
func (w *mdWriter) quote(text string) {
	text = validText(text)
	if text == "" {
		w.line(">")
		return
	}
	for _, l := range strings.Split(text, "\n") {
		w.line(strings.TrimRight("> "+escapeHTML(l), " "))
	}
}

// fenced writes text in a code fence longer than any backtick run in it, cut at transcriptCut bytes.
func (w *mdWriter) fenced(lang, text string, e event.Event) {
	text = validText(text)
	cut := ""
	if len(text) > transcriptCut {
		n := transcriptCut
		for n > 0 && !utf8.RuneStart(text[n]) {
			n--
		}
		cut = "*… cut: " + strconv.Itoa(len(text)) + " bytes in all; the whole event is `events/" + strconv.FormatInt(e.Seq, 10) +
			"." + strings.ReplaceAll(e.Type, "/", ".") + ".json`*"
		text = text[:n]
	}
	fence := strings.Repeat("`", max(3, longestRun(text, '`')+1))
	w.line(fence + lang)
	if text != "" {
		w.line(strings.TrimSuffix(text, "\n"))
	}
	w.line(fence)
	w.blank()
	if cut != "" {
		w.line(cut)
		w.blank()
	}
}

func longestRun(s string, c byte) int {
	best, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}

// validText makes a log string (WTF-8: it may hold lone surrogates, as the harness writes them) valid
// UTF-8 for a text file, each invalid sequence shown as U+FFFD.
func validText(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// inlineText is text for a Markdown line: one line, HTML escaped.
func inlineText(s string) string {
	return escapeHTML(strings.ReplaceAll(validText(s), "\n", " "))
}

// inlineCode is text for inside a code span: one line, no backticks to end the span early.
func inlineCode(s string) string {
	return strings.NewReplacer("\n", " ", "`", "'").Replace(validText(s))
}

func escapeHTML(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
