package views

import (
	"html"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dshfs/dshfs/eventstore/event"
)

// span is one piece of a line of the transcript: plain text, or text in a style, or a link.
type span struct {
	style      spanStyle
	text, href string
}

type spanStyle uint8

const (
	plain spanStyle = iota
	strong
	emphasis
	codeSpan
	anchorLink
)

func txt(s string) span           { return span{style: plain, text: s} }
func bold(s string) span          { return span{style: strong, text: s} }
func em(s string) span            { return span{style: emphasis, text: s} }
func code(s string) span          { return span{style: codeSpan, text: s} }
func link(text, href string) span { return span{style: anchorLink, text: text, href: href} }

// transcriptWriter is what the transcript's walk writes to: a Markdown document or an HTML page, block by
// block, so that the two say the same.
type transcriptWriter interface {
	anchor(seq int64) // an event's place (an HTML anchor; nothing in Markdown)
	heading(level int, spans ...span)
	// pendingHeading is a heading written only if the event at hand writes something after it
	pendingHeading(text string)
	flushPending()
	list(items [][]span)
	para(spans ...span)
	// mark is a piece of evidence: a block quote starting with its title, so that all of them can be found
	mark(title string, spans ...span)
	quote(c clip, e event.Event)                   // a message's text
	details(summary string, c clip, e event.Event) // folded text (reasoning)
	fenced(lang string, c clip, e event.Event)
	// done is called between events, when no heading is pending: what is written so far is final
	done()
	spill() // at the end: all that is written is final
}

// body is what a transcript writer has written: the part still open to a pending heading's insertion in b,
// and what is final either written out to w already or, without w, kept in chunks of their exact size. A
// long log's transcript is megabytes (20 MB of page for 500k events); written out as it is made, or kept
// without a growing buffer's spare capacity and a final copy, it costs its own size at most.
type body struct {
	b      []byte
	w      io.Writer
	chunks [][]byte
	size   int   // the bytes of chunks
	err    error // the first error of w; what follows is dropped
}

// bodySpill is how much a writer holds before it passes what is final on.
const bodySpill = 64 << 10

func (o *body) done() {
	if len(o.b) >= bodySpill {
		o.spill()
	}
}

// spill passes what is in b on.
func (o *body) spill() {
	if len(o.b) == 0 {
		return
	}
	if o.w != nil {
		if o.err == nil {
			_, o.err = o.w.Write(o.b)
		}
	} else {
		o.chunks = append(o.chunks, append([]byte(nil), o.b...))
		o.size += len(o.b)
	}
	o.b = o.b[:0]
}

// writeTo writes what is kept to w, each chunk let go once written.
func (o *body) writeTo(w io.Writer) error {
	o.spill()
	for i, c := range o.chunks {
		o.chunks[i] = nil
		if _, err := w.Write(c); err != nil {
			return err
		}
	}
	return nil
}

// appendTo appends what is kept to out.
func (o *body) appendTo(out []byte) []byte {
	for _, c := range o.chunks {
		out = append(out, c...)
	}
	return append(out, o.b...)
}

// len is the size of what is kept.
func (o *body) len() int { return o.size + len(o.b) }

// markPrefix starts every mark in Markdown, so that `grep -F '[!]'` finds them all.
const markPrefix = "> **[!] "

// pending is the heading-after-a-turn logic both writers share: the heading is put in place at offset at
// once the event being written adds anything.
type pending struct {
	text string
	at   int
}

func (p *pending) set(text string, at int) { p.text, p.at = text, at }

// flush inserts rendered at p.at into *b when *b grew past it.
func (p *pending) flush(b *[]byte, rendered string) {
	if p.text == "" {
		return
	}
	if len(*b) > p.at {
		*b = append((*b)[:p.at], append([]byte(rendered), (*b)[p.at:]...)...)
	}
	p.text = ""
}

// clip is a text as the transcript shows it: at most a budget of its bytes (cut on a character boundary),
// and the size of the whole.
type clip struct {
	shown string
	total int
}

