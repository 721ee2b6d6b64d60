package surface

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/dshfs/dshfs/eventstore/event"
)

// Replacement is one committed replace: the replacing event's seq, the range it named, and the nodes
// it removed (surface order). Start and End are the declared seqs, which need not be ordered
// numerically: the range is positional.
type Replacement struct {
	Seq, Start, End int64
	ShadowedSeqs    []int64
}

// Result is foldSurface's answer plus the replace generation (the harness's replaceGeneration, which
// its derived caches key on; always len(Replacements)).
type Result struct {
	Nodes        []int64
	Replacements []Replacement
	Generation   int
}

// linearScanMax is the surface length up to which positions are found by scanning: a map costs more
// than it saves on the short surfaces compaction leaves behind.
const linearScanMax = 32

// foldState is the transition state foldSurface and SurfaceManager share.
type foldState struct {
	next  int64   // seq the next event must carry
	nodes []int64 // current surface, model-visible order
	pos   map[int64]int
	posOK bool // pos maps every node to its index
	reps  []Replacement
	// shared: a Result (Folder.Result) holds nodes[:len(nodes)], so a replace, which writes inside it,
	// works on a copy; an append writes past every Result's end and needs none
	shared bool

	srcBuf, sortBuf []int64 // scratch for sourceEventSeqs checks

	// lifted: tool results are tool-role messages whose content is the result itself (format v4), so a
	// tool/result replacement may change that whole content, not one wrapped block's
	lifted bool
}

// planKind says what an accepted event does to the surface.
type planKind uint8

const (
	planNone planKind = iota
	planAppend
	planReplace
)

// plan is a validated transition that has not touched the state yet, so that a failing event leaves
// an incremental fold exactly as it was.
type plan struct {
	kind             planKind
	seq              int64
	start, end       int64
	startIdx, endIdx int
}

// originFunc returns the logged event at a current surface seq; the tool/result rewrite rule compares
// against it.
type originFunc func(seq int64) (event.Event, bool)

// errText builds the plain errors whose text is the contract.
func errText(parts ...string) error { return errors.New(strings.Join(parts, "")) }

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

// plan validates e as the next event, in the harness's check order.
func (s *foldState) plan(e event.Event, origin originFunc) (plan, error) {
	if e.Seq != s.next {
		return plan{}, errText("session event seq ", e.SeqText(), " is not contiguous; expected ", itoa(s.next))
	}
	if !event.IsSurfaceType(e.Type) {
		return plan{}, checkLogOnly(e)
	}
	typ := e.Type
	opRaw, srcRaw, hasSrc, hasOp := tailMarkers(e.Raw)
	if !hasOp {
		event.EachMember(e.Raw, func(name, value []byte) bool {
			switch string(name) {
			case "surfaceOp":
				opRaw, hasOp = value, true
			case "sourceEventSeqs":
				srcRaw, hasSrc = value, true
			}
			return true
		})
	}
	if !hasOp {
		return plan{}, errText(`session event "`, typ, `" is surface-eligible and requires a surfaceOp marker`)
	}
	if string(opRaw) == `"append"` {
		if err := s.checkSources(e, srcRaw, hasSrc, nil); err != nil {
			return plan{}, err
		}
		return plan{kind: planAppend, seq: e.Seq}, nil
	}
	start, end, err := replaceOp(typ, opRaw)
	if err != nil {
		return plan{}, err
	}
	si, ok := s.indexOf(start)
	if !ok {
		return plan{}, errText("surface replace: start seq ", itoa(start), " not found in surface")
	}
	ei, ok := s.indexOf(end)
	if !ok {
		return plan{}, errText("surface replace: end seq ", itoa(end), " not found in surface")
	}
	if si > ei {
		return plan{}, errText("surface replace: start seq ", itoa(start), " (index ", strconv.Itoa(si),
			") is after end seq ", itoa(end), " (index ", strconv.Itoa(ei), ")")
	}
	shadowed := s.nodes[si : ei+1]
	if err := s.checkSources(e, srcRaw, hasSrc, shadowed); err != nil {
		return plan{}, err
	}
	if typ == "tool/result" {
		if err := checkToolRewrite(e, shadowed, origin, s.lifted); err != nil {
			return plan{}, err
		}
	}
	return plan{kind: planReplace, seq: e.Seq, start: start, end: end, startIdx: si, endIdx: ei}, nil
}

