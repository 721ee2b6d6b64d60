package generation

import (
	"bytes"
	"strconv"
	"sync"

	"github.com/dshfs/dshfs/eventstore/event"
)

// Latest is the newest generation a tagged harness release writes (dsh-v0.2.0-rc.2 on).
const Latest = 4

// decodes reports whether this package decodes generation gen.
func decodes(gen int) bool { return gen >= 2 && gen <= Latest }

// Header is the logical session header of a v2 or v3 artifact: the physical header line without its
// "type", exactly as the codec restores it.
type Header struct {
	// Raw is JSON.stringify of the logical header: version, id, createdAt, cwd?, parentSession?,
	// isSeeded, origin?, delegationDepth, agentPreset?, in that order.
	Raw             []byte
	Version         int
	ID              string
	CreatedAt       int64
	Cwd             *string // nil when absent
	ParentSession   *string
	IsSeeded        bool
	Origin          *string // "subagent" when present
	DelegationDepth int64
	AgentPreset     *string
}

// Encoded is h with Raw set to its logical form: what a writer of a new session gives its backend.
func (h Header) Encoded() Header {
	h.Raw = h.logical()
	return h
}

// logical encodes the header in the codec's member order.
func (h Header) logical() []byte {
	ms := []event.Member{{Key: "version", Value: event.Int(int64(h.Version))}, {Key: "id", Value: event.String(h.ID)},
		{Key: "createdAt", Value: event.Int(h.CreatedAt)}}
	opt := func(key string, s *string) {
		if s != nil {
			ms = append(ms, event.Member{Key: key, Value: event.String(*s)})
		}
	}
	opt("cwd", h.Cwd)
	opt("parentSession", h.ParentSession)
	ms = append(ms, event.Member{Key: "isSeeded", Value: event.Bool(h.IsSeeded)})
	opt("origin", h.Origin)
	ms = append(ms, event.Member{Key: "delegationDepth", Value: event.Int(h.DelegationDepth)})
	opt("agentPreset", h.AgentPreset)
	return event.Stringify(event.Object(ms...))
}

// Artifact is what the harness restores from one v2 or v3 artifact.
type Artifact struct {
	Header Header
	// InheritedEventCount is the number of leading events a seeded session inherited from its parent:
	// the seq of the last `session/end-seed {"inherited":true}` (0 for an unseeded session).
	InheritedEventCount int64
	// Events are the logical events in order, seq i at index i, each Raw being JSON.stringify of the
	// event (range-encoded sourceEventSeqs expanded).
	Events []event.Event
	// Committed is the length of the artifact's bytes the events came from: the whole artifact but a
	// torn tail (raw: the final line without LF; compressed: an incomplete final frame) and, in a
	// Recoverable read, the rejected rows after the accepted prefix.
	Committed int64
	// TornRecovered is how many of Events came from the complete lines of a torn final zstd frame (v4).
	TornRecovered int

	v4   *v4Relations // the v4 lifecycle state at the end of Events, for Repair
	walk *v4Walk      // the v4 restore's walk at the end of Events, for CheckerFor
}

// Options says how to read an artifact.
type Options struct {
	// Generation is the version the artifact's file name states (session.vN.jsonl); the header must agree.
	Generation int
	// Compressed is true for a .zstd artifact.
	Compressed bool
	Recovery   Recovery
	// MaxFrameBytes caps what one zstd frame may decode to (writer.max_frame_bytes); 0 is no cap.
	MaxFrameBytes int64
	// Workers is how many goroutines parse rows; 0 or 1 parses them inline.
	Workers int
	// TornPrefix, when set, decodes what the harness's flushing prefix decoder recovers from an incomplete
	// final zstd frame. A v4 read keeps the complete lines of that plaintext as events (the v4 backend's
	// decompressZstdPrefix); without it, or for earlier generations, a torn final frame is left out whole.
	TornPrefix func(torn []byte) []byte
}

// DefaultMaxFrameBytes is Decode's cap on one decoded zstd frame, writer.max_frame_bytes's default.
const DefaultMaxFrameBytes = 256 << 20

