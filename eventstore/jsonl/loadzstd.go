package jsonl

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
)

var (
	errZstdHeaderless  = errors.New("empty or header-less Zstandard session log")
	errZstdHeaderFrame = errors.New("corrupt Zstandard session log: first frame is not exactly one header line")
	errZstdTornRecord  = errors.New("corrupt Zstandard session log: complete frame contains a torn JSONL record")
)

func checkHeaderFrame(plain []byte) error {
	if len(plain) == 0 || plain[len(plain)-1] != '\n' || bytes.IndexByte(plain, '\n') != len(plain)-1 {
		return errZstdHeaderFrame
	}
	return nil
}

// zstdPieceBytes is how much compressed input one decoding job takes at least. The harness writes a frame
// per flush, and a large session has tens of thousands of small ones (the 500k-event bench session: 32,611
// frames of about 430 bytes); a job per frame spent more on handing frames between goroutines than on
// decoding them.
var zstdPieceBytes int64 = 64 << 10

// zstdPieceText bounds the plaintext a piece's frames can regenerate, by what their blocks say (128 KiB for
// a compressed block, whatever it holds: a harness frame of 1 KB counts 128 KiB). A piece is decoded whole
// before its lines are read, and small frames of RLE blocks expand a thousandfold: without it, 64 KB of
// ten-byte frames could make a piece of 800 MB. With it a piece holds at most this much, or one frame of at
// most max_frame_bytes (256 MiB by default) as before; the harness's frames still go 128 to a piece.
const zstdPieceText = 16 << 20

// framePieces groups consecutive frames of b into pieces of at least min compressed bytes (the last may be
// smaller), ending a piece early where its frames could regenerate more than maxText bytes; a frame that
// alone reaches either bound is a piece of its own.
func framePieces(b []byte, frames []Frame, min int64, maxText uint64) [][]Frame {
	var pieces [][]Frame
	start, size, text := 0, int64(0), uint64(0)
	for i, f := range frames {
		bound := maxText // a frame whose blocks do not read is decoded (and refused) alone
		if f.Start >= 0 && f.Start <= f.End && f.End <= int64(len(b)) {
			if _, _, n, err := scanFrameBound(b[f.Start:f.End], f.Start); err == nil {
				bound = n
			}
		}
		if i > start && text+bound > maxText { // the frames before it are a piece already
			pieces = append(pieces, frames[start:i])
			start, size, text = i, 0, 0
		}
		size += f.End - f.Start
		text += bound
		if size >= min || text >= maxText || i == len(frames)-1 {
			pieces = append(pieces, frames[start:i+1])
			start, size, text = i+1, 0, 0
		}
	}
	return pieces
}

// decodePiece decodes a piece's frames, checks their lines frame by frame, and predecodes their text as
// one chunk. A frame that fails ends the piece: the chunk holds the frames before it and the failure, so
// that the scanner applies those first, as it would frame by frame.
func (b *Backend) decodePiece(buf []byte, piece []Frame, packed bool) chunk {
	if len(piece) == 1 {
		if _, bound, err := checkFrame(buf, piece[0], b.maxFrame); err == nil && bound >= zstdPieceText {
			return b.decodeStreamed(buf, piece[0], packed)
		}
	}
	scratch := frameScratch.Get().(*[]byte)
	out := (*scratch)[:0]
	var failed error
	for _, f := range piece {
		before := len(out)
		var err error
		out, err = appendFrame(out, buf, f, b.maxFrame)
		if err == nil {
			err = b.checkLines(out[before:], 0)
		}
		if err != nil {
			out, failed = out[:before], err
			break
		}
	}
	c := predecode(out, true, packed) // the events keep only copies: the scratch buffer goes back to the pool
	putScratch(scratch, out)
	c.err = failed
	return c
}