// Appends reports what an event the fold accepted does to the surface: appends is true when it joins
// the surface at its end (surfaceOp "append"), replaces when it rewrites part of it (any other surfaceOp:
// a compaction's checkpoint, a prune); neither for a log-only event. It reads the same markers the fold
// reads, so a view that grows with the surface can follow an accepted event without folding again.
func Appends(e event.Event) (appends, replaces bool) {
	if !event.IsSurfaceType(e.Type) {
		return false, false
	}
	op, _, _, found := tailMarkers(e.Raw)
	if !found {
		event.EachMember(e.Raw, func(name, value []byte) bool {
			if string(name) == "surfaceOp" {
				op, found = value, true
			}
			return true
		})
	}
	if !found {
		return false, false // the fold refuses it: nothing a view follows
	}
	if string(op) == `"append"` {
		return true, false
	}
	return false, true
}

// tailMarkers reads an event's surface markers where the harness writes them, without walking its
// members: last, `,"surfaceOp":"append"}`, after `,"sourceEventSeqs":[…]` when there are sources.
// found is false when raw does not end that way, and the caller walks the members.
//
// raw is a valid JSON object, so its last `}` closes it and the bytes before it are its last member: a
// quote preceded by a colon, not a backslash, opens a string, and one preceded by a comma opens a
// name. The last member is the one JSON.parse keeps of a repeated name, as the walk does. With no
// sources member right before it, a sources member anywhere else would show as the bytes
// `EventSeqs":` — a name's closing quote and colon, which cannot occur inside a string, where the
// quote would be escaped — so their absence proves there is none.
func tailMarkers(raw []byte) (op, src []byte, hasSrc, found bool) {
	rest, ok := bytes.CutSuffix(raw, appendTail)
	if !ok {
		return nil, nil, false, false
	}
	op = raw[len(raw)-len(`"append"}`) : len(raw)-1]
	if n := len(rest); n > 0 && rest[n-1] == ']' {
		open := n - 2
		for open >= 0 && (rest[open] == ',' || rest[open] >= '0' && rest[open] <= '9') {
			open--
		}
		if open >= 0 && rest[open] == '[' && bytes.HasSuffix(rest[:open], srcMember) {
			return op, rest[open:], true, true
		}
	}
	if bytes.Contains(rest, srcName) {
		return nil, nil, false, false // somewhere else: walk the members
	}
	return op, nil, false, true
}

var (
	appendTail = []byte(`,"surfaceOp":"append"}`)
	srcMember  = []byte(`,"sourceEventSeqs":`)
)

// checkLogOnly rejects surface markers on an event that cannot join the surface. One pass over the
// top-level members, no allocation: this runs for nearly every event of a log.
func checkLogOnly(e event.Event) error {
	// A member name is the quoted name followed by a colon. Those bytes cannot occur inside an encoded
	// string (its quotes would be escaped), so their absence proves both members absent; a plain byte
	// search is several times cheaper than walking the members past a large data payload.
	if !bytes.Contains(e.Raw, opName) && !bytes.Contains(e.Raw, srcName) {
		return nil
	}
	var hasOp, hasSrc bool
	event.EachMember(e.Raw, func(name, _ []byte) bool {
		switch string(name) {
		case "surfaceOp":
			hasOp = true
		case "sourceEventSeqs":
			hasSrc = true
		}
		return !hasOp
	})
	if hasOp {
		return errText(`session event "`, typeText(e), `" is not surface-eligible and cannot carry surfaceOp`)
	}
	if hasSrc {
		return errText(`session event "`, typeText(e), `" is not surface-eligible and cannot carry sourceEventSeqs`)
	}
	return nil
}

var (
	opName  = []byte(`Op":`)
	srcName = []byte(`EventSeqs":`)
)

// typeText is how `${event.type}` prints the type member, whatever its JSON kind.
func typeText(e event.Event) string {
	if e.Type != "" {
		return e.Type
	}
	raw, ok := e.Member("type")
	if !ok {
		return "undefined"
	}
	v, err := event.Parse(raw)
	if err != nil {
		return string(raw)
	}
	return event.JSString(v)
}

