package views_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/views"
)

// hugeUnit is the repeated line of hugeSession's texts, as the log escapes it.
const hugeUnit = `a pasted line, \"quoted\" é\n`

// hugeSession is a session whose every kind of long text — a user's message, the assistant's reasoning
// and text, a tool call's arguments and its result — is about size bytes, escapes and two-byte
// characters throughout (so that nothing of it can be taken from the log's bytes as they are).
func hugeSession(t *testing.T, size int) *views.Session {
	t.Helper()
	big := strings.Repeat(hugeUnit, size/len(hugeUnit))
	st := store(t,
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
		`{"type":"user/message","seq":1,"time":2,"data":{"id":"u","role":"user","content":[{"type":"text","text":"`+big+`"}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"step/start","seq":2,"time":3,"data":{"turn":1,"step":1}}`,
		`{"type":"assistant/message","seq":3,"time":4,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"reasoning","text":"`+big+`"},{"type":"text","text":"`+big+`"}],"source":{"kind":"model","provider":"p","model":"m"}},"usage":{"inputTokens":7,"outputTokens":3}},"surfaceOp":"append"}`,
		`{"type":"tool/call","seq":4,"time":5,"data":{"turn":1,"step":1,"callId":"c1","name":"write","arguments":`+string(event.Stringify(event.String(`{"text":"`+big+`"}`)))+`}}`,
		`{"type":"tool/result","seq":5,"time":6,"data":{"turn":1,"step":1,"message":{"id":"r","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"`+big+`"}],"isError":false}],"source":{"kind":"tool","callId":"c1"}}},"surfaceOp":"append"}`,
		`{"type":"step/end","seq":6,"time":7,"data":{"turn":1,"step":1}}`,
		`{"type":"turn/end","seq":7,"time":8,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
	)
	s, err := views.Load(context.Background(), st, "s", views.Options{})
	if err != nil || s.Refusal != nil {
		t.Fatal(err, s.Refusal)
	}
	return s
}

// TestHumanViewsAllocateWhatTheyShow: rendering a human view of a session holding five texts of 10 MB
// each (50 MB of text) allocates in proportion to the page (a few hundred KB), not to the log: no text is
// decoded whole to be cut. A memory bound, measured with the runtime's own count of bytes allocated; each
// view is rendered from a fresh snapshot, so that what the first rendering computes of the session (its
// classes, compactions, unknown outcomes) is counted too. The cut notes still give each text's whole size.
func TestHumanViewsAllocateWhatTheyShow(t *testing.T) {
	const size = 10 << 20
	render := map[string]func(*views.Session) ([]byte, error){
		"transcript":      func(s *views.Session) ([]byte, error) { return s.Render(context.Background(), views.Transcript) },
		"transcript-html": func(s *views.Session) ([]byte, error) { return s.Render(context.Background(), views.TranscriptHTML) },
		"usage":           func(s *views.Session) ([]byte, error) { return s.Render(context.Background(), views.Usage) },
		"usage-svg":       func(s *views.Session) ([]byte, error) { return s.Render(context.Background(), views.UsageSVG) },
		"index row": func(s *views.Session) ([]byte, error) {
			r := views.IndexRowOf(s, "s")
			return []byte(fmt.Sprint(r)), nil
		},
	}
	unit, err := event.Parse([]byte(`"` + hugeUnit + `"`))
	if err != nil {
		t.Fatal(err)
	}
	text := len(unit.Str) * (size / len(hugeUnit))
	args := len(`{"text":""}`) + size/len(hugeUnit)*len(hugeUnit)
	for _, name := range []string{"transcript", "transcript-html", "usage", "usage-svg", "index row"} {
		s := hugeSession(t, size)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		out, err := render[name](s)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(name, err)
		}
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: %d bytes rendered, %d bytes allocated", name, len(out), alloc)
		if alloc > size {
			t.Errorf("rendering %s allocated %d bytes for %d bytes of output: the texts were decoded whole", name, alloc, len(out))
		}
		if strings.HasPrefix(name, "transcript") {
			for _, n := range []int{text, text, text, args, text} {
				note := "… cut: " + strconv.Itoa(n) + " bytes in all"
				if strings.Count(string(out), note) < 1 {
					t.Errorf("%s: no %q", name, note)
				}
			}
			if got := strings.Count(string(out), "… cut: "); got != 5 {
				t.Errorf("%s: %d cut notes, want 5", name, got)
			}
		}
	}
}

// longSession is a session of turns turns, each a user's message, one step with the assistant's text and
// a tool call and its result: a long log of ordinary events, whose transcript is megabytes.
func longSession(t *testing.T, turns int) *views.Session {
	t.Helper()
	var lines []string
	seq := 0
	add := func(format string, args ...any) {
		lines = append(lines, fmt.Sprintf(format, append([]any{seq, seq + 1}, args...)...))
		seq++
	}
	for n := 1; n <= turns; n++ {
		add(`{"type":"turn/start","seq":%d,"time":%d,"data":{"turn":%d}}`, n)
		add(`{"type":"user/message","seq":%d,"time":%d,"data":{"id":"u%d","role":"user","content":[{"type":"text","text":"question %d, asked at some length so that the page has text to show"}],"source":{"kind":"user"}},"surfaceOp":"append"}`, n, n)
		add(`{"type":"step/start","seq":%d,"time":%d,"data":{"turn":%d,"step":1}}`, n)
		add(`{"type":"assistant/message","seq":%d,"time":%d,"data":{"turn":%d,"step":1,"message":{"id":"a%d","role":"assistant","content":[{"type":"text","text":"answer %d <with> \"markup\" & escapes"}],"source":{"kind":"model","provider":"p","model":"m"}},"usage":{"inputTokens":%d,"outputTokens":3}},"surfaceOp":"append"}`, n, n, n, 100+n)
		add(`{"type":"tool/call","seq":%d,"time":%d,"data":{"turn":%d,"step":1,"callId":"c%d","name":"read","arguments":"{\"path\":\"f%d.go\"}"}}`, n, n, n)
		add(`{"type":"tool/result","seq":%d,"time":%d,"data":{"turn":%d,"step":1,"message":{"id":"r%d","role":"user","content":[{"type":"tool-result","toolCallId":"c%d","content":[{"type":"text","text":"package f%d"}],"isError":false}],"source":{"kind":"tool","callId":"c%d"}}},"surfaceOp":"append"}`, n, n, n, n, n)
		add(`{"type":"step/end","seq":%d,"time":%d,"data":{"turn":%d,"step":1}}`, n)
		add(`{"type":"turn/end","seq":%d,"time":%d,"data":{"turn":%d,"reason":{"kind":"completed"}}}`, n)
	}
	s, err := views.Load(context.Background(), store(t, lines...), "s", views.Options{})
	if err != nil || s.Refusal != nil {
		t.Fatal(err, s.Refusal)
	}
	return s
}

// pieces records the sizes of the writes it is given.
type pieces struct {
	n, largest int
	b          strings.Builder
}

func (p *pieces) Write(b []byte) (int, error) {
	p.n++
	p.largest = max(p.largest, len(b))
	return p.b.Write(b)
}

// TestLongTranscriptHoldsLittleOfItself: the transcript of a long log costs memory in proportion to one
// event's part of it, not to the whole. `dshfs cat` gets the Markdown in pieces as it is rendered (the
// largest a small part of the whole) and the page with its body in pieces, each the same bytes a
// rendering gives; a rendering for the view caches is exactly its own size, with no spare capacity
// held for as long as a cache keeps it.
func TestLongTranscriptHoldsLittleOfItself(t *testing.T) {
	s := longSession(t, 4000)
	for _, view := range []views.View{views.Transcript, views.TranscriptHTML} {
		whole, err := s.Render(context.Background(), view)
		if err != nil {
			t.Fatal(view, err)
		}
		if len(whole) < 1<<20 {
			t.Fatalf("%s: %d bytes; the log is meant to give megabytes", view, len(whole))
		}
		if cap(whole) != len(whole) {
			t.Errorf("%s: rendered %d bytes into %d of memory", view, len(whole), cap(whole))
		}
		var p pieces
		if err := s.WriteView(context.Background(), &p, view); err != nil {
			t.Fatal(view, err)
		}
		if p.b.String() != string(whole) {
			t.Fatalf("%s: written (%d bytes) differs from rendered (%d bytes)", view, p.b.Len(), len(whole))
		}
		t.Logf("%s: %d bytes in %d writes, the largest %d", view, len(whole), p.n, p.largest)
		if p.largest > 256<<10 {
			t.Errorf("%s: a write of %d bytes of %d: the transcript was held whole", view, p.largest, len(whole))
		}
	}
}
