package fleetsync

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/eventstore/postgres"
)

// Format v4 sessions (session.v4.jsonl[.zstd], what harness 0.2.x writes) are carried as the fleet store
// keeps them: the file's physical header line and its rows, byte for byte, each row one event whose seq
// is its row number. Which rows are the log is the v4 restore's answer (recovery 'recoverable', as the
// harness and the JSONL backend read it), never a line count; and the rows copied are proven to restore,
// read back as the fleet store reads them, to exactly the events this host's store restores.

// v4Log is what a read of a host's v4 artifact found.
type v4Log struct {
	header []byte   // the physical header line
	rows   [][]byte // the rows of the restored events, in seq order
	events []event.Event
	torn   int64 // bytes after the rows the restore accepted (a torn frame or line, a damaged tail)
	gh     generation.Header
	cut    int64 // the inherited event count
	// end is the file offset after the last complete frame (zstd) or line (raw) when the restore accepted
	// every row before it; -1 when it set rows aside, which a read resumed there could not tell from new ones
	end  int64
	text int64 // the plaintext bytes of the header and rows
}

// readV4 reads the v4 artifact of e whole (readV4File).
func readV4(ctx context.Context, b artifactOpener, e eventstore.Entry, workers int) (*v4Log, error) {
	f, art, err := b.OpenArtifact(ctx, e.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readV4File(f, art, b.Compression() == jsonl.Zstd, workers)
}

// readV4File reads a v4 artifact whole: its complete frames (zstd; a torn final frame is left for a later
// pass, as a v0 sync leaves a torn line) or lines (raw), restored with the v4 rules.
func readV4File(f *os.File, art eventstore.Artifact, zstd bool, workers int) (*v4Log, error) {
	buf, err := io.ReadAll(io.NewSectionReader(f, 0, art.Size))
	if err != nil {
		return nil, &eventstore.IOError{Err: err}
	}
	end := int64(0)
	var frames []jsonl.Frame
	if zstd {
		if frames, _, err = jsonl.ScanFrames(buf, 0); err != nil {
			return nil, &corruptError{err.Error()}
		}
		if len(frames) > 0 {
			end = frames[len(frames)-1].End
		}
	} else {
		end = int64(bytes.LastIndexByte(buf, '\n') + 1)
	}
	size := int64(len(buf))
	buf = buf[:end]
	// the restore first: it refuses a frame that could decode to more than max_frame_bytes before decoding it
	a, err := generation.DecodeWith(buf, generation.Options{Generation: 4, Compressed: zstd, Recovery: generation.Recoverable,
		MaxFrameBytes: generation.DefaultMaxFrameBytes, Workers: workers})
	if err != nil {
		return nil, &corruptError{err.Error()}
	}
	text := buf // the plaintext of the complete frames (zstd) or lines (raw)
	if zstd {
		text = nil
		for _, fr := range frames {
			t, err := jsonl.RawText(buf[fr.Start:fr.End])
			if err != nil {
				return nil, &corruptError{err.Error()}
			}
			text = append(text, t...)
		}
	}
	l := &v4Log{events: a.Events, gh: a.Header, cut: a.InheritedEventCount, end: end, text: int64(len(text))}
	rest := text
	for i := -1; i < len(a.Events); i++ {
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 {
			return nil, &corruptError{"the v4 restore holds more events than the log has rows"}
		}
		if i < 0 {
			l.header = bytes.Clone(rest[:nl])
		} else {
			l.rows = append(l.rows, bytes.Clone(rest[:nl]))
		}
		rest = rest[nl+1:]
	}
	l.torn = size - end + int64(len(rest))
	if len(rest) == 0 {
		// the header and rows are the very text restored: the fleet store restores them to these events
		return l, nil
	}
	l.end, l.text = -1, l.text-int64(len(rest))
	// rows were set aside: the fleet store restores the rows alone, which must restore to the very same events
	raw := append(bytes.Clone(l.header), '\n')
	for _, r := range l.rows {
		raw = append(append(raw, r...), '\n')
	}
	back, err := generation.DecodeWith(raw, generation.Options{Generation: 4, Recovery: generation.Recoverable, Workers: workers})
	if err != nil {
		return nil, &corruptError{"not representable in the fleet store: its rows alone do not restore: " + err.Error()}
	}
	if len(back.Events) != len(a.Events) || int64(len(raw)) != back.Committed {
		return nil, &corruptError{fmt.Sprintf("not representable in the fleet store: its %d rows restore to %d events", len(a.Events), len(back.Events))}
	}
	for i := range back.Events {
		if !bytes.Equal(back.Events[i].Raw, a.Events[i].Raw) {
			return nil, &corruptError{"not representable in the fleet store: its row at seq " + strconv.Itoa(i) + " restores otherwise alone"}
		}
	}
	return l, nil
}

// v4State is what a cursor of a v4 artifact knows of the log before its offset: a digest of it, and, while
// the syncer follows the store, the restore's state there, so that the next read checks only the rows
// appended past it.
type v4State struct {
	gh  generation.Header
	cut int64
	// events are the restored events before the cursor (nil: not kept); checker walks them once, at the
	// first read that resumes, and then moves on with each accepted append
	events  []event.Event
	checker *generation.V4Checker
	bytes   int64 // the plaintext the events stand for: what keeping them costs
	// sum is the SHA-256 of the header line and the rows before the cursor, each with its LF; hash is the
	// running digest's state, continued over the rows appended
	sum  [32]byte
	hash []byte
}

// v4KeepBytes bounds the plaintext of the v4 logs whose restore state a following syncer keeps; a session
// past it is restored whole on each change, its copied rows proven by the cursor's digest.
const v4KeepBytes = 256 << 20

// digestRows continues the digest state (nil: a new digest, of header first) over rows.
func digestRows(state, header []byte, rows [][]byte) ([]byte, [32]byte) {
	h := sha256.New()
	if state != nil {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
			panic("fleetsync: a SHA-256 state does not restore: " + err.Error()) // written by this function
		}
	} else {
		h.Write(header)
		h.Write([]byte{'\n'})
	}
	for _, r := range rows {
		h.Write(r)
		h.Write([]byte{'\n'})
	}
	state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		panic("fleetsync: a SHA-256 state does not save: " + err.Error())
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return state, sum
}