// Decode reads a v2 or v3 artifact strictly, as the harness's published decode tool does: the first row
// the codec rejects refuses the whole artifact. A zstd frame may decode to DefaultMaxFrameBytes at most.
func Decode(gen int, compressed bool, artifact []byte) (*Artifact, error) {
	return DecodeWith(artifact, Options{Generation: gen, Compressed: compressed, MaxFrameBytes: DefaultMaxFrameBytes})
}

// ParseHeader reads the header line (without its LF) of a v2 or v3 artifact whose file name states gen, with
// the codec's header checks alone: a listing reads headers without the events the restore checks them
// against.
func ParseHeader(gen int, line []byte) (Header, error) {
	if !decodes(gen) {
		return Header{}, &UnsupportedGenerationError{Version: gen}
	}
	hv, err := event.Parse(line)
	if err != nil {
		return Header{}, &CorruptError{Message: "corrupt session log: header line is not valid JSON"}
	}
	if !isObject(hv) {
		return Header{}, formatErr("Session header must be a JSON object")
	}
	verv, _ := hv.Get("version")
	ver, err := count(verv, "Session format version")
	if err != nil {
		return Header{}, err
	}
	if ver != int64(gen) {
		return Header{}, &MismatchError{FileVersion: gen, HeaderVersion: ver}
	}
	return decodeHeader(gen, hv)
}

