package views

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dshfs/dshfs/compaction"
	"github.com/dshfs/dshfs/eventstore/event"
)

// The usage views (`--view usage`, `--view usage-svg`) account a session's tokens per step, by the harness's
// rule (docs/harness.md#turns-steps-and-token-usage): a step's usage chunks are primary — every attempt's, a
// failed one keeps only its chunk — and the committed assistant/message's usage is the fallback for a step
// that streamed none. A step's inputTokens is the size of the model context it sent, which the picture plots
// over the log with the events that change it marked: compactions, prunes, crash repairs, fork and resume
// boundaries.

// tokenKinds are the TokenUsage members, in the order usage.jsonl writes them.
var tokenKinds = []string{"inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens", "reasoningTokens"}

// StepUsage is one step's token account.
type StepUsage struct {
	Turn, Step    event.Value
	Seq, EndSeq   int64 // the step/start, and the step/end (-1 while open)
	Tokens        [5]float64
	From          string // "chunks", "message" or "none"
	ContextWindow event.Value
	chunks        bool // the step streamed usage chunks: a message's usage no longer counts
}

// UsageMarker is an event that changes the model context, for the picture.
type UsageMarker struct {
	Seq   int64
	Label string
}

// Usage is the session's token account per step and its markers.
func (s *Session) Usage() ([]StepUsage, []UsageMarker, error) {
	if s.Refusal != nil {
		return nil, nil, s.Refusal
	}
	recs, prunes, err := s.Compactions()
	if err != nil {
		return nil, nil, err
	}
	var steps []StepUsage
	var window event.Value
	open := -1 // index in steps of the open step
	seedLength := s.forkSeed()
	var markers []UsageMarker
	for _, r := range recs {
		if r.State == compaction.Complete {
			markers = append(markers, UsageMarker{Seq: r.ReplacementSeq, Label: "compaction"})
		}
	}
	for _, p := range prunes {
		markers = append(markers, UsageMarker{Seq: p.Seq, Label: "prune"})
	}
	for _, e := range s.Events() {
		switch e.Type {
		case "request/context", "step/start", "step/end", "assistant/message", "turn/end", "session/end-seed":
		case "assistant/chunk":
			// most of a long log: only a usage chunk is parsed
			if typ, ok := event.Lookup(e.Raw, "data", "chunk", "type"); !ok || string(typ) != `"usage"` {
				continue
			}
		default:
			continue
		}
		var rec event.Value
		var err error
		if e.Type == "assistant/message" {
			// only its usage is read: the message, which may hold megabytes of text, is skipped
			rec, err = e.Shallow(0, "message")
		} else {
			rec, err = e.Record()
		}
		if err != nil {
			continue
		}
		data, _ := rec.Get("data")
		switch e.Type {
		case "request/context":
			// the window of the model a step's request goes to: it comes after the step's start
			window, _ = data.Get("contextWindow")
			if open >= 0 {
				steps[open].ContextWindow = window
			}
		case "step/start":
			turn, _ := data.Get("turn")
			step, _ := data.Get("step")
			steps = append(steps, StepUsage{Turn: turn, Step: step, Seq: e.Seq, EndSeq: -1, From: "none", ContextWindow: window})
			open = len(steps) - 1
		case "step/end":
			if open >= 0 {
				steps[open].EndSeq = e.Seq
				open = -1
			}
		case "assistant/chunk":
			chunk, _ := data.Get("chunk")
			if typ, _ := chunk.Get("type"); open < 0 || typ.Str != "usage" {
				continue
			}
			u, _ := chunk.Get("usage")
			st := &steps[open]
			if !st.chunks {
				st.Tokens, st.chunks = [5]float64{}, true // chunks replace a message's account
			}
			addTokens(&st.Tokens, u)
			st.From = "chunks"
		case "assistant/message":
			u, ok := data.Get("usage")
			if open < 0 || !ok || steps[open].chunks {
				continue
			}
			addTokens(&steps[open].Tokens, u)
			steps[open].From = "message"
		case "turn/end":
			reason, _ := data.Get("reason")
			if kind, _ := reason.Get("kind"); kind.Str == "interrupted" {
				markers = append(markers, UsageMarker{Seq: e.Seq, Label: "repair"})
			}
		case "session/end-seed":
			label := "resume"
			if seedLength >= 0 && e.Seq == seedLength {
				label = "fork"
			}
			markers = append(markers, UsageMarker{Seq: e.Seq, Label: label})
		}
	}
	sortMarkers(markers)
	return steps, markers, nil
}