// v4Reader reads a JSONL store's v4 artifacts. Which rows are the log is the restore's answer, so a read
// without a cursor restores the whole file. One from a cursor (the same artifact, grown only) checks the
// rows appended past it from the restore's state there (a generation.V4Checker, as a v4 writer checks its
// appends), or, when that state is not kept or the appended rows are anything but rows the checker
// accepts, restores the whole file and proves the rows before the cursor by its digest.
type v4Reader struct {
	b       artifactOpener
	workers int
}

func (r v4Reader) resumes(ctx context.Context, e eventstore.Entry, from *cursor) bool {
	return from.v4 != nil && fileReader{b: r.b}.resumes(ctx, e, from)
}

func (r v4Reader) read(ctx context.Context, e eventstore.Entry, from *cursor, _ knownLine, header func([]byte) error, emit func(line) error) (readResult, error) {
	f, art, err := r.b.OpenArtifact(ctx, e.Path)
	if err != nil {
		return readResult{}, err
	}
	defer f.Close()
	zstd := r.b.Compression() == jsonl.Zstd
	if from != nil && (from.v4 == nil || !resumable(f, art, from)) {
		from = nil // replaced or cut back: read whole (the copier refuses rows below what it resumed past)
	}
	var hdr []byte
	var rows [][]byte
	var first, torn int64
	var at *cursor
	if from != nil && from.v4.events != nil {
		if rows, at, torn, err = r.resume(f, art, zstd, from); err != nil {
			return readResult{}, err
		}
		hdr, first = from.header, from.next
	}
	if at == nil {
		l, err := readV4File(f, art, zstd, r.workers)
		if err != nil {
			return readResult{}, err
		}
		st := &v4State{gh: l.gh, cut: l.cut, events: l.events, bytes: l.text}
		rows, hdr, first, torn = l.rows, l.header, 0, l.torn
		if from != nil {
			// the rows the cursor was past must be those it digested: only the rest is new
			next := from.next
			if int64(len(l.rows)) < next || !bytes.Equal(l.header, from.header) {
				return readResult{}, errChanged
			}
			var sum [32]byte
			if st.hash, sum = digestRows(nil, l.header, l.rows[:next]); sum != from.v4.sum {
				return readResult{}, errChanged
			}
			rows, first = l.rows[next:], next
			st.hash, st.sum = digestRows(st.hash, nil, rows)
		} else {
			st.hash, st.sum = digestRows(nil, l.header, l.rows)
		}
		if l.end >= 0 {
			at = &cursor{identity: art.Identity, offset: l.end, next: int64(len(l.rows)), header: l.header, v4: st}
		}
	}
	res := readResult{torn: torn}
	if err := header(hdr); err != nil {
		return res, stopped(err)
	}
	for i, row := range rows {
		seq := first + int64(i)
		if err := emit(line{raw: row, first: seq, last: seq, events: 1}); err != nil {
			return res, stopped(err)
		}
	}
	res.at = sealed(f, at)
	return res, nil
}