// cut reports whether the text was cut.
func (c clip) cut() bool { return c.total > len(c.shown) }

// clipText is text cut at limit bytes.
func clipText(text string, limit int) clip {
	if len(text) <= limit {
		return clip{shown: text, total: len(text)}
	}
	n := limit
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	return clip{shown: text[:n], total: len(text)}
}

// clipValue is a string value cut at limit bytes: its text, or the head a clipped parse kept of it
// (event.ParseClipped, which must keep more than limit bytes), with the whole text's size.
func clipValue(v event.Value, limit int) clip {
	c := clipText(v.Str, limit)
	c.total = max(c.total, event.StrLen(v))
	return c
}

// cutNote is what follows a cut text: its size and the event to read in full.
func cutNote(c clip, e event.Event) []span {
	file := "events/" + EventName(e.Seq, e.Type)
	return []span{em("… cut: " + strconv.Itoa(c.total) + " bytes in all; the whole event is "), link(file, file)}
}

// mdWriter writes the Markdown transcript.
type mdWriter struct {
	body
	pending pending
}

func (w *mdWriter) line(s string) { w.b = append(append(w.b, s...), '\n') }
func (w *mdWriter) blank()        { w.b = append(w.b, '\n') }

func (w *mdWriter) anchor(int64) {}

func (w *mdWriter) heading(level int, spans ...span) {
	w.line(strings.Repeat("#", level) + " " + mdSpans(spans))
	w.blank()
}

func (w *mdWriter) pendingHeading(text string) { w.pending.set(text, len(w.b)) }
func (w *mdWriter) flushPending()              { w.pending.flush(&w.b, "## "+mdText(w.pending.text)+"\n\n") }

func (w *mdWriter) list(items [][]span) {
	for _, item := range items {
		w.line("- " + mdSpans(item))
	}
	w.blank()
}

func (w *mdWriter) para(spans ...span) {
	w.line(mdSpans(spans))
	w.blank()
}

func (w *mdWriter) mark(title string, spans ...span) {
	w.line(markPrefix + mdText(title) + "** " + mdSpans(spans))
	w.blank()
}

// quote writes text as a block quote, escaped so that nothing in it can open HTML, a link or an image, or
// end the quote (escapeMarkdown), and followed by a cut note when it was cut.
func (w *mdWriter) quote(c clip, e event.Event) {
	text := validText(c.shown)
	if text == "" {
		w.line(">")
	}
	for _, l := range strings.Split(text, "\n") {
		if text != "" {
			w.line(strings.TrimRight("> "+escapeMarkdown(l), " "))
		}
	}
	w.blank()
	if c.cut() {
		w.para(cutNote(c, e)...)
	}
}

func (w *mdWriter) details(summary string, c clip, e event.Event) {
	w.line("<details><summary>" + escapeHTML(summary) + "</summary>")
	w.blank()
	w.quote(c, e)
	w.line("</details>")
	w.blank()
}

// fenced writes text in a code fence longer than any backtick run in it, followed by a cut note when it
// was cut.
func (w *mdWriter) fenced(lang string, c clip, e event.Event) {
	shown := validText(c.shown)
	fence := strings.Repeat("`", max(3, longestRun(shown, '`')+1))
	w.line(fence + lang)
	if shown != "" {
		w.line(strings.TrimSuffix(shown, "\n"))
	}
	w.line(fence)
	w.blank()
	if c.cut() {
		w.para(cutNote(c, e)...)
	}
}

func mdSpans(spans []span) string {
	var b strings.Builder
	for _, s := range spans {
		switch s.style {
		case plain:
			b.WriteString(mdText(s.text))
		case strong:
			b.WriteString("**" + mdText(s.text) + "**")
		case emphasis:
			b.WriteString("*" + mdText(s.text) + "*")
		case codeSpan:
			b.WriteString("`" + inlineCode(s.text) + "`")
		case anchorLink:
			b.WriteString("[" + mdText(s.text) + "](" + s.href + ")")
		}
	}
	return b.String()
}