// DecodeWith reads a v2 or v3 artifact. Refusals are *FormatError (the codec's text and class),
// *CorruptError (framing), *MismatchError and *UnsupportedGenerationError. The returned events alias
// artifact when it is raw and its lines are already canonical, so artifact must not be modified after.
func DecodeWith(artifact []byte, o Options) (*Artifact, error) {
	if !decodes(o.Generation) {
		return nil, &UnsupportedGenerationError{Version: o.Generation}
	}
	if len(artifact) < parallelMin {
		// one parse window's text at most: no worker has anything to do beside the decoder, and the
		// goroutines cost more than the decode of a small session
		o.Workers = 1
	}
	text := [][]byte{artifact} // in segments of whole lines, but for a raw artifact's torn tail
	tornFrom := -1             // where the lines recovered from a torn final frame start in text
	committedOf := func(lineEnd int) int64 { return int64(lineEnd) }
	if o.Compressed {
		var err error
		if text, err = unframe(artifact, o.MaxFrameBytes, o.Workers); err != nil {
			return nil, err
		}
		// offsets into the plaintext do not map back to frames; a compressed artifact is committed up to
		// its last complete frame whatever rows a recoverable read dropped
		end := int64(len(artifact))
		if torn := tornFrameStart(artifact); torn >= 0 {
			end = int64(torn)
			if o.Generation >= 4 && o.TornPrefix != nil {
				plain := o.TornPrefix(artifact[torn:])
				if nl := bytes.LastIndexByte(plain, '\n'); nl >= 0 {
					tornFrom = textLen(text)
					text = append(text, plain[:nl+1])
				}
			}
		}
		committedOf = func(int) int64 { return end }
	}
	nl := bytes.IndexByte(text[0], '\n')
	if nl < 0 {
		return nil, &CorruptError{Message: "empty or header-less session log"}
	}
	h, err := ParseHeader(o.Generation, text[0][:nl])
	if err != nil {
		return nil, err
	}

	committed := committedOf(nl + 1)
	v2 := v2Decoder{seeded: h.IsSeeded, recovery: o.Recovery, cut: -1}
	v3 := v3Decoder{v2: v2, cut: -1}
	v4 := v4Decoder{v2: v2}
	decodeRow, unparsable := v2.decodeRow, v2.unparsable
	switch o.Generation {
	case 3:
		decodeRow, unparsable = v3.decodeRow, v3.v2.unparsable
	case 4:
		decodeRow, unparsable = v4.decodeRow, v4.v2.unparsable
	}
	rest := newRestorer(h)
	// one event a line, but for rows a recoverable read sets aside: sized once, not grown by doubling
	lines := 0
	for i, seg := range text {
		if i == 0 {
			seg = seg[nl+1:]
		}
		lines += bytes.Count(seg, []byte{'\n'})
	}
	events := make([]event.Event, 0, lines)
	var walk *v4Walk // v4: the restore walks each event as it is accepted, reading the value decoded once
	if o.Generation == 4 {
		walk = &v4Walk{h: h, rel: newStreamRelations(&events), last: -1, children: map[string]bool{}, stream: true}
	}
	emit := func(a accepted) error {
		if walk == nil {
			rest.observe(a.v, a.row.Type)
		}
		e := a.row
		if a.changed {
			var err error
			if e, err = expanded(a); err != nil {
				return err
			}
		}
		events = append(events, e)
		if walk != nil {
			return walk.stepValue(len(events)-1, e, a.v, true) // v4Decoder admitted the row

		}
		return nil
	}
	read := func(line []byte, _ *v4Arena) (event.Event, event.Value, error) {
		e, err := event.ParseEvent(line)
		if err != nil {
			return e, event.Value{}, err
		}
		v, err := rowValue(e)
		return e, v, err
	}
	if o.Generation == 4 {
		// the window's trees are dead once the decoder takes the next
		read = func(line []byte, a *v4Arena) (event.Event, event.Value, error) {
			if e, v, ok := v4FastLine(line, a); ok {
				return e, v, nil
			}
			e, err := event.ParseEvent(line)
			if err != nil {
				return e, event.Value{}, err
			}
			if v, ok := v4Fast(e, a); ok {
				return e, v, nil
			}
			v, err := v4Value(e)
			return e, v, err
		}
	}
	line, recovered := 0, 0
	nextWindow, stop := parseWindows(text, nl+1, read, o.Workers)
	defer stop()
	for rows := nextWindow(); rows != nil; rows = nextWindow() {
		for _, r := range rows {
			line++
			if r.err != nil {
				if err := unparsable(line); err != nil {
					return nil, err
				}
				continue
			}
			n := len(events)
			if err := decodeRow(r.v, r.ev, line, emit); err != nil {
				return nil, err
			}
			if len(events) > n && tornFrom >= 0 && r.start >= tornFrom {
				recovered++
			}
			if len(events) > n {
				committed = committedOf(r.end)
			}
		}
	}
	var cut int64
	switch o.Generation {
	case 3:
		cut, err = v3.finish()
	case 4:
		cut, err = v4.v2.finish()
	default:
		cut, err = v2.finish()
	}
	if err != nil {
		return nil, err
	}
	var rel *v4Relations
	if walk != nil {
		walk.rel.at = func(seq int64) event.Event { return events[seq] } // events grows no more
		rel = walk.rel
		_, err = walk.finish(cut, len(events))
	} else {
		err = rest.finish(cut, events)
	}
	if err != nil {
		return nil, err
	}
	return &Artifact{Header: h, InheritedEventCount: cut, Events: events, Committed: committed, TornRecovered: recovered, v4: rel, walk: walk}, nil
}

// parallelMin is the artifact size below which a decode runs on the caller's goroutine alone.
const parallelMin = 64 << 10

// parseWindow is how many rows are parsed before they are decoded; minRowBytes sizes a window of a short
// text (the shortest row the codec admits is longer: a type, seq, time and data).
const (
	parseWindow = 4096
	minRowBytes = 32
)

// parsedRow is one line of an artifact's text (start, end past its LF) as parsed for the decoder.
type parsedRow struct {
	start, end int
	ev         event.Event
	v          event.Value
	err        error
}