// errChanged is a v4 artifact whose rows before a cursor are not those the cursor digested (rewritten in
// place): nothing is copied, and the next pass compares the whole log with the fleet store's copy.
var errChanged = &eventstore.IOError{Err: errors.New("the session's artifact changed before where its last read ended; it is compared again by the next pass")}

// resume reads the frames (zstd) or lines (raw) appended to a v4 artifact past from, and checks their rows
// from the restore's state there. at is nil when they are anything but rows the checker accepts as they
// are — one it refuses, an inherited end-seed, a frame that ends inside a line or does not decode — which a
// whole restore then decides, as the harness does. The state moves on only when every row is accepted.
func (r v4Reader) resume(f *os.File, art eventstore.Artifact, zstd bool, from *cursor) (rows [][]byte, at *cursor, torn int64, err error) {
	buf := make([]byte, art.Size-from.offset)
	if n, err := f.ReadAt(buf, from.offset); n != len(buf) && err != nil {
		return nil, nil, 0, &eventstore.IOError{Err: err}
	}
	var text []byte
	end := int64(0)
	if zstd {
		frames, _, err := jsonl.ScanFrames(buf, 0)
		if err != nil {
			return nil, nil, 0, nil
		}
		for _, fr := range frames {
			t, err := jsonl.RawTextCapped(buf[fr.Start:fr.End], generation.DefaultMaxFrameBytes)
			if err != nil || len(t) == 0 || t[len(t)-1] != '\n' {
				return nil, nil, 0, nil
			}
			text = append(text, t...)
			end = fr.End
		}
	} else {
		end = int64(bytes.LastIndexByte(buf, '\n') + 1)
		text = buf[:end]
	}
	var add []event.Event
	for rest := text; len(rest) > 0; {
		nl := bytes.IndexByte(rest, '\n')
		row := rest[:nl]
		rest = rest[nl+1:]
		ev, err := event.ParseEvent(row)
		if err != nil || ev.Type == "session/end-seed" {
			return nil, nil, 0, nil
		}
		rows, add = append(rows, row), append(add, ev)
	}
	st := from.v4
	if len(add) > 0 {
		if st.checker == nil {
			if st.checker, err = generation.NewV4Checker(st.gh, st.cut, st.events); err != nil {
				st.checker = nil
				return nil, nil, 0, nil
			}
		}
		out, err := st.checker.CheckParsed(st.events, add, nil)
		if err != nil {
			return nil, nil, 0, nil
		}
		st.events = append(st.events, out...)
		st.bytes += int64(len(text))
		st.hash, st.sum = digestRows(st.hash, nil, rows)
	}
	at = &cursor{identity: art.Identity, offset: from.offset + end, next: from.next + int64(len(rows)), header: from.header, v4: st}
	return rows, at, int64(len(buf)) - end, nil
}

// upgrade carries a session this host synced as v0 and its harness has since upgraded to v4 (a
// session.v4.jsonl[.zstd] published beside the synced session.jsonl): the fleet store's v0 log is
// replaced by the v4 one when the v4 log proves to hold every event of it (continues), with the v0 log
// kept in the fleet store's `kept` table (kind superseded); otherwise the copy there is marked stale,
// with the reason, and left as it is.
func (s *Syncer) upgrade(ctx context.Context, e eventstore.Entry, held postgres.Holding, b artifactOpener) Report {
	r := Report{ID: e.ID, From: held.NextSeq, To: held.NextSeq}
	later := "session artifact " + stringify(e.Path) + " is format generation v4, written by " + generation.WrittenBy(4)
	stale := func(why string) Report {
		r.Status, r.Reason = Skipped, later+"; "+why
		if err := s.dst.NoteSync(ctx, s.opts.Host, e.ID, postgres.Stale, later+"; "+why); err != nil {
			r.Status, r.Reason = Failed, "the fleet store's copy (the log before the upgrade) cannot be marked stale: "+err.Error()
			return r
		}
		r.Reason += "; its copy there (the log before the upgrade) is marked stale"
		return r
	}
	if held.SyncHost == "" {
		return stale("not carried: this host released the session, which is written through the fleet store now")
	}
	l, err := readV4(ctx, b, e, s.src.Tuning.N())
	if err != nil {
		if eventstore.Classify(err) == eventstore.KindIO {
			r.Status, r.Reason = Failed, "this host's store cannot be read: "+err.Error()
			return r
		}
		return stale("its v4 log is refused: " + err.Error())
	}
	raw, err := s.dst.ReadRaw(ctx, e.ID)
	if err != nil {
		r.Status, r.Reason = Failed, "the fleet store cannot be read: "+err.Error()
		return r
	}
	if why := continuesV0(raw, l); why != "" {
		return stale("not carried: " + why)
	}
	rev, err := s.dst.Supersede(ctx, s.opts.Host, e.ID, held.Revision, l.header, l.rows)
	if err != nil {
		r.Status, r.Reason, r.busy = refusedOrFailed(err)
		return r
	}
	r.Status, r.From, r.To, r.Lines, r.Events = Copied, 0, int64(len(l.rows)), len(l.rows), int64(len(l.rows))
	for _, row := range l.rows {
		r.Bytes += int64(len(row))
	}
	r.Reason = fmt.Sprintf("carried as format generation v4 (the harness upgraded it): its v4 log holds the %d events of the v0 log the fleet store held, which is kept there (table kept, kind superseded)", held.NextSeq)
	if l.torn > 0 {
		r.Reason += fmt.Sprintf("; %d bytes after the last complete row were left behind", l.torn)
	}
	s.mu.Lock()
	s.proofs[e.ID] = proof{rev: rev, next: r.To}
	s.mu.Unlock()
	return r
}