// replaceOp reads a surfaceOp other than "append": it must be exactly {op:"replace", start, end} with
// non-negative safe integer seqs.
func replaceOp(typ string, raw []byte) (start, end int64, err error) {
	if start, end, ok := plainReplaceOp(raw); ok {
		return start, end, nil
	}
	v, perr := event.Parse(raw)
	if perr != nil || v.Kind != event.KindObject {
		return 0, 0, errText(`session event "`, typ, `" carries an invalid surfaceOp`)
	}
	op, _ := v.Get("op")
	s, sok := v.Get("start")
	en, eok := v.Get("end")
	if !v.HasExactKeys("op", "start", "end") || op.Kind != event.KindString || op.Str != "replace" ||
		!sok || !eok || !isEventSeq(s) || !isEventSeq(en) {
		return 0, 0, errText(`session event "`, typ, `" carries an invalid replace surfaceOp`)
	}
	return int64(s.Num), int64(en.Num), nil
}

// plainReplaceOp reads the form the harness writes, {"op":"replace","start":N,"end":M}, straight
// from the bytes; ok=false sends anything else through the general path.
func plainReplaceOp(raw []byte) (start, end int64, ok bool) {
	const head, mid = `{"op":"replace","start":`, `,"end":`
	if !bytes.HasPrefix(raw, []byte(head)) || raw[len(raw)-1] != '}' {
		return 0, 0, false
	}
	body := raw[len(head) : len(raw)-1]
	i := bytes.Index(body, []byte(mid))
	if i < 0 {
		return 0, 0, false
	}
	start, ok = plainSeq(body[:i])
	if !ok {
		return 0, 0, false
	}
	end, ok = plainSeq(body[i+len(mid):])
	return start, end, ok
}

// plainSeq reads a canonical non-negative safe integer that is the whole of b.
func plainSeq(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 16 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, n <= event.MaxSafeInteger
}

// isEventSeq is the harness's isEventSeq: a non-negative safe integer (-0 included, as in JS).
func isEventSeq(v event.Value) bool {
	return v.Kind == event.KindNumber && event.IsSafeInteger(v.Num) && v.Num >= 0
}

// checkSources is assertProvenance: the sourceEventSeqs rules, then replacement coverage.
func (s *foldState) checkSources(e event.Event, raw []byte, present bool, shadowed []int64) error {
	var sorted []int64 // the sources, ascending
	if present {
		var err error
		s.srcBuf, err = readSources(e, raw, s.srcBuf[:0])
		if err != nil {
			return err
		}
		sorted = s.srcBuf
		if !strictlyIncreasing(sorted) {
			s.sortBuf = append(s.sortBuf[:0], sorted...)
			slices.Sort(s.sortBuf)
			sorted = s.sortBuf
			for i := 1; i < len(sorted); i++ {
				if sorted[i] == sorted[i-1] {
					return errors.New("sourceEventSeqs must not contain duplicates")
				}
			}
		}
		for _, src := range s.srcBuf {
			if src >= e.Seq {
				return errText("sourceEventSeqs must reference earlier events: ", itoa(src), " >= current seq ", itoa(e.Seq))
			}
		}
	}
	if len(shadowed) == 0 {
		return nil
	}
	var missing []string
	for _, seq := range shadowed {
		if _, ok := slices.BinarySearch(sorted, seq); !ok {
			missing = append(missing, itoa(seq))
		}
	}
	if len(missing) > 0 {
		return errText("surface replace: sourceEventSeqs must include every shadowed surface node; missing ", strings.Join(missing, ", "))
	}
	return nil
}

func strictlyIncreasing(s []int64) bool {
	for i := 1; i < len(s); i++ {
		if s[i] <= s[i-1] {
			return false
		}
	}
	return true
}

