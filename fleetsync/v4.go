package fleetsync

import (
	"bytes"
	"context"
	"fmt"
	"io"
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
}

// readV4 reads the v4 artifact of e: its complete frames (zstd; a torn final frame is left for a later
// pass, as a v0 sync leaves a torn line) or lines (raw), restored with the v4 rules.
func readV4(ctx context.Context, b artifactOpener, e eventstore.Entry, workers int) (*v4Log, error) {
	f, art, err := b.OpenArtifact(ctx, e.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf, err := io.ReadAll(io.NewSectionReader(f, 0, art.Size))
	if err != nil {
		return nil, &eventstore.IOError{Err: err}
	}
	zstd := b.Compression() == jsonl.Zstd
	var text []byte // the plaintext of the complete frames (zstd) or lines (raw)
	var torn int64
	if zstd {
		frames, _, err := jsonl.ScanFrames(buf, 0)
		if err != nil {
			return nil, &corruptError{err.Error()}
		}
		end := int64(0)
		for _, fr := range frames {
			t, err := jsonl.RawText(buf[fr.Start:fr.End])
			if err != nil {
				return nil, &corruptError{err.Error()}
			}
			text = append(text, t...)
			end = fr.End
		}
		torn = int64(len(buf)) - end
		buf = buf[:end]
	} else {
		n := bytes.LastIndexByte(buf, '\n') + 1
		torn = int64(len(buf) - n)
		buf = buf[:n]
		text = buf
	}
	a, err := generation.DecodeWith(buf, generation.Options{Generation: 4, Compressed: zstd, Recovery: generation.Recoverable,
		MaxFrameBytes: generation.DefaultMaxFrameBytes, Workers: workers})
	if err != nil {
		return nil, &corruptError{err.Error()}
	}
	l := &v4Log{events: a.Events}
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
	l.torn = torn + int64(len(rest))
	// the fleet store restores the rows as this raw text: it must restore to the very same events
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

// v4Reader reads a JSONL store's v4 artifacts whole, on every change (no cursor: which rows are the log
// is the restore's answer over the whole file).
type v4Reader struct {
	b       artifactOpener
	workers int
}

func (v4Reader) resumes(context.Context, eventstore.Entry, *cursor) bool { return false }

func (r v4Reader) read(ctx context.Context, e eventstore.Entry, _ *cursor, _ knownLine, header func([]byte) error, emit func(line) error) (readResult, error) {
	l, err := readV4(ctx, r.b, e, r.workers)
	if err != nil {
		return readResult{}, err
	}
	res := readResult{torn: l.torn}
	if err := header(l.header); err != nil {
		return res, stopped(err)
	}
	for i, row := range l.rows {
		if err := emit(line{raw: row, first: int64(i), last: int64(i), events: 1}); err != nil {
			return res, stopped(err)
		}
	}
	return res, nil
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
