package views

import (
	"strconv"
	"strings"
)

// Kind names a view as `dshfs cat --view` spells it.
type Kind string

// The view kinds: whole-session views, then the per-item ones that take a number (`event:SEQ`, `turn:N`,
// `trace:SEQ`).
const (
	KindEvents      Kind = "events"
	KindRaw         Kind = "raw"
	KindHeader      Kind = "header"
	KindStatus      Kind = "status"
	KindSurface     Kind = "surface"
	KindMessages    Kind = "messages"
	KindShadowed    Kind = "shadowed"
	KindCompactions Kind = "compactions"
	KindPrunes      Kind = "prunes"
	KindSpill       Kind = "spill"
	KindTranscript  Kind = "transcript"
	// KindTranscriptHTML is the transcript as one HTML page
	KindTranscriptHTML Kind = "transcript-html"
	KindUsage          Kind = "usage"
	KindUsageSVG       Kind = "usage-svg"
	KindEvent          Kind = "event"
	KindTurn           Kind = "turn"
	KindTrace          Kind = "trace"
)

// View is one renderable view of a session: a kind and, for the per-item kinds, its number. It is a
// comparable value (a cache key as it is); only the CLI spells it as text.
type View struct {
	Kind Kind
	N    int64 // the seq or turn number of event, turn and trace views
}

// The whole-session views.
var (
	Events         = View{Kind: KindEvents}
	Raw            = View{Kind: KindRaw}
	Header         = View{Kind: KindHeader}
	Status         = View{Kind: KindStatus}
	Surface        = View{Kind: KindSurface}
	Messages       = View{Kind: KindMessages}
	Shadowed       = View{Kind: KindShadowed}
	Compactions    = View{Kind: KindCompactions}
	Prunes         = View{Kind: KindPrunes}
	Spill          = View{Kind: KindSpill}
	Transcript     = View{Kind: KindTranscript}
	TranscriptHTML = View{Kind: KindTranscriptHTML}
	Usage          = View{Kind: KindUsage}
	UsageSVG       = View{Kind: KindUsageSVG}
)

// Event is the view of one event line (events/<seq>.<type>.json).
func Event(seq int64) View { return View{Kind: KindEvent, N: seq} }

// Turn is the view of one turn (turns/<n>.jsonl).
func Turn(n int64) View { return View{Kind: KindTurn, N: n} }

// Trace is the trace of one event (trace/<seq>.json).
func Trace(seq int64) View { return View{Kind: KindTrace, N: seq} }

// Volatile reports whether a view depends on more than the session's revision: the spill index and the
// transcript (which shows each spill locator's status) re-resolve locators whose targets live outside the
// store, so a rendering of one is good only while they resolve as they did (Session.VolatileState).
func (v View) Volatile() bool {
	return v.Kind == KindSpill || v.Kind == KindTranscript || v.Kind == KindTranscriptHTML
}

// numbered reports whether views of kind k carry a number.
func (k Kind) numbered() bool { return k == KindEvent || k == KindTurn || k == KindTrace }

// String is the view as `dshfs cat --view` spells it.
func (v View) String() string {
	if v.Kind.numbered() {
		return string(v.Kind) + ":" + strconv.FormatInt(v.N, 10)
	}
	return string(v.Kind)
}

// ParseView reads a `--view` argument; ok is false for anything that names no view.
func ParseView(s string) (View, bool) {
	switch k := Kind(s); k {
	case KindEvents, KindRaw, KindHeader, KindStatus, KindSurface, KindMessages, KindShadowed,
		KindCompactions, KindPrunes, KindSpill, KindTranscript, KindTranscriptHTML, KindUsage, KindUsageSVG:
		return View{Kind: k}, true
	}
	name, arg, ok := strings.Cut(s, ":")
	if !ok || !Kind(name).numbered() {
		return View{}, false
	}
	n, err := strconv.ParseInt(arg, 10, 64)
	if err != nil {
		return View{}, false
	}
	return View{Kind: Kind(name), N: n}, true
}