// parseWindows parses the complete lines of text (segments of whole lines) from p on (an offset into the
// first segment), a window of rows at a time, and returns them in order through next (nil after the last).
// With more than one worker, each worker parses whole windows ahead of the caller, which decodes them in
// order: parsing is most of a load's work, decoding must run in order, and the windows in flight bound the
// parsed values held at once. stop ends the parsing early (the caller refused the artifact). A window is of
// one segment; its rows' offsets are the text's.
//
// A window the caller has decoded (it asks for the next) is parsed into again, rows and arena: the values
// the decoder keeps are copies of a row's, and those of the trees v4Fast read are strings of the text or
// containers of their own (see v4Fast); a fresh window each time was a tenth of what a load allocated.
func parseWindows(text [][]byte, p int, read rowReader, workers int) (next func() []parsedRow, stop func()) {
	free := make(chan *rowWindow, workers+2)
	seg, base := 0, 0 // the segment cut from, and its offset in the text
	// cut takes the next window's rows (their lines, not yet parsed), nil after the last
	cut := func() *rowWindow {
		for seg < len(text) && p >= len(text[seg]) {
			base += len(text[seg])
			seg, p = seg+1, 0
		}
		if seg == len(text) {
			return nil
		}
		b := text[seg]
		var w *rowWindow
		select {
		case w = <-free:
			w.rows = w.rows[:0] // each row is written whole again
			w.arena.reset()
		default:
			if workers <= 1 {
				if pw, ok := windowPool.Get().(*rowWindow); ok {
					w = pw
					break
				}
			}
			// a short log's window is sized by its lines, not by the bound: a sync, a listing or a
			// first grep restores thousands of small sessions, and a full window is over half a MiB
			rows := parseWindow
			if len(b)-p < parseWindow*minRowBytes {
				rows = bytes.Count(b[p:], []byte{'\n'}) + 1
			}
			w = &rowWindow{rows: make([]parsedRow, 0, rows)}
			// a row's tree takes a few containers' members and elements: a small log's arena starts
			// small (and grows by doubling)
			w.arena.members.first = min(arenaSlab, 8*rows)
			w.arena.values.first = min(arenaSlab, 8*rows)
		}
		w.text, w.base = b, base
		for p < len(b) && len(w.rows) < parseWindow {
			end := bytes.IndexByte(b[p:], '\n')
			if end < 0 {
				p = len(b) // torn tail
				break
			}
			end += p
			w.rows = append(w.rows, parsedRow{start: base + p, end: base + end + 1})
			p = end + 1
		}
		return w
	}
	var held *rowWindow // the window the caller holds, free once it asks for the next
	take := func(w *rowWindow) []parsedRow {
		if held != nil {
			select {
			case free <- held:
			default:
			}
		}
		held = w
		if w == nil {
			return nil
		}
		return w.rows
	}
	if workers <= 1 {
		// one window at a time on the caller's goroutine: a small log's, whose windows (their rows and
		// arena) go to the next small log's decode once this one is over
		var pooled sync.Once
		return func() []parsedRow {
				w := cut()
				if w != nil {
					parseRows(w, read)
				}
				return take(w)
			}, func() {
				pooled.Do(func() {
					pool := func(w *rowWindow) {
						if w != nil {
							w.release()
							windowPool.Put(w)
						}
					}
					pool(held)
					held = nil
					for {
						select {
						case w := <-free:
							pool(w)
						default:
							return
						}
					}
				})
			}
	}
	// the windows go to the workers as they are cut, and to the caller in the same order, each once its
	// worker has parsed it
	type job struct {
		w      *rowWindow
		parsed chan struct{}
	}
	jobs := make(chan job, workers)
	order := make(chan job, workers+1)
	done := make(chan struct{})
	go func() {
		defer close(jobs)
		defer close(order)
		for w := cut(); w != nil; w = cut() {
			j := job{w: w, parsed: make(chan struct{})}
			select {
			case order <- j:
			case <-done:
				return
			}
			select {
			case jobs <- j:
			case <-done:
				return
			}
		}
	}()
	for range workers {
		go func() {
			for j := range jobs {
				parseRows(j.w, read)
				close(j.parsed)
			}
		}()
	}
	var once sync.Once
	return func() []parsedRow {
			j, ok := <-order
			if !ok {
				return take(nil)
			}
			<-j.parsed
			return take(j.w)
		}, func() {
			// the workers end once the windows already cut are parsed; none is the caller's any more
			once.Do(func() { close(done) })
		}
}

