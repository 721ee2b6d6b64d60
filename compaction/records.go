package compaction

import (
	"fmt"
	"strconv"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/surface"
)

// Event types of the compaction vocabulary (docs/harness.md#compaction-transactions).
const (
	TypeStart   = "compaction/start"
	TypeSummary = "compaction/summary"
	TypeEnd     = "compaction/end"
	TypePrune   = "compaction/prune"
)

// endSeedType is the lifecycle boundary that makes older unmatched starts stale (§A.5).
const endSeedType = "session/end-seed"

// State of one compaction transaction; the package doc defines each.
type State string

// The four transaction states.
const (
	Complete State = "complete"
	Failed   State = "failed"
	Open     State = "open"
	Stale    State = "stale"
)

// Record is one compaction transaction, keyed by compactionId. Seqs are -1 when that event is absent;
// the event.Value fields hold what the log recorded (null when absent), see the package doc.
type Record struct {
	CompactionID string
	State        State

	Turn            event.Value
	SourceCommandID event.Value

	StartSeq, SummarySeq, ReplacementSeq, EndSeq int64

	ShadowedRange      event.Value
	ShadowedSeqs       event.Value
	ShadowedTokenCount event.Value

	// Error is the end's `error` member; HasError tells a recorded `"error":null` (a failure) from no
	// error key at all.
	Error    event.Value
	HasError bool
}

// Prune is one compaction/prune event and the tool/result replacement it prices (the next event).
// ReplacementSeq is -1 when that event is not a replacing tool/result.
type Prune struct {
	Seq, ReplacementSeq int64

	ShadowedRange      event.Value
	ShadowedSeqs       event.Value
	ShadowedTokenCount event.Value
}

// JSON is the record as one compact JSON object in the fixed key order the package doc documents.
func (r Record) JSON() []byte {
	b := make([]byte, 0, 256)
	b = append(b, `{"compactionId":`...)
	b = event.AppendQuote(b, r.CompactionID)
	b = append(b, `,"state":`...)
	b = event.AppendQuote(b, string(r.State))
	b = append(b, `,"turn":`...)
	b = event.AppendStringify(b, r.Turn)
	b = append(b, `,"sourceCommandId":`...)
	b = event.AppendStringify(b, r.SourceCommandID)
	b = append(b, `,"startSeq":`...)
	b = appendSeq(b, r.StartSeq)
	b = append(b, `,"summarySeq":`...)
	b = appendSeq(b, r.SummarySeq)
	b = append(b, `,"replacementSeq":`...)
	b = appendSeq(b, r.ReplacementSeq)
	b = append(b, `,"endSeq":`...)
	b = appendSeq(b, r.EndSeq)
	b = append(b, `,"shadowedRange":`...)
	b = event.AppendStringify(b, r.ShadowedRange)
	b = append(b, `,"shadowedSeqs":`...)
	b = event.AppendStringify(b, r.ShadowedSeqs)
	b = append(b, `,"shadowedTokenCount":`...)
	b = event.AppendStringify(b, r.ShadowedTokenCount)
	b = append(b, `,"error":`...)
	b = event.AppendStringify(b, r.Error)
	return append(b, '}')
}

// JSON is the prune as one compact JSON object in the fixed key order the package doc documents.
func (p Prune) JSON() []byte {
	b := make([]byte, 0, 128)
	b = append(b, `{"seq":`...)
	b = appendSeq(b, p.Seq)
	b = append(b, `,"replacementSeq":`...)
	b = appendSeq(b, p.ReplacementSeq)
	b = append(b, `,"shadowedRange":`...)
	b = event.AppendStringify(b, p.ShadowedRange)
	b = append(b, `,"shadowedSeqs":`...)
	b = event.AppendStringify(b, p.ShadowedSeqs)
	b = append(b, `,"shadowedTokenCount":`...)
	b = event.AppendStringify(b, p.ShadowedTokenCount)
	return append(b, '}')
}

func appendSeq(b []byte, seq int64) []byte {
	if seq < 0 {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, seq, 10)
}