// readSources decodes a present sourceEventSeqs member onto dst, applying the array, emptiness and
// element rules in the harness's order (duplicates and ordering are the caller's).
func readSources(e event.Event, raw []byte, dst []int64) ([]int64, error) {
	out, ok := parseSeqList(raw, dst)
	if !ok {
		v, err := event.Parse(raw)
		if err != nil || v.Kind != event.KindArray {
			return dst, errText("sourceEventSeqs on event at seq ", itoa(e.Seq), " must be an array when present")
		}
		if len(v.Arr) == 0 && e.Type != "assistant/message" {
			return dst, errors.New("sourceEventSeqs must not be empty except on assistant/message")
		}
		out = dst
		for _, el := range v.Arr {
			if !isEventSeq(el) {
				return dst, errText(`session event "`, e.Type, `" sourceEventSeqs must densely contain non-negative safe integers`)
			}
			out = append(out, int64(el.Num))
		}
		return out, nil
	}
	if len(out) == 0 && e.Type != "assistant/message" {
		return dst, errors.New("sourceEventSeqs must not be empty except on assistant/message")
	}
	return out, nil
}

// parseSeqList reads the common case — a canonical array of plain non-negative safe integers such as
// [] or [4,5,6] — straight from the bytes. ok=false means "take the general path", not "invalid".
func parseSeqList(raw []byte, dst []int64) ([]int64, bool) {
	if len(raw) < 2 || raw[0] != '[' {
		return dst, false
	}
	if len(raw) == 2 {
		return dst, raw[1] == ']'
	}
	for i := 1; ; {
		start := i
		var n int64
		for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' && i-start < 16 {
			n = n*10 + int64(raw[i]-'0')
			i++
		}
		if i == start || i >= len(raw) || n > event.MaxSafeInteger || (raw[start] == '0' && i-start > 1) {
			return dst, false
		}
		dst = append(dst, n)
		switch raw[i] {
		case ']':
			return dst, i == len(raw)-1
		case ',':
			i++
		default:
			return dst, false
		}
	}
}

// indexOf is nodes.indexOf(seq) (surface seqs are unique), through the position map on long surfaces.
func (s *foldState) indexOf(seq int64) (int, bool) {
	if len(s.nodes) <= linearScanMax {
		i := slices.Index(s.nodes, seq)
		return i, i >= 0
	}
	if !s.posOK {
		if s.pos == nil {
			s.pos = make(map[int64]int, len(s.nodes))
		} else {
			clear(s.pos)
		}
		for i, n := range s.nodes {
			s.pos[n] = i
		}
		s.posOK = true
	}
	i, ok := s.pos[seq]
	return i, ok
}

// apply commits a validated plan and returns the replacement it made, if any.
func (s *foldState) apply(p plan) *Replacement {
	s.next++
	switch p.kind {
	case planAppend:
		s.nodes = append(s.nodes, p.seq)
		if s.posOK {
			s.pos[p.seq] = len(s.nodes) - 1
		}
	case planReplace:
		if s.shared {
			s.nodes, s.shared = slices.Clone(s.nodes), false
		}
		shadowed := slices.Clone(s.nodes[p.startIdx : p.endIdx+1])
		if p.startIdx == p.endIdx {
			// A one-node rewrite (a prune) moves nothing: the map stays valid.
			if s.posOK {
				delete(s.pos, s.nodes[p.startIdx])
				s.pos[p.seq] = p.startIdx
			}
			s.nodes[p.startIdx] = p.seq
		} else {
			s.nodes[p.startIdx] = p.seq
			s.nodes = append(s.nodes[:p.startIdx+1], s.nodes[p.endIdx+1:]...)
			s.posOK = false
		}
		s.reps = append(s.reps, Replacement{Seq: p.seq, Start: p.start, End: p.end, ShadowedSeqs: shadowed})
		return &s.reps[len(s.reps)-1]
	}
	return nil
}

// Fold is foldSurface over a whole log (contiguous seqs from 0), with full validation and the
// harness's error texts. The first failing event's text is returned unwrapped.
func Fold(events []event.Event) (*Result, error) {
	return fold(events, foldState{})
}

// FoldLifted is Fold over a log whose tool results are lifted into tool-role messages (format v4, whose
// surface view the generation package gives): a tool/result replacement keeps every member of the result
// but message.content, which it may change whole — v4 lifted the one tool-result block v0 wraps the
// result in, so its content is what the v0 rule lets a replacement change.
func FoldLifted(events []event.Event) (*Result, error) {
	return fold(events, foldState{lifted: true})
}