// decodeStreamed is decodePiece for a piece of one large frame: the frame is decoded a piece at a time
// (streamFrame) and each run of complete lines predecoded as it arrives, so what the chunk costs is its
// events and at most one incomplete line (bounded by max_line_bytes), never the frame's whole text. A
// frame of 200 MB of empty lines then costs a megabyte, where decoding it whole cost its size twice over.
func (b *Backend) decodeStreamed(buf []byte, f Frame, packed bool) chunk {
	acc := chunk{events: chunkEvents.Get().(*[]event.Event)}
	// the frame's events are held here before the scanner counts them: count them here too
	budget := eventstore.Budget{Limit: b.maxSession}
	var carry []byte // the incomplete line after the last LF seen
	lines := 0       // complete lines so far, for line numbers in errors
	err := streamFrame(buf, f, b.maxFrame, func(p []byte) error {
		last := bytes.LastIndexByte(p, '\n')
		if last < 0 {
			carry = append(carry, p...)
			if b.maxLine > 0 && int64(len(carry)) > b.maxLine {
				return fmt.Errorf("corrupt session log: line %d is over %d bytes, over max_line_bytes (%d)", lines+1, len(carry), b.maxLine)
			}
			return nil
		}
		text := append(carry, p[:last+1]...)
		if err := b.checkLines(text, lines); err != nil {
			return err
		}
		lines += bytes.Count(text, []byte{'\n'})
		d := predecode(text, true, packed) // owned: text is reused below
		if err := budget.AddPacked(*d.events, d.rows); err != nil {
			d.release()
			return err
		}
		acc.add(d)
		carry = append(text[:0], p[last+1:]...)
		return nil
	})
	if err != nil {
		acc.release()
		return chunk{events: chunkEvents.Get().(*[]event.Event), err: err}
	}
	acc.tail = bytes.Clone(carry)
	acc.size += len(carry)
	return acc
}

// scanZstd scans a zstd artifact's frames, reporting the header and the events to progress (nil: none)
// as it goes (eventstore.ProgressiveBackend). When buf is mem's (not nil), the pages of the frames
// scanned go back as the scan passes them; nothing it returns aliases buf.
func (b *Backend) scanZstd(buf []byte, path string, progress eventstore.ProgressSink, mem *offHeap) (*eventstore.Prefix, error) {
	frames, tornStart, err := ScanFrames(buf, 0)
	if err != nil {
		return nil, err
	}
	if len(frames) == 0 {
		return nil, errZstdHeaderless
	}
	first, err := decodeFrame(buf, frames[0], b.maxFrame)
	if err != nil {
		return nil, err
	}
	if err := checkHeaderFrame(first); err != nil {
		return nil, err
	}
	h, err := event.ParseHeaderLine(first)
	if err != nil {
		return nil, err
	}
	s := newScanner(int64(len(first)))
	s.Budget.Limit = b.maxSession
	if progress != nil {
		progress.Header(h, path)
	}
	packed := eventstore.WantsPacked(progress)
	pieces := framePieces(buf, frames[1:], zstdPieceBytes, zstdPieceText)
	done := 0
	err = decodeParallel(b.tuning.N(), len(pieces), func(i int) chunk {
		return b.decodePiece(buf, pieces[i], packed)
	}, func(c chunk) error {
		last := pieces[done]
		s.share = float64(last[len(last)-1].End) / float64(len(buf))
		done++
		if err := s.writeChunk(c); err != nil {
			return err
		}
		if done < len(pieces) {
			// every piece before this one is decoded, and the workers read only later pieces' frames
			mem.releaseBefore(pieces[done][0].Start)
		}
		if progress != nil {
			// the scanner only ever appends: a gap or a bad line ends the list there, and growing it
			// copies into a new array (scanner.grow)
			progress.Events(s.Events, s.Rows)
		}
		return c.err // after the lines of the frames before the failing one, as frame by frame
	})
	if err != nil {
		return nil, err
	}
	if s.committed != s.input {
		return nil, errZstdTornRecord
	}
	p := &eventstore.Prefix{Header: h}
	if tornStart >= 0 {
		complete := len(s.Events)
		torn := buf[tornStart:]
		if mem != nil {
			torn = bytes.Clone(torn) // the lines it decodes may alias it, and the mapping goes
		}
		if err := s.write(DecodeTornPrefix(torn)); err != nil {
			return nil, err
		}
		p.Torn = &eventstore.Torn{TruncateTo: tornStart, Bytes: int64(len(buf)) - tornStart, Recovered: len(s.Events) - complete}
	}
	p.Events, p.RowMembers, p.Packed = s.list(), s.Rows, s.Packed
	return p, nil
}