func addTokens(dst *[5]float64, u event.Value) {
	for i, k := range tokenKinds {
		if v, ok := u.Get(k); ok && v.Kind == event.KindNumber {
			dst[i] += v.Num
		}
	}
}

func sortMarkers(m []UsageMarker) {
	for i := 1; i < len(m); i++ {
		for j := i; j > 0 && m[j].Seq < m[j-1].Seq; j-- {
			m[j], m[j-1] = m[j-1], m[j]
		}
	}
}

// UsageJSONL renders usage.jsonl: one line per step.
func (s *Session) UsageJSONL() ([]byte, error) {
	steps, _, err := s.Usage()
	if err != nil {
		return nil, err
	}
	var out []byte
	for _, st := range steps {
		end := event.Value{}
		if st.EndSeq >= 0 {
			end = event.Int(st.EndSeq)
		}
		ms := []event.Member{{Key: "turn", Value: st.Turn}, {Key: "step", Value: st.Step},
			{Key: "seq", Value: event.Int(st.Seq)}, {Key: "endSeq", Value: end}}
		for i, k := range tokenKinds {
			ms = append(ms, event.Member{Key: k, Value: event.Number(st.Tokens[i])})
		}
		ms = append(ms, event.Member{Key: "from", Value: event.String(st.From)}, event.Member{Key: "contextWindow", Value: st.ContextWindow})
		out = append(append(out, event.Stringify(event.Object(ms...))...), '\n')
	}
	return out, nil
}