// mdText is text for a Markdown line: one line, inert (escapeMarkdown).
func mdText(s string) string {
	return escapeMarkdown(strings.ReplaceAll(validText(s), "\n", " "))
}

// escapeMarkdown makes event text inert in Markdown: a viewer renders it as the text it is, fetching
// nothing and linking nowhere. HTML is escaped ('&', '<', '>': no tag, no autolink, no entity), every '['
// and ']' is backslash-escaped (no link, image or link reference definition can start), and a backslash
// before ASCII punctuation is doubled, so that the text's own backslashes cannot undo those escapes. The
// rest of Markdown (emphasis, code spans, lists) only styles the text the reader sees, and is left alone
// so that a message written in Markdown still reads as one.
func escapeMarkdown(s string) string {
	if !strings.ContainsAny(s, mdActive) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '[', ']':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\\':
			if i+1 < len(s) && asciiPunct(s[i+1]) {
				b.WriteByte('\\')
			}
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// mdActive are the bytes escapeMarkdown changes.
const mdActive = "&<>[]\\"

// asciiPunct reports whether c is ASCII punctuation, which a preceding backslash escapes in CommonMark.
func asciiPunct(c byte) bool {
	return c >= '!' && c <= '/' || c >= ':' && c <= '@' || c >= '[' && c <= '`' || c >= '{' && c <= '~'
}

// inlineCode is text for inside a code span: one line, no backticks to end the span early.
func inlineCode(s string) string { return codeReplacer.Replace(validText(s)) }

func escapeHTML(s string) string { return htmlReplacer.Replace(s) }

// built once: a Replacer's tables cost more than most of the strings it replaces in
var (
	codeReplacer = strings.NewReplacer("\n", " ", "`", "'")
	htmlReplacer = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
)

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

// htmlWriter writes the transcript as one self-contained page: inline style, no script, no fetch of
// anything; links are relative to the session's directory, so they work over file:// on a mount.
type htmlWriter struct {
	body
	pending pending
	toc     []tocEntry // the level-2 sections, for the table of contents
	ids     map[string]int
}

type tocEntry struct{ id, text string }

func (w *htmlWriter) put(s ...string) {
	for _, x := range s {
		w.b = append(w.b, x...)
	}
}

func (w *htmlWriter) anchor(seq int64) {
	w.put(`<a id="seq-`, strconv.FormatInt(seq, 10), `"></a>`, "\n")
}

// id makes a heading's id from its text, unique in the page.
func (w *htmlWriter) id(text string) string {
	base := strings.ToLower(strings.Join(strings.FieldsFunc(text, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}), "-"))
	if w.ids == nil {
		w.ids = map[string]int{}
	}
	w.ids[base]++
	if n := w.ids[base]; n > 1 {
		return base + "-" + strconv.Itoa(n)
	}
	return base
}

func (w *htmlWriter) headingHTML(level int, spans []span) string {
	var text strings.Builder
	for _, s := range spans {
		text.WriteString(s.text)
	}
	id := w.id(text.String())
	if level == 2 {
		w.toc = append(w.toc, tocEntry{id: id, text: text.String()})
	}
	l := strconv.Itoa(level)
	return "<h" + l + ` id="` + id + `">` + htmlSpans(spans) + "</h" + l + ">\n"
}

func (w *htmlWriter) heading(level int, spans ...span) { w.put(w.headingHTML(level, spans)) }

func (w *htmlWriter) pendingHeading(text string) { w.pending.set(text, len(w.b)) }

func (w *htmlWriter) flushPending() {
	if w.pending.text == "" || len(w.b) <= w.pending.at {
		w.pending.text = ""
		return
	}
	w.pending.flush(&w.b, w.headingHTML(2, []span{txt(w.pending.text)}))
}

