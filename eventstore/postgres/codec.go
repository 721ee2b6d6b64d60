package postgres

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/klauspost/compress/zstd"
)

// CompressFrom is the compression rule of the SQLite codec, applied to whole lines: a line of this many
// bytes or more is stored as a zstd frame when that is smaller.
const CompressFrom = 4096

var (
	encOnce sync.Once
	enc     *zstd.Encoder
	dec     *zstd.Decoder
)

func codecs() (*zstd.Encoder, *zstd.Decoder) {
	encOnce.Do(func() {
		enc, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		dec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<34))
	})
	return enc, dec
}

// storedLine is one events row to insert.
type storedLine struct {
	seq, lastSeq, time int64
	last               int64 // the time of the line's last event (a packed row's last member's)
	typ                string
	line               []byte // what the row holds: the line, or its zstd frame
	compressed         bool
	size               int64 // the line's own length (uncompressed), for sessions.bytes
}

// encodeLine describes a complete stored line (no LF) as its row: its seqs, type and time read from the
// decoded line (a packed chunk row spans its members' seqs), the bytes compressed when that pays. A line
// that does not decode, or whose events carry no seq, cannot be a row: the primary key is its seq.
func encodeLine(line []byte) (storedLine, error) {
	canon, err := event.Canonical(line)
	if err != nil {
		return storedLine{}, fmt.Errorf("line is not JSON: %w", err)
	}
	evs, row, err := event.DecodeStored(canon)
	if err != nil {
		return storedLine{}, err
	}
	if len(evs) == 0 {
		return storedLine{}, errors.New("line holds no event")
	}
	for _, e := range evs {
		if e.Seq < 0 {
			return storedLine{}, errors.New("an event of the line has no valid seq")
		}
	}
	head, err := event.NewEvent(canon)
	if err != nil {
		return storedLine{}, err
	}
	s := storedLine{seq: evs[0].Seq, lastSeq: evs[len(evs)-1].Seq, typ: head.Type, size: int64(len(line))}
	timeKey := "time"
	if row {
		timeKey = "time0"
	}
	if tok, ok := event.Lookup(canon, timeKey); ok {
		if f, err := strconv.ParseFloat(string(tok), 64); err == nil && event.IsSafeInteger(f) {
			s.time = int64(f)
		}
	}
	s.last = s.time
	if tok, ok := event.Lookup(evs[len(evs)-1].Raw, "time"); ok {
		if f, err := strconv.ParseFloat(string(tok), 64); err == nil && event.IsSafeInteger(f) {
			s.last = int64(f)
		}
	}
	if s.typ == "" {
		s.typ = "?"
	}
	s.line, s.compressed = compress(line)
	return s, nil
}

// compress returns the bytes a row stores for line: a zstd frame when the line is CompressFrom bytes or
// more and the frame is smaller, else the line itself.
func compress(line []byte) ([]byte, bool) {
	if len(line) < CompressFrom {
		return line, false
	}
	e, _ := codecs()
	z := e.EncodeAll(line, make([]byte, 0, len(line)/2))
	if len(z) >= len(line) {
		return line, false
	}
	return z, true
}

// decompress returns a row's line; limit (0: none) bounds a compressed line's size, so that a hostile
// frame cannot make a read allocate without bound.
func decompress(data []byte, compressed bool, limit int64) ([]byte, error) {
	if !compressed {
		return data, nil
	}
	_, d := codecs()
	if limit > 0 {
		if h := (zstd.Header{}); h.Decode(data) == nil && h.HasFCS && h.FrameContentSize > uint64(limit) {
			return nil, fmt.Errorf("compressed line of %d bytes is over the %d-byte limit", h.FrameContentSize, limit)
		}
	}
	out, err := d.DecodeAll(data, nil)
	if err != nil {
		return nil, fmt.Errorf("compressed line does not decode: %w", err)
	}
	if limit > 0 && int64(len(out)) > limit {
		return nil, fmt.Errorf("compressed line of %d bytes is over the %d-byte limit", len(out), limit)
	}
	if bytes.IndexByte(out, '\n') >= 0 {
		return nil, errors.New("compressed line holds a line feed")
	}
	return out, nil
}