// upgradeRenames are the v0 event types the harness's migration renames on the way to v4 (v2→v3).
var upgradeRenames = map[string]string{
	"tool/code-dispatch":       "tool/ptc-dispatch",
	"tool/code-dispatch-start": "tool/ptc-dispatch-start",
}

// upgradeKey is what an event keeps through the harness's v0→v4 migration, and so what a v0 event and
// its v4 successor are compared on: the type (renamed as the migration renames it), the time, and the
// turn, step and tool call id it names. The seq is not kept (v2 renumbers densely once the chunks are
// folded), nor the data (sources become producer-owned, tool results tool-role messages, the system
// prompt system/message events), so neither is compared.
type upgradeKey struct {
	typ, time, turn, step, callID string
}

func keyOf(e event.Event) upgradeKey {
	typ := e.Type
	if n, ok := upgradeRenames[typ]; ok {
		typ = n
	}
	k := upgradeKey{typ: typ}
	if t, ok := e.Member("time"); ok {
		k.time = string(t)
	}
	if d, ok := e.Member("data"); ok {
		for _, m := range []struct {
			key string
			to  *string
		}{{"turn", &k.turn}, {"step", &k.step}, {"callId", &k.callID}} {
			if v, ok := event.Lookup(d, m.key); ok {
				*m.to = string(v)
			}
		}
	}
	return k
}

// continuesV0 checks that a v4 log holds the v0 log the fleet store holds (raw: its JSONL text, header
// line first): the same session (id, createdAt, cwd, parent), and every v0 event but the assistant chunks
// the migration folds into their messages found in the v4 events, in order, by upgradeKey — events the
// migration or a later harness added may lie between. It says what fails ("" when none).
func continuesV0(raw []byte, l *v4Log) string {
	nl := bytes.IndexByte(raw, '\n')
	if nl < 0 {
		return "the fleet store's copy has no header"
	}
	h0, err := event.ParseHeaderLine(raw[:nl+1])
	if err != nil {
		return "the fleet store's copy has a header that does not read: " + err.Error()
	}
	gh, err := generation.ParseHeader(4, l.header)
	if err != nil {
		return "its v4 header does not read: " + err.Error()
	}
	h4 := jsonl.LaterHeader(gh)
	str := func(v *event.Value) string {
		if v == nil {
			return ""
		}
		return string(event.Stringify(*v))
	}
	if h0.ID != h4.ID || h0.CreatedAt != h4.CreatedAt || str(h0.Cwd) != str(h4.Cwd) || str(h0.ParentSession) != str(h4.ParentSession) {
		return "its v4 header names another session (id, createdAt, cwd or parent) than the fleet store's copy"
	}
	j := 0
	for rest := raw[nl+1:]; len(rest) > 0; {
		end := bytes.IndexByte(rest, '\n')
		if end < 0 {
			end = len(rest)
		}
		ln := rest[:end]
		rest = rest[min(end+1, len(rest)):]
		canon, err := event.Canonical(ln)
		if err != nil {
			return "a line of the fleet store's copy does not read: " + err.Error()
		}
		evs, _, err := event.DecodeStored(canon)
		if err != nil {
			return "a line of the fleet store's copy does not read: " + err.Error()
		}
		for _, e := range evs {
			if e.Type == "assistant/chunk" {
				continue
			}
			k := keyOf(e)
			for j < len(l.events) && keyOf(l.events[j]) != k {
				j++
			}
			if j == len(l.events) {
				return fmt.Sprintf("the fleet store's event at seq %d (%s, time %s) is not in the v4 log: it is not a continuation of the copy there", e.Seq, e.Type, k.time)
			}
			j++
		}
	}
	return ""
}