// windowPool keeps the windows of small logs' decodes (parsed one window at a time) for the next: a walk
// over a store of small v4 sessions decodes thousands, and their windows were most of what it allocated.
// Nothing a decode returns refers to a window: its events' bytes are the text's, and what its checks keep
// of a tree is a copy, or a container allocated on its own (v4Fast).
var windowPool sync.Pool

// release readies a window for another decode: it keeps no row, tree or text of this one alive.
func (w *rowWindow) release() {
	clear(w.rows)
	w.rows, w.text = w.rows[:0], nil
	w.arena.clear()
}

// rowWindow is a window of rows, the text segment they are lines of (at offset base in the text), and
// the arena of the trees v4Fast read from them.
type rowWindow struct {
	rows  []parsedRow
	text  []byte
	base  int
	arena v4Arena
}

// rowReader parses one stored line (without its LF) into its event and the value its checks read; the
// value's containers may come from the arena.
type rowReader func(line []byte, arena *v4Arena) (event.Event, event.Value, error)

// parseRows parses the rows of w: each row's event and the value its checks read.
func parseRows(w *rowWindow, read rowReader) {
	for i := range w.rows {
		r := &w.rows[i]
		r.ev, r.v, r.err = read(w.text[r.start-w.base:r.end-1-w.base], &w.arena)
	}
}

// payloadTypes are the event types whose data a check reads (v3's structural admission, canonical
// payloads and system head, the inherited marker, the open step, compaction's shadowed seqs). Every other
// row is checked on its envelope alone, which spares parsing the embedded assistant streams that are
// most of a log's bytes.
var payloadTypes = map[string]bool{
	"request/header": true, "system/message": true, "tool/result": true, "session/end-seed": true,
	"step/start": true, "compaction/prune": true, "compaction/summary": true,
}

// rowValue is the row as the checks read it: whole for payloadTypes, else with its data left empty.
func rowValue(e event.Event) (event.Value, error) {
	if payloadTypes[e.Type] {
		return e.Record()
	}
	return e.Envelope()
}

// expanded re-encodes an accepted event whose provenance ranges were expanded: the whole row with the
// decoded list in place of the physical one.
func expanded(a accepted) (event.Event, error) {
	full, err := a.row.Record()
	if err != nil {
		return event.Event{}, err
	}
	src, _ := a.v.Get("sourceEventSeqs")
	return event.NewEvent(event.Stringify(setMember(full, "sourceEventSeqs", src)))
}

// tornFrameStart is the offset of an incomplete final frame, or -1 when the artifact ends on a frame
// boundary. The artifact has already been unframed without error.
func tornFrameStart(b []byte) int {
	for p := 0; p < len(b); {
		info, err := scanFrame(b, p)
		if err != nil || info.end < 0 {
			return p
		}
		p = info.end
	}
	return -1
}

// AppendRestored appends the artifact as the harness's published decode tool prints it: the line
// `{"header":<header>,"inheritedEventCount":<n>}`, then one line per logical event, each LF-terminated.
func (a *Artifact) AppendRestored(dst []byte) []byte {
	dst = append(dst, `{"header":`...)
	dst = append(dst, a.Header.Raw...)
	dst = append(dst, `,"inheritedEventCount":`...)
	dst = strconv.AppendInt(dst, a.InheritedEventCount, 10)
	dst = append(dst, "}\n"...)
	for _, e := range a.Events {
		dst = append(dst, e.Raw...)
		dst = append(dst, '\n')
	}
	return dst
}

// WrittenBy names the harness releases that write generation gen, for refusals that tell a user which
// harness a file came from (docs/formats.md#generations).
func WrittenBy(gen int) string {
	switch {
	case gen == 0:
		return "harness releases up to dsh-v0.1.2-rc.1"
	case gen == 1:
		return "no tagged harness release"
	case gen == 2:
		return "dsh-v0.1.3-alpha.1 and dsh-v0.1.3-alpha.2"
	case gen == 3:
		return "dsh-v0.1.5-alpha.1 up to dsh-v0.2.0-rc.1"
	case gen == 4:
		return "dsh-v0.2.0-rc.2 and later"
	}
	return "a harness release newer than dshfs knows (the latest writes v4)"
}