func fold(events []event.Event, s foldState) (*Result, error) {
	origin := func(seq int64) (event.Event, bool) {
		if seq < 0 || seq >= int64(len(events)) {
			return event.Event{}, false
		}
		return events[seq], true
	}
	for _, e := range events {
		p, err := s.plan(e, origin)
		if err != nil {
			return nil, err
		}
		s.apply(p)
	}
	nodes := s.nodes
	if nodes == nil {
		nodes = []int64{}
	}
	reps := s.reps
	if reps == nil {
		reps = []Replacement{}
	}
	return &Result{Nodes: nodes, Replacements: reps, Generation: len(reps)}, nil
}

// Folder is the incremental form (the harness's SurfaceManager over a window starting at baseSeq):
// Push validates and applies one event atomically, so a failure leaves it unchanged. Unlike the
// harness's manager it also keeps the replacement history, so that Result equals Fold's.
type Folder struct {
	s foldState
	// tools holds the current tool/result nodes: the only events a later tool/result rewrite can
	// compare against, so the folder never needs the rest of the log.
	tools map[int64]event.Event
}

// NewFolder starts an empty fold whose first event must carry baseSeq. Replace ranges reaching
// below baseSeq fail as "not found in surface", as in the harness's windowed SurfaceManager.
func NewFolder(baseSeq int64) *Folder {
	return &Folder{s: foldState{next: baseSeq}, tools: map[int64]event.Event{}}
}

// Push validates e as the next event and applies it; on error nothing changes.
func (f *Folder) Push(e event.Event) error {
	p, err := f.s.plan(e, f.origin)
	if err != nil {
		return err
	}
	if r := f.s.apply(p); r != nil {
		for _, seq := range r.ShadowedSeqs {
			delete(f.tools, seq)
		}
	}
	if p.kind != planNone && e.Type == "tool/result" {
		f.tools[e.Seq] = e
	}
	return nil
}

// PushUnmarked is Push for an event known to carry neither surfaceOp nor sourceEventSeqs at its top
// level: the search of its bytes for them is skipped.
func (f *Folder) PushUnmarked(e event.Event) error {
	if e.Seq != f.s.next || event.IsSurfaceType(e.Type) {
		return f.Push(e) // refused, with Push's own message
	}
	f.s.apply(plan{}) // as Push applies a log-only event
	return nil
}

func (f *Folder) origin(seq int64) (event.Event, bool) {
	e, ok := f.tools[seq]
	return e, ok
}

// Result returns a snapshot of the fold so far; later pushes never change it. It costs nothing in the
// surface's length: the snapshot shares the folder's nodes and replacements (a live session takes one per
// accepted batch), and the folder copies its nodes before the next replace writes inside them. Its slices
// must not be changed.
func (f *Folder) Result() *Result {
	n, m := len(f.s.nodes), len(f.s.reps)
	nodes := f.s.nodes[:n:n]
	if nodes == nil {
		nodes = []int64{}
	}
	f.s.shared = true
	reps := f.s.reps[:m:m]
	if reps == nil {
		reps = []Replacement{}
	}
	return &Result{Nodes: nodes, Replacements: reps, Generation: m}
}

// NextSeq is the seq the next pushed event must carry.
func (f *Folder) NextSeq() int64 { return f.s.next }

// JSON is foldSurface's answer as JSON.stringify prints it: {"nodes":[…],"replacements":[{"seq",
// "start","end","shadowedSeqs"}…]}, without a trailing newline.
func (r *Result) JSON() []byte {
	b := append([]byte(nil), `{"nodes":`...)
	b = appendSeqs(b, r.Nodes)
	b = append(b, `,"replacements":[`...)
	for i, rep := range r.Replacements {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"seq":`...)
		b = strconv.AppendInt(b, rep.Seq, 10)
		b = append(b, `,"start":`...)
		b = strconv.AppendInt(b, rep.Start, 10)
		b = append(b, `,"end":`...)
		b = strconv.AppendInt(b, rep.End, 10)
		b = append(b, `,"shadowedSeqs":`...)
		b = appendSeqs(b, rep.ShadowedSeqs)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

func appendSeqs(b []byte, seqs []int64) []byte {
	b = append(b, '[')
	for i, s := range seqs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, s, 10)
	}
	return append(b, ']')
}