// Records returns one Record per compactionId in order of their compaction/start (or first marker)
// seq, i.e. in log order of the first compaction/start, /summary or /end carrying the id.
//
// It fails when a marker cannot be attributed to exactly one transaction: its data is not an object
// with a string compactionId, or a second start, summary or end repeats an id (harness ids are fresh
// UUIDs, so only a hand-made log does this). fold may be nil; the shadowed range and seqs then come
// from the summaries alone.
func Records(events []event.Event, fold *surface.Result) ([]Record, error) {
	var recs []Record
	var srcRanks []int
	byID := map[string]int{}
	lastEndSeed := int64(-1)
	newestMarker := -1 // index into recs of the newest compaction/start or /end (any id)
	newestIsStart := false
	for i, e := range events {
		switch e.Type {
		case endSeedType:
			lastEndSeed = e.Seq
			continue
		case TypeStart, TypeSummary, TypeEnd:
		default:
			continue
		}
		id, err := compactionID(e)
		if err != nil {
			return nil, err
		}
		k, ok := byID[id]
		if !ok {
			k = len(recs)
			byID[id] = k
			recs = append(recs, Record{CompactionID: id, StartSeq: -1, SummarySeq: -1, ReplacementSeq: -1, EndSeq: -1})
			srcRanks = append(srcRanks, 0)
		}
		if err := recs[k].add(events, i, &srcRanks[k]); err != nil {
			return nil, err
		}
		if e.Type != TypeSummary {
			newestMarker, newestIsStart = k, e.Type == TypeStart
		}
	}
	repl := replacements(fold)
	for k := range recs {
		r := &recs[k]
		if r.SummarySeq < 0 {
			r.ShadowedSeqs = event.Array()
		} else if rp, ok := repl[r.ReplacementSeq]; ok && r.ReplacementSeq >= 0 {
			r.ShadowedRange, r.ShadowedSeqs = foldShadow(rp)
		}
		r.State = r.state(lastEndSeed, newestMarker == k && newestIsStart)
	}
	return recs, nil
}

// add folds marker events[i] into r; srcRank is the rank of the marker r.SourceCommandID came from.
func (r *Record) add(events []event.Event, i int, srcRank *int) error {
	e := events[i]
	dup := func(prev int64) error {
		return fmt.Errorf("compaction: %s at seq %d repeats compactionId %s (first at seq %d)",
			e.Type, e.Seq, event.AppendQuote(nil, r.CompactionID), prev)
	}
	// sourceCommandId: the start's, else the summary's, else the end's (whichever order they came in).
	if cmd, ok, err := dataMember(e, "sourceCommandId"); err != nil {
		return err
	} else if rank := sourceRank[e.Type]; ok && rank > *srcRank {
		r.SourceCommandID, *srcRank = cmd, rank
	}
	switch e.Type {
	case TypeStart:
		if r.StartSeq >= 0 {
			return dup(r.StartSeq)
		}
		r.StartSeq = e.Seq
		turn, _, err := dataMember(e, "turn")
		if err != nil {
			return err
		}
		r.Turn = turn
	case TypeSummary:
		if r.SummarySeq >= 0 {
			return dup(r.SummarySeq)
		}
		r.SummarySeq = e.Seq
		var err error
		if r.ShadowedRange, _, err = dataMember(e, "shadowedRange"); err != nil {
			return err
		}
		if r.ShadowedSeqs, _, err = dataMember(e, "shadowedSeqs"); err != nil {
			return err
		}
		if r.ShadowedTokenCount, _, err = dataMember(e, "shadowedTokenCount"); err != nil {
			return err
		}
		if i+1 < len(events) && isReplace(events[i+1], "user/message") {
			r.ReplacementSeq = events[i+1].Seq
		}
	case TypeEnd:
		if r.EndSeq >= 0 {
			return dup(r.EndSeq)
		}
		r.EndSeq = e.Seq
		var err error
		if r.Error, r.HasError, err = dataMember(e, "error"); err != nil {
			return err
		}
		if r.StartSeq < 0 {
			if r.Turn, _, err = dataMember(e, "turn"); err != nil {
				return err
			}
		}
	}
	return nil
}

