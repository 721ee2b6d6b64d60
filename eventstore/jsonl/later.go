package jsonl

import (
	"bytes"
	"errors"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
)

// Sessions of the later format generations the harness writes (v2 from dsh-v0.1.3-alpha, v3 from
// dsh-v0.1.5-alpha.1) are read with package generation, which decodes and validates them as the harness's
// published codec does; this file binds that to the store: the artifact read between two equal fstats,
// its committed length, its header and identity. Writes stay v0's: requireWritable refuses them.

// readsGeneration reports whether this package reads a session whose current generation is g.
func readsGeneration(g Generation) bool {
	return g == ReadGeneration || (g >= 2 && g <= generation.Latest)
}

// loadLater reads the artifact of a session whose current generation is g (2, 3 or 4).
func (b *Backend) loadLater(path string, g GenerationFile) (*eventstore.Prefix, eventstore.Artifact, error) {
	// The harness checks that the header states the file name's version before anything else of the file
	// (checkLaterHeader). The header is read here from the artifact's bytes, read once: opening the file a
	// second time for its header was a tenth of a small session's load.
	buf, art, err := b.readArtifact(path)
	if err != nil {
		if herr := b.laterHeaderAt(path, g); herr != nil {
			return nil, art, herr
		}
		return nil, art, err
	}
	head, _, err := b.headerIn(buf, true)
	if err == nil {
		err = laterVersionRefusal(head, g, path)
	}
	if err != nil {
		return nil, art, err
	}
	// the v4 backend restores with recovery 'recoverable' (a damaged row ends the log unless a later
	// turn/end proves it committed); the releases before it were read as their decode tool reads them
	rec := generation.Strict
	if g.Gen >= 4 {
		rec = generation.Recoverable
	}
	a, err := generation.DecodeWith(buf, generation.Options{Generation: int(g.Gen), Compressed: g.Compression == Zstd,
		Recovery: rec, MaxFrameBytes: b.maxFrame, TornPrefix: DecodeTornPrefix, Workers: b.tuning.N()})
	if err != nil {
		return nil, art, laterRefusal(path, err)
	}
	budget := eventstore.Budget{Limit: b.maxSession} // the same bound a v0 load keeps to, counted once decoded
	if err := budget.Add(a.Events); err != nil {
		return nil, art, err
	}
	p := &eventstore.Prefix{Header: laterHeader(a.Header), Events: a.Events, Generation: int(g.Gen)}
	if g.Gen == 4 {
		closers, err := a.Repair()
		p.Later = &eventstore.LaterLog{Header: a.Header, Cut: a.InheritedEventCount, Closers: closers, RepairErr: err,
			Restored: a}
	}
	if n := int64(len(buf)); a.Committed < n && g.Compression == None {
		// a torn last line, as in a v0 log: excluded from every view, kept in raw.jsonl
		p.Torn = &eventstore.Torn{TruncateTo: a.Committed, Bytes: n - a.Committed}
	} else if a.Committed < art.Size && g.Compression == Zstd {
		p.Torn = &eventstore.Torn{TruncateTo: a.Committed, Bytes: art.Size - a.Committed, Recovered: a.TornRecovered}
	}
	return p, art, nil
}

// laterHeader is LaterHeader.
func laterHeader(h generation.Header) event.Header { return LaterHeader(h) }

// LaterHeader is the header of a later generation as the rest of dshfs reads headers; Meta gives the
// codec's logical header byte for byte. A fleet store holding a v4 session reads its header so too.
func LaterHeader(h generation.Header) event.Header {
	str := func(s *string) *event.Value {
		if s == nil {
			return nil
		}
		v := event.String(*s)
		return &v
	}
	return event.Header{Version: float64(h.Version), ID: h.ID, CreatedAt: h.CreatedAt, DelegationDepth: h.DelegationDepth,
		Cwd: str(h.Cwd), ParentSession: str(h.ParentSession), Origin: str(h.Origin), AgentPreset: str(h.AgentPreset),
		Logical: h.Raw}
}

// laterHeaderRecord parses the header record (its first line, decoded) of a later generation's artifact
// for the listing.
func laterHeaderRecord(rec []byte, g Generation) (event.Header, error) {
	h, err := generation.ParseHeader(int(g), bytes.TrimSuffix(rec, []byte("\n")))
	if err != nil {
		return event.Header{}, err
	}
	return laterHeader(h), nil
}

// laterRefusal classifies what the codec refused: a generation or feature it marks unsupported is an
// unsupported session, anything else corruption of the log; the text is the codec's, naming the file.
func laterRefusal(path string, err error) error {
	var u interface{ Unsupported() bool }
	if errors.As(err, &u) && u.Unsupported() {
		return &eventstore.UnsupportedError{Message: err.Error() + " (raw log: " + path + ")", Path: path}
	}
	return errors.New(err.Error() + " (raw log: " + path + ")")
}