func (w *htmlWriter) list(items [][]span) {
	w.put("<ul>\n")
	for _, item := range items {
		w.put("<li>", htmlSpans(item), "</li>\n")
	}
	w.put("</ul>\n")
}

func (w *htmlWriter) para(spans ...span) { w.put("<p>", htmlSpans(spans), "</p>\n") }

func (w *htmlWriter) mark(title string, spans ...span) {
	w.put(`<p class="mark"><strong>[!] `, htmlText(title), "</strong> ", htmlSpans(spans), "</p>\n")
}

func (w *htmlWriter) quote(c clip, e event.Event) {
	w.put("<blockquote>", htmlText(c.shown), "</blockquote>\n")
	if c.cut() {
		w.para(cutNote(c, e)...)
	}
}

func (w *htmlWriter) details(summary string, c clip, e event.Event) {
	w.put("<details><summary>", htmlText(summary), "</summary><blockquote>", htmlText(c.shown), "</blockquote>")
	if c.cut() {
		w.para(cutNote(c, e)...)
	}
	w.put("</details>\n")
}

func (w *htmlWriter) fenced(lang string, c clip, e event.Event) {
	w.put("<pre><code>", htmlText(validText(c.shown)), "</code></pre>\n")
	if c.cut() {
		w.para(cutNote(c, e)...)
	}
}

func htmlSpans(spans []span) string {
	var b strings.Builder
	for _, s := range spans {
		t := htmlText(s.text)
		switch s.style {
		case plain:
			b.WriteString(t)
		case strong:
			b.WriteString("<strong>" + t + "</strong>")
		case emphasis:
			b.WriteString("<em>" + t + "</em>")
		case codeSpan:
			b.WriteString("<code>" + t + "</code>")
		case anchorLink:
			b.WriteString(`<a href="` + html.EscapeString(s.href) + `">` + t + "</a>")
		}
	}
	return b.String()
}

func htmlText(s string) string { return html.EscapeString(validText(s)) }

// transcriptStyle is the page's whole style: readable without it, plainer with it.
const transcriptStyle = `body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1b1b1b;background:#fff}` +
	`nav{position:fixed;top:0;left:0;bottom:0;width:13em;overflow:auto;padding:1em;background:#f4f4f2;border-right:1px solid #ddd}` +
	`nav a{display:block;color:#333;text-decoration:none}main{margin-left:15em;max-width:60em;padding:1em 2em}` +
	`h2{border-bottom:1px solid #ccc;margin-top:2em}blockquote{margin:.5em 0;padding:.3em .8em;border-left:3px solid #bbb;white-space:pre-wrap}` +
	`pre{background:#f6f6f6;padding:.6em;overflow:auto;white-space:pre-wrap}.mark{background:#fff4d6;border-left:4px solid #d9950b;padding:.4em .8em}` +
	`@media (max-width:50em){nav{position:static;width:auto;border:0}main{margin:0}}`

// writePage writes the page to out: the head, then the body as it is kept, then the tail.
func (w *htmlWriter) writePage(id string, out io.Writer) error {
	if _, err := out.Write(w.pageHead(id)); err != nil {
		return err
	}
	if err := w.writeTo(out); err != nil {
		return err
	}
	_, err := out.Write(w.pageTail())
	return err
}

// pageHead is the page up to its body: the document's head and the table of contents.
func (w *htmlWriter) pageHead(id string) []byte {
	var out []byte
	put := func(s ...string) {
		for _, x := range s {
			out = append(out, x...)
		}
	}
	put("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Session ", htmlText(id), "</title>\n<style>",
		transcriptStyle, "</style>\n</head>\n<body>\n<nav>\n<strong>Turns</strong>\n")
	for _, t := range w.toc {
		put(`<a href="#`, t.id, `">`, htmlText(t.text), "</a>\n")
	}
	put("</nav>\n<main>\n")
	return out
}

func (w *htmlWriter) pageTail() []byte { return []byte("</main>\n</body>\n</html>\n") }
