package views

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/status"
)

// The store index (MNT/index.html, `dshfs index STORE`) is where a person starts: every session with its
// state, last activity, size, tokens and evidence counts, newest first, each linking to its transcript
// page. A store of 10,000 sessions is cut into pages of IndexPageSize, so that a page costs the sessions
// on it, not the store: the pages are cut from the listing in the order of the artifacts' last change
// (IndexOrder, known without a decode), and each page lists its rows by the last activity it shows (the
// newest event's time), so that what a reader sees is in the order the page says. The two orders agree
// wherever the harness wrote the log as it ran; they differ for a store whose files were copied or
// generated at another time than their events, and then only across pages.

// IndexPageSize is how many sessions one page of the index lists.
const IndexPageSize = 1000

// IndexRow is one session's row of the index.
type IndexRow struct {
	ID, Dir     string // the session id, and its directory's name under sessions/
	State       string // ok, live, needs repair, refused
	Refusal     string
	Activity    time.Time
	Turns       int
	Events      int
	Input       float64
	Output      float64
	Unknown     int // tool calls with an unknown outcome
	Compactions int
	Parent      string
}

// refusalCut is how many bytes of a refused session's reason the index shows.
const refusalCut = 1000

// IndexRowOf summarizes a session for the index.
func IndexRowOf(s *Session, dir string) IndexRow {
	r := IndexRow{ID: s.ID, Dir: dir, State: "ok", Activity: s.ModTime()}
	if h := s.Header; h != nil && h.ParentSession != nil {
		r.Parent = h.ParentSession.Str
	}
	if s.Refusal != nil {
		// a refusal quotes what it refused (a path, a line), which a hostile store makes as long as it
		// likes: the index shows its start, as the transcript cuts long text; status.json has it whole
		why := clipText(s.Refusal.Error(), refusalCut)
		r.State, r.Refusal = "refused", why.shown
		if why.cut() {
			r.Refusal += " … (cut: " + strconv.Itoa(why.total) + " bytes in all; sessions/" + dir + "/status.json has it whole)"
		}
		return r
	}
	switch {
	case s.Live:
		r.State = "live"
	case len(s.Closers) > 0 || s.Torn != nil:
		r.State = "needs repair"
	}
	r.Events = s.EventCount()
	for _, e := range s.current().events { // types only: a packed row's members need not expand
		if e.Type == "turn/start" {
			r.Turns++
		}
	}
	r.Unknown = len(status.UnknownOutcomes(s.Events()))
	if recs, _, err := s.Compactions(); err == nil {
		r.Compactions = len(recs)
	}
	if steps, _, err := s.Usage(); err == nil {
		for _, st := range steps {
			r.Input += st.Tokens[0]
			r.Output += st.Tokens[1]
		}
	}
	return r
}

// IndexOrder is the order of the index: newest artifact change first, then by id.
func IndexOrder(entries []eventstore.Entry) []int {
	order := make([]int, len(entries))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ea, eb := entries[order[a]], entries[order[b]]
		if !ea.ModTime.Equal(eb.ModTime) {
			return ea.ModTime.After(eb.ModTime)
		}
		return ea.ID < eb.ID
	})
	return order
}

// IndexPages is how many pages an index of n sessions has (one, empty, for none).
func IndexPages(n int) int { return max(1, (n+IndexPageSize-1)/IndexPageSize) }

// IndexPageName is the file name of page p (from 1): index.html, then index-2.html, …
func IndexPageName(p int) string {
	if p <= 1 {
		return "index.html"
	}
	return "index-" + strconv.Itoa(p) + ".html"
}

// StoreIndex renders page p (from 1) of the index of a store whose listing is entries: dir names each
// entry's directory under sessions/, and session gives its snapshot (a refused one's is a refused row).
// ok is false for a page past the last. The mount and `dshfs index` both render through it.
func StoreIndex(ctx context.Context, entries []eventstore.Entry, p int, dir func(i int) string,
	session func(e eventstore.Entry) *Session) (page []byte, ok bool) {
	return StoreIndexRows(ctx, entries, p, func(i int) IndexRow { return IndexRowOf(session(entries[i]), dir(i)) })
}

