package generation

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// The zstd container (RFC 8878) as the harness writes a compressed artifact: standard frames simply
// concatenated, the first holding only the header line. Only the structure needed to tell complete frames
// from a torn final one is read here; decompression is the library's.
const (
	zstdMagic = 0xFD2FB528
	// Frame_Header_Descriptor bits 3 (reserved) and 4 (unused) must be zero.
	descriptorReserved  = 0x18
	blockTypeRLE        = 1
	blockTypeCompressed = 2
	blockTypeReserved   = 3
	// libzstd's default window limit (windowLog 27): Node's decoder refuses larger windows, so a frame
	// needing one is no artifact the harness could read.
	maxWindow = 1 << 27
)

var zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
	d, err := zstd.NewReader(nil, zstd.WithDecoderMaxWindow(maxWindow), zstd.WithDecoderConcurrency(0))
	if err != nil {
		panic("generation: zstd decoder options rejected: " + err.Error())
	}
	return d
})

// blockMax is the most one block regenerates (libzstd's ZSTD_BLOCKSIZE_MAX).
const blockMax = 128 << 10

// frameInfo is what the structural scan learns of one frame.
type frameInfo struct {
	end   int    // offset just past the frame; -1 when the data ends inside it (a torn frame)
	bound uint64 // the most its blocks can decode to
	fcs   uint64 // Frame_Content_Size when present
	fcsOK bool
}

// scanFrame reads the structure of the frame starting at b[start]. Bad magic, reserved bits and reserved
// block types are corruption with the v0 reader's texts.
func scanFrame(b []byte, start int) (frameInfo, error) {
	torn := frameInfo{end: -1}
	p := start
	if len(b)-p < 4 {
		return torn, nil
	}
	if binary.LittleEndian.Uint32(b[p:]) != zstdMagic {
		return torn, &CorruptError{Message: "corrupt Zstandard session log: invalid frame magic at byte " + strconv.Itoa(p)}
	}
	p += 4
	if p >= len(b) {
		return torn, nil
	}
	d := b[p]
	if d&descriptorReserved != 0 {
		return torn, &CorruptError{Message: "corrupt Zstandard session log: reserved frame-header bit at byte " + strconv.Itoa(p)}
	}
	p++
	single := d&0x20 != 0
	if !single {
		p++ // Window_Descriptor
	}
	p += []int{0, 1, 2, 4}[d&3] // Dictionary_ID
	fcsLen := 0
	switch flag := d >> 6; {
	case flag != 0:
		fcsLen = 1 << flag
	case single:
		fcsLen = 1
	}
	var info frameInfo
	if fcsLen > 0 {
		if p+fcsLen > len(b) {
			return torn, nil
		}
		var v [8]byte
		copy(v[:], b[p:p+fcsLen])
		info.fcs, info.fcsOK = binary.LittleEndian.Uint64(v[:]), true
		if fcsLen == 2 {
			info.fcs += 256 // RFC 8878: the two-byte field is offset by 256
		}
		p += fcsLen
	}
	for {
		if p+3 > len(b) {
			return torn, nil
		}
		h := int(b[p]) | int(b[p+1])<<8 | int(b[p+2])<<16
		size := h >> 3
		switch (h >> 1) & 3 {
		case blockTypeReserved:
			return torn, &CorruptError{Message: "corrupt Zstandard session log: reserved block type at byte " + strconv.Itoa(p)}
		case blockTypeRLE:
			info.bound += uint64(size)
			size = 1
		case blockTypeCompressed:
			info.bound += blockMax
		default:
			info.bound += uint64(size)
		}
		p += 3 + size
		if p > len(b) {
			return torn, nil
		}
		if h&1 != 0 {
			break
		}
	}
	if d&0x04 != 0 {
		p += 4 // Content_Checksum
	}
	if p > len(b) {
		return torn, nil
	}
	info.end = p
	return info, nil
}

// frameSlack is the room a frame's output buffer keeps past its end: a block's most output (128 KiB) and
// the decoder's over-allocation, so that the decoder takes its fast path; workerBuffer is the size of a
// worker's output buffer, when its frames' text is that large; textGuess is how many times its compressed
// size a log's text is taken to be (session logs compress 2–4 times); smallScratch's buffers, which a
// small artifact's frames decode into, hold such a text with the room to spare.
const (
	frameSlack   = 128<<10 + 64
	workerBuffer = 4 << 20
	textGuess    = 4
)

var smallScratch = sync.Pool{New: func() any {
	b := make([]byte, 0, 2*frameSlack+256<<10)
	return &b
}}