// sourceRank orders the markers whose sourceCommandId a record reports (all agree in harness logs).
var sourceRank = map[string]int{TypeEnd: 1, TypeSummary: 2, TypeStart: 3}

func (r *Record) state(lastEndSeed int64, newestIsThisStart bool) State {
	switch {
	case r.StartSeq < 0:
		return Failed
	case r.EndSeq > r.StartSeq:
		if r.HasError || r.SummarySeq < 0 || r.ReplacementSeq < 0 {
			return Failed
		}
		return Complete
	case lastEndSeed > r.StartSeq:
		return Stale
	case newestIsThisStart:
		return Open
	default:
		return Stale
	}
}

// Prunes returns one Prune per compaction/prune event, in log order. fold may be nil; the shadowed
// range and seqs then come from the prune events alone. It fails only on a record it cannot parse.
func Prunes(events []event.Event, fold *surface.Result) ([]Prune, error) {
	var out []Prune
	var repl map[int64]surface.Replacement
	for i, e := range events {
		if e.Type != TypePrune {
			continue
		}
		if repl == nil {
			repl = replacements(fold)
		}
		p := Prune{Seq: e.Seq, ReplacementSeq: -1}
		var err error
		if p.ShadowedRange, _, err = dataMember(e, "shadowedRange"); err != nil {
			return nil, err
		}
		if p.ShadowedSeqs, _, err = dataMember(e, "shadowedSeqs"); err != nil {
			return nil, err
		}
		if p.ShadowedTokenCount, _, err = dataMember(e, "shadowedTokenCount"); err != nil {
			return nil, err
		}
		if i+1 < len(events) && isReplace(events[i+1], "tool/result") {
			p.ReplacementSeq = events[i+1].Seq
			if rp, ok := repl[p.ReplacementSeq]; ok && p.ReplacementSeq >= 0 {
				p.ShadowedRange, p.ShadowedSeqs = foldShadow(rp)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// Active returns the live compaction (open state) if any — status.json's activeCompaction. The
// pointer points into records.
func Active(records []Record) *Record {
	for i := range records {
		if records[i].State == Open {
			return &records[i]
		}
	}
	return nil
}

func replacements(fold *surface.Result) map[int64]surface.Replacement {
	m := map[int64]surface.Replacement{}
	if fold == nil {
		return m
	}
	for _, rp := range fold.Replacements {
		m[rp.Seq] = rp
	}
	return m
}

func foldShadow(rp surface.Replacement) (rng, seqs event.Value) {
	rng = event.Object(event.Member{Key: "start", Value: event.Int(rp.Start)}, event.Member{Key: "end", Value: event.Int(rp.End)})
	elems := make([]event.Value, len(rp.ShadowedSeqs))
	for i, s := range rp.ShadowedSeqs {
		elems[i] = event.Int(s)
	}
	return rng, event.Array(elems...)
}

// isReplace reports whether e is a surface event of type typ joining the surface by replacement.
func isReplace(e event.Event, typ string) bool {
	if e.Type != typ {
		return false
	}
	op, ok := event.Lookup(e.Raw, "surfaceOp", "op")
	return ok && string(op) == `"replace"`
}

// dataMember parses data.<key> of e; ok is false (and v null) when data has no such member.
func dataMember(e event.Event, key string) (v event.Value, ok bool, err error) {
	raw, ok := event.Lookup(e.Raw, "data", key)
	if !ok {
		return event.Value{}, false, nil
	}
	v, err = event.Parse(raw)
	if err != nil {
		return event.Value{}, false, fmt.Errorf("compaction: %s at seq %d: data.%s: %w", e.Type, e.Seq, key, err)
	}
	return v, true, nil
}

func compactionID(e event.Event) (string, error) {
	v, ok, err := dataMember(e, "compactionId")
	if err != nil {
		return "", err
	}
	if !ok || v.Kind != event.KindString {
		return "", fmt.Errorf("compaction: %s at seq %d has no string data.compactionId", e.Type, e.Seq)
	}
	return v.Str, nil
}