// StoreIndexRows is StoreIndex with each entry's row from row(i), which a caller may keep between pages
// and reads (the mount keeps a stored session's row until its revision changes).
func StoreIndexRows(ctx context.Context, entries []eventstore.Entry, p int, row func(i int) IndexRow) (page []byte, ok bool) {
	pages := IndexPages(len(entries))
	if p < 1 || p > pages {
		return nil, false
	}
	order := IndexOrder(entries)
	lo, hi := (p-1)*IndexPageSize, min(p*IndexPageSize, len(order))
	rows := make([]IndexRow, 0, hi-lo)
	for _, i := range order[lo:hi] {
		rows = append(rows, row(i))
	}
	SortIndexRows(rows)
	return IndexPage(ctx, rows, p, pages, len(entries)), true
}

// SortIndexRows orders a page's rows as the page shows them: the latest activity first, then by id.
func SortIndexRows(rows []IndexRow) {
	sort.SliceStable(rows, func(a, b int) bool {
		if !rows[a].Activity.Equal(rows[b].Activity) {
			return rows[a].Activity.After(rows[b].Activity)
		}
		return rows[a].ID < rows[b].ID
	})
}

// IndexPage renders page p of pages of the index: its rows, in order. Like the transcript page it is
// self-contained (inline style, no script, nothing fetched) and its links are relative to the mount's
// root.
func IndexPage(ctx context.Context, rows []IndexRow, p, pages, total int) []byte {
	var b []byte
	put := func(s ...string) {
		for _, x := range s {
			b = append(b, x...)
		}
	}
	put("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>dshfs sessions</title>\n<style>", indexStyle,
		"</style>\n</head>\n<body>\n<h1>Sessions</h1>\n<p>", strconv.Itoa(total), " sessions, newest first; page ", strconv.Itoa(p), " of ",
		strconv.Itoa(pages), ".</p>\n")
	if pages > 1 {
		put("<p class=\"pages\">")
		for i := 1; i <= pages; i++ {
			if i == p {
				put("<strong>", strconv.Itoa(i), "</strong> ")
			} else {
				put(`<a href="`, IndexPageName(i), `">`, strconv.Itoa(i), "</a> ")
			}
		}
		put("</p>\n")
	}
	put("<table>\n<thead><tr><th>session</th><th>state</th><th>last activity (UTC)</th><th>turns</th><th>events</th>",
		"<th>input tokens</th><th>output tokens</th><th>unknown outcomes</th><th>compactions</th><th>parent</th></tr></thead>\n<tbody>\n")
	for _, r := range rows {
		if ctx.Err() != nil {
			break
		}
		class := strings.ReplaceAll(r.State, " ", "-")
		put(`<tr class="`, class, `"><td>`)
		if r.State == "refused" {
			put(`<a href="sessions/`, htmlText(r.Dir), `/status.json">`, htmlText(r.ID), "</a>")
		} else {
			put(`<a href="sessions/`, htmlText(r.Dir), `/transcript.html">`, htmlText(r.ID), "</a>")
		}
		put("</td><td>", htmlText(r.State))
		if r.Refusal != "" {
			put(`<div class="why">`, htmlText(r.Refusal), "</div>")
		}
		put("</td><td>")
		if !r.Activity.IsZero() {
			put(r.Activity.UTC().Format("2006-01-02 15:04:05"))
		}
		put("</td><td>", strconv.Itoa(r.Turns), "</td><td>", strconv.Itoa(r.Events), "</td><td>", tokensText(r.Input), "</td><td>",
			tokensText(r.Output), "</td><td>")
		if r.Unknown > 0 {
			put(`<strong class="unknown">`, strconv.Itoa(r.Unknown), "</strong>")
		} else {
			put("0")
		}
		put("</td><td>", strconv.Itoa(r.Compactions), "</td><td>", htmlText(r.Parent), "</td></tr>\n")
	}
	put("</tbody>\n</table>\n</body>\n</html>\n")
	return b
}

const indexStyle = `body{font:14px/1.4 system-ui,sans-serif;margin:1em 2em;color:#1b1b1b}table{border-collapse:collapse}` +
	`th,td{border-bottom:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top}th{background:#f4f4f2}` +
	`tr.refused td{color:#8a1c1c}tr.needs-repair{background:#fff4d6}tr.live{background:#e8f4ff}.unknown{color:#b03a00}` +
	`.why{font-size:12px;color:#666;max-width:40em}`