// unframe returns the text of a compressed artifact in segments, each a run of whole lines: the plaintext
// of its complete frames, the header frame checked to hold exactly one line. A torn final frame is left
// out whole (as the harness's raw reads leave it out); a complete frame whose text stops inside a line is
// corruption. A frame whose blocks could decode to more than maxFrame bytes (0: no cap) is refused
// before anything is decoded: a few kilobytes of RLE blocks can claim gigabytes.
func unframe(b []byte, maxFrame int64, workers int) ([][]byte, error) {
	type span struct{ start, end int }
	var frames []span
	for p := 0; p < len(b); {
		info, err := scanFrame(b, p)
		if err != nil {
			return nil, err
		}
		end := info.end
		if end < 0 {
			break
		}
		if maxFrame > 0 && info.bound > uint64(maxFrame) {
			return nil, &CorruptError{Message: "corrupt Zstandard session log: frame at byte " + strconv.Itoa(p) + " can decode to " +
				strconv.FormatUint(info.bound, 10) + " bytes, over max_frame_bytes (" + strconv.FormatInt(maxFrame, 10) + ")"}
		}
		// a content size its blocks cannot reach fails in any decoder; refused here so that a forged size
		// never makes the decoder reserve it
		if info.fcsOK && info.fcs > info.bound {
			return nil, &CorruptError{Message: "corrupt Zstandard session log: frame at byte " + strconv.Itoa(p) + " failed validation"}
		}
		frames = append(frames, span{p, end})
		p = end
	}
	if len(frames) == 0 {
		return nil, &CorruptError{Message: "empty or header-less Zstandard session log"}
	}
	// Frames decode independently: a live session's (one per batch) decode on every worker, each appended
	// to the worker's own buffer. A frame states no content size, and the decoder runs its assembly
	// sequence decoder only when the output has a block's room to spare (frameSlack), so a buffer the size
	// of each of a live session's tens of thousands of frames of a few hundred bytes would take the slow
	// path for every one of them. The buffers are the text, in segments: joining them into one would copy
	// all of it, and fault in its pages, on one thread.
	plains := make([][]byte, len(frames)) // each with its buffer's free room past it
	follows := make([]bool, len(frames))  // frame i's plaintext lies right after frame i-1's, in one buffer
	at := make([]int, len(frames))        // where a small artifact's frame lies in its worker's scratch
	errs := make([]error, len(frames))
	decode := func(lo, hi int) {
		// A large artifact's worker takes buffers of workerBuffer with a block's room to spare, one after
		// the other. A small one's decodes into a pooled scratch buffer with that room, copied out at the
		// text's size at the end: a walk decodes thousands of small sessions, for which a workerBuffer each
		// would be most of what it allocates, and a buffer of the text's size keeps the decoder off its
		// fast path.
		large := textGuess*(frames[hi-1].end-frames[lo].start) >= workerBuffer
		var buf []byte
		var scratch *[]byte
		if !large {
			scratch = smallScratch.Get().(*[]byte)
			buf = (*scratch)[:0]
			defer func() {
				*scratch = buf[:0]
				smallScratch.Put(scratch)
			}()
		}
		prevInPlace := false
		for i := lo; i < hi; i++ {
			f := frames[i]
			fresh := false
			if large && cap(buf)-len(buf) < frameSlack {
				// the frames already decoded keep the old buffer
				buf, fresh = make([]byte, 0, workerBuffer), true
			}
			// decoded into the buffer's free end: a frame too large for it gets memory of its own, and
			// nothing decoded before is copied along
			free := buf[len(buf):]
			out, err := zstdDecoder().DecodeAll(b[f.start:f.end], free)
			if err != nil {
				errs[i] = err
				return
			}
			plains[i], at[i] = out, -1
			inPlace := len(out) > 0 && len(out) <= cap(free) && &out[:1][0] == &free[:1][0]
			if inPlace {
				follows[i] = prevInPlace && !fresh
				at[i] = len(buf)
				buf = buf[:len(buf)+len(out)]
			}
			prevInPlace = inPlace
		}
		if scratch != nil {
			// the frames decoded in the scratch buffer, moved to memory of their own at its size
			text := make([]byte, len(buf))
			copy(text, buf)
			for i := lo; i < hi; i++ {
				if at[i] >= 0 {
					plains[i] = text[at[i] : at[i]+len(plains[i]) : len(text)]
				}
			}
		}
	}
	workers = min(max(workers, 1), len(frames))
	if workers == 1 {
		decode(0, len(frames))
	} else {
		var wg sync.WaitGroup
		per := (len(frames) + workers - 1) / workers
		for lo := 0; lo < len(frames); lo += per {
			wg.Add(1)
			go func() {
				defer wg.Done()
				decode(lo, min(lo+per, len(frames)))
			}()
		}
		wg.Wait()
	}
	var segs [][]byte
	inPlace := false               // the last segment ends where the last frame's plaintext ends, in its buffer
	for i, plain := range plains { // the first failure in the artifact's order, as a decode in order finds it
		if errs[i] != nil {
			return nil, &CorruptError{Message: "corrupt Zstandard session log: frame at byte " + strconv.Itoa(frames[i].start) + " failed validation"}
		}
		if i == 0 && (len(plain) == 0 || bytes.IndexByte(plain, '\n') != len(plain)-1) {
			return nil, &CorruptError{Message: "corrupt Zstandard session log: first frame is not exactly one header line"}
		}
		switch n := len(segs); {
		case len(plain) == 0:
			inPlace = false
		case follows[i] && inPlace:
			segs[n-1] = segs[n-1][:len(segs[n-1])+len(plain)]
		case n > 0 && !endsLine(segs[n-1]):
			// a line that runs on into the next frame (the harness ends every batch's frame on a line's
			// end, but a decoder takes any cut): its segments are joined
			segs[n-1] = append(segs[n-1][:len(segs[n-1]):len(segs[n-1])], plain...)
			inPlace = false
		default:
			segs = append(segs, plain)
			inPlace = true
		}
	}
	if len(segs) == 0 || !endsLine(segs[len(segs)-1]) {
		return nil, &CorruptError{Message: "corrupt Zstandard session log: complete frame contains a torn JSONL record"}
	}
	for i, seg := range segs {
		if cap(seg)-len(seg) > len(seg)/2 {
			// a buffer guessed too large, or the last of a worker's: the text is kept as long as its
			// session is, so it is kept at its size (a small log's text is a copy of a few kilobytes)
			segs[i] = bytes.Clone(seg)
		} else {
			segs[i] = seg[:len(seg):len(seg)]
		}
	}
	return segs, nil
}

// endsLine reports whether b ends with a line's LF.
func endsLine(b []byte) bool { return len(b) > 0 && b[len(b)-1] == '\n' }

// textLen is the length of a text held in segments.
func textLen(segs [][]byte) int {
	n := 0
	for _, s := range segs {
		n += len(s)
	}
	return n
}