// UsageSVG renders usage.svg: the context each step sent over the log's seqs, with the events that change
// it marked and labelled, and the input and output tokens of each turn as bars. Plain SVG: no script, no
// style sheet, text labels a terminal viewer draws too.
func (s *Session) UsageSVG() ([]byte, error) {
	steps, markers, err := s.Usage()
	if err != nil {
		return nil, err
	}
	const (
		width, left, right = 960.0, 70.0, 20.0
		topY, topH         = 40.0, 220.0 // the context panel
		barY, barH         = 330.0, 160.0
		height             = 540.0
	)
	plotW := width - left - right
	lastSeq := int64(s.EventCount() - 1)
	if lastSeq < 1 {
		lastSeq = 1
	}
	maxCtx := 1.0
	for _, st := range steps {
		maxCtx = max(maxCtx, st.Tokens[0])
	}
	x := func(seq int64) float64 { return left + plotW*float64(seq)/float64(lastSeq) }
	y := func(v float64) float64 { return topY + topH - topH*v/maxCtx }

	var b strings.Builder
	f := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	f(`<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	f(`<title>Token usage of session %s</title>`+"\n", htmlText(s.ID))
	f(`<rect width="%g" height="%g" fill="#ffffff"/>`+"\n", width, height)
	f(`<text x="%g" y="20" font-size="14" font-weight="bold">Context sent per step (input tokens) over seq</text>`+"\n", left)
	f(`<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#888"/>`+"\n", left, topY+topH, width-right, topY+topH)
	f(`<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#888"/>`+"\n", left, topY, left, topY+topH)
	f(`<text x="%g" y="%g" text-anchor="end">%s</text>`+"\n", left-6, topY+4, tokensText(maxCtx))
	f(`<text x="%g" y="%g" text-anchor="end">0</text>`+"\n", left-6, topY+topH+4)
	f(`<text x="%g" y="%g">seq 0</text>`+"\n", left, topY+topH+16)
	f(`<text x="%g" y="%g" text-anchor="end">seq %d</text>`+"\n", width-right, topY+topH+16, lastSeq)
	colors := map[string]string{"compaction": "#c0392b", "prune": "#8e44ad", "repair": "#d35400", "fork": "#2c7a3f", "resume": "#1f6fb2"}
	for i, m := range markers {
		mx := x(m.Seq)
		f(`<g class="marker"><title>%s at seq %d</title><line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="%s" stroke-dasharray="4 3"/>`,
			m.Label, m.Seq, mx, topY, mx, topY+topH, colors[m.Label])
		tx, anchor := mx+3, "start"
		if mx > width-right-120 {
			tx, anchor = mx-3, "end" // a label near the right edge reads leftwards, inside the picture
		}
		f(`<text x="%.1f" y="%g" fill="%s" text-anchor="%s">%s %d</text></g>`+"\n", tx, topY+12+float64(i%4)*13, colors[m.Label], anchor, m.Label, m.Seq)
	}
	var pts []string
	for _, st := range steps {
		if st.From == "none" {
			continue
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(st.Seq), y(st.Tokens[0])))
	}
	if len(pts) > 0 {
		f(`<polyline class="context" fill="none" stroke="#1f6fb2" stroke-width="2" points="%s"/>`+"\n", strings.Join(pts, " "))
		for _, st := range steps {
			if st.From != "none" {
				f(`<circle cx="%.1f" cy="%.1f" r="3" fill="#1f6fb2"><title>turn %s step %s (seq %d): %s input tokens</title></circle>`+"\n",
					x(st.Seq), y(st.Tokens[0]), numText(st.Turn), numText(st.Step), st.Seq, tokensText(st.Tokens[0]))
			}
		}
	} else {
		f(`<text x="%g" y="%g">no step recorded any usage</text>`+"\n", left+10, topY+topH/2)
	}

	// tokens per turn
	type turnSum struct {
		label         string
		input, output float64
	}
	var turns []turnSum
	for _, st := range steps {
		label := "turn " + numText(st.Turn)
		if len(turns) == 0 || turns[len(turns)-1].label != label {
			turns = append(turns, turnSum{label: label})
		}
		turns[len(turns)-1].input += st.Tokens[0]
		turns[len(turns)-1].output += st.Tokens[1]
	}
	f(`<text x="%g" y="%g" font-size="14" font-weight="bold">Tokens per turn: input (blue), output (orange)</text>`+"\n", left, barY-16)
	f(`<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#888"/>`+"\n", left, barY+barH, width-right, barY+barH)
	maxTurn := 1.0
	for _, t := range turns {
		maxTurn = max(maxTurn, t.input, t.output)
	}
	f(`<text x="%g" y="%g" text-anchor="end">%s</text>`+"\n", left-6, barY+4, tokensText(maxTurn))
	if n := len(turns); n > 0 {
		slot := plotW / float64(n)
		bw := min(slot*0.4, 30)
		for i, t := range turns {
			bx := left + slot*float64(i) + slot/2
			hi, ho := barH*t.input/maxTurn, barH*t.output/maxTurn
			f(`<g class="turn"><title>%s: %s input, %s output tokens</title>`, t.label, tokensText(t.input), tokensText(t.output))
			f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#1f6fb2"/>`, bx-bw, barY+barH-hi, bw, hi)
			f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#e67e22"/>`, bx, barY+barH-ho, bw, ho)
			if n <= 40 || i%(n/40+1) == 0 {
				f(`<text x="%.1f" y="%g" text-anchor="middle">%s</text>`, bx, barY+barH+14, t.label)
			}
			f("</g>\n")
		}
	}
	f("</svg>\n")
	return []byte(b.String()), nil
}

func tokensText(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
