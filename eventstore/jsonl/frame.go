package jsonl

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// The zstd container of a `.jsonl.zstd` transcript (docs/harness.md#zstd-framing): RFC 8878 frames, simply
// concatenated, one per durable batch. The harness finds frame boundaries structurally (it never trusts a
// decoder to tell it where a frame ends) so that an EOF inside the last frame is a torn tail rather than
// corruption; ScanFrames reproduces that walk so both sides agree on which bytes are committed.

const (
	zstdMagic = 0xFD2FB528

	// Frame_Header_Descriptor bits (RFC 8878 §3.1.1.1.1).
	fhdChecksum      = 0x04
	fhdReserved      = 0x18 // unused bit 4 + reserved bit 3: the harness rejects either
	fhdSingleSegment = 0x20
	fhdDictIDMask    = 0x03

	blockTypeRaw      = 0
	blockTypeRLE      = 1
	blockTypeReserved = 3

	// libzstd's ZSTD_BLOCKSIZE_MAX: no block may regenerate more than this.
	maxBlockSize = 128 << 10

	// libzstd's default ZSTD_d_windowLogMax (ZSTD_WINDOWLOG_LIMIT_DEFAULT = 27): Node's decoder refuses frames
	// needing a larger window, so ours must too or we would accept logs the harness calls corrupt.
	maxDecodeWindow = 1 << 27
)

// Frame is one structurally complete zstd frame in a file: bytes [Start, End).
// Offsets are int64 because they double as file offsets (truncation points, error texts).
type Frame struct{ Start, End int64 }

// frameHeader is the part of a frame header the scanner and the torn-prefix decoder need.
type frameHeader struct {
	descriptor byte
	window     byte // Window_Descriptor; meaningful only without Single_Segment
	dictID     []byte
	fcs        uint64
	hasFCS     bool
	size       int // whole header length, magic included
}

// errTruncated marks "EOF inside this frame"; it never escapes this file.
var errTruncated = errors.New("truncated zstd frame")

// parseFrameHeader reads the header at the start of b. It returns errTruncated when b ends inside it and the
// harness's exact corruption texts (offsets relative to base) for a bad magic or reserved descriptor bits.
func parseFrameHeader(b []byte, base int64) (frameHeader, error) {
	var h frameHeader
	if len(b) < 4 {
		return h, errTruncated
	}
	if binary.LittleEndian.Uint32(b) != zstdMagic {
		return h, fmt.Errorf("corrupt Zstandard session log: invalid frame magic at byte %d", base)
	}
	if len(b) == 4 {
		return h, errTruncated
	}
	d := b[4]
	if d&fhdReserved != 0 {
		return h, fmt.Errorf("corrupt Zstandard session log: reserved frame-header bit at byte %d", base+4)
	}
	h.descriptor = d
	single := d&fhdSingleSegment != 0
	dictBytes := []int{0, 1, 2, 4}[d&fhdDictIDMask]
	fcsBytes := 0
	if flag := d >> 6; flag != 0 {
		fcsBytes = 1 << flag
	} else if single {
		fcsBytes = 1
	}
	rest := dictBytes + fcsBytes
	if !single {
		rest++
	}
	if len(b)-5 < rest {
		return h, errTruncated
	}
	p := 5
	if !single {
		h.window = b[p]
		p++
	}
	h.dictID = b[p : p+dictBytes]
	p += dictBytes
	if fcsBytes > 0 {
		h.hasFCS = true
		var v [8]byte
		copy(v[:], b[p:p+fcsBytes])
		h.fcs = binary.LittleEndian.Uint64(v[:])
		if fcsBytes == 2 {
			h.fcs += 256 // RFC 8878: the 2-byte field is offset by 256
		}
		p += fcsBytes
	}
	h.size = p
	return h, nil
}

// block is one block header as found in a frame; start is the offset of its 3-byte header within the frame.
type block struct {
	start int
	last  bool
	typ   int
	size  int // Block_Size field; for RLE the regenerated size, the payload being 1 byte
}

func (k block) payload() int {
	if k.typ == blockTypeRLE {
		return 1
	}
	return k.size
}

// end is the offset just past the block's payload.
func (k block) end() int { return k.start + 3 + k.payload() }

// readBlock reads the block header at b[p:]; it returns errTruncated if the header or its payload is cut short
// (the header itself is still returned when only the payload is missing) and the harness's text for type 3.
func readBlock(b []byte, p int, base int64) (block, error) {
	if len(b)-p < 3 {
		return block{}, errTruncated
	}
	v := int(b[p]) | int(b[p+1])<<8 | int(b[p+2])<<16
	k := block{start: p, last: v&1 != 0, typ: (v >> 1) & 3, size: v >> 3}
	if k.typ == blockTypeReserved {
		return k, fmt.Errorf("corrupt Zstandard session log: reserved block type at byte %d", base+int64(p))
	}
	if len(b)-p-3 < k.payload() {
		return k, errTruncated
	}
	return k, nil
}

// ScanFrames walks b structurally exactly as the harness's scanner does (spec §4.3): returns the complete frames,
// and tornStart = offset of an incomplete final frame (or -1 if none). Nothing is decompressed and block sizes
// are not checked against any maximum, so a frame that is structurally complete but undecodable is still listed
// (decodeFrame reports it). On an error the frames before the bad one are returned as well, for diagnostics.
// A limit > 0 stops after that many complete frames, with tornStart -1, which is what
// the listing path needs to read only the header frame.
func ScanFrames(b []byte, limit int) (frames []Frame, tornStart int64, err error) {
	off := 0
	for off < len(b) {
		end, err := scanFrame(b[off:], int64(off))
		if err == errTruncated {
			return frames, int64(off), nil
		}
		if err != nil {
			return frames, -1, err
		}
		frames = append(frames, Frame{Start: int64(off), End: int64(off + end)})
		off += end
		if limit > 0 && len(frames) == limit {
			break
		}
	}
	return frames, -1, nil
}

// scanFrame returns the length of the complete frame at the start of b.
func scanFrame(b []byte, base int64) (int, error) {
	n, _, _, err := scanFrameBound(b, base)
	return n, err
}

// scanFrameBound is scanFrame that also returns the header and the most plaintext the frame's blocks could
// regenerate (each block at most 128 KiB), so a decoder never needs to trust Frame_Content_Size for sizing.
func scanFrameBound(b []byte, base int64) (int, frameHeader, uint64, error) {
	h, err := parseFrameHeader(b, base)
	if err != nil {
		return 0, h, 0, err
	}
	p := h.size
	var bound uint64
	for {
		k, err := readBlock(b, p, base)
		if err != nil {
			return 0, h, 0, err
		}
		bound += maxBlockSize
		p = k.end()
		if k.last {
			break
		}
	}
	if h.descriptor&fhdChecksum != 0 {
		if len(b)-p < 4 {
			return 0, h, 0, errTruncated
		}
		p += 4
	}
	return p, h, bound, nil
}

// FrameError is the harness's per-frame validation failure; Cause keeps the decoder's reason for diagnostics
// while the text stays exactly the harness's.
type FrameError struct {
	Start int64
	Cause error
}

// Error is the harness's text, which names only the frame's start offset.
func (e *FrameError) Error() string {
	return fmt.Sprintf("corrupt Zstandard session log: frame at byte %d failed validation", e.Start)
}

// Unwrap exposes the decoder's reason, which the harness keeps as the error's cause.
func (e *FrameError) Unwrap() error { return e.Cause }

// decoder is shared: DecodeAll is safe for concurrent use and building one is costly.
var decoder = sync.OnceValue(func() *zstd.Decoder {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderMaxWindow(maxDecodeWindow),
		zstd.WithDecoderConcurrency(0),
	)
	if err != nil {
		panic("jsonl: zstd decoder options rejected: " + err.Error())
	}
	return d
})

// decodeFrame decompresses one complete frame and verifies its XXH64 content checksum when flagged; any
// failure is a *FrameError ("corrupt Zstandard session log: frame at byte <start> failed validation"). b is
// the whole file and f a frame ScanFrames found in it, so the error can name the file offset. It refuses,
// before decoding anything, a frame whose blocks could decode to more than max bytes (0: no cap): a 72 KB
// frame of RLE blocks can expand to gigabytes, and memory must stay bounded whatever a store holds.
func decodeFrame(b []byte, f Frame, max int64) ([]byte, error) {
	// Frames carry no content size, so the output is decoded into a reused scratch buffer and copied out at
	// its exact size: the plaintext outlives the load (events alias it), and a capacity guess per frame made
	// a 500k-event session's small frames hold 117 MB for 32 MB of text.
	scratch := frameScratch.Get().(*[]byte)
	out, err := appendFrame((*scratch)[:0], b, f, max)
	if err != nil {
		frameScratch.Put(scratch)
		return nil, err
	}
	exact := exactCopy(out)
	putScratch(scratch, out)
	return exact, nil
}

// exactCopy is a copy of b whose capacity is its length (bytes.Clone may leave slack, which the events
// aliasing the plaintext would hold for as long as the session lives).
func exactCopy(b []byte) []byte {
	c := make([]byte, len(b))
	copy(c, b)
	return c
}

// putScratch returns a scratch buffer (grown to out) to frameScratch, unless it grew past maxScratch.
func putScratch(scratch *[]byte, out []byte) {
	if cap(out) <= maxScratch {
		*scratch = out[:0]
		frameScratch.Put(scratch)
	}
}

// appendFrame is decodeFrame appending the frame's plaintext to dst, which it returns (dst unchanged, but
// perhaps grown, on failure).
func appendFrame(dst, b []byte, f Frame, max int64) ([]byte, error) {
	seg, _, err := checkFrame(b, f, max)
	if err != nil {
		return dst, err
	}
	out, err := decoder().DecodeAll(seg, dst)
	if err != nil {
		return out[:len(dst)], &FrameError{Start: f.Start, Cause: err}
	}
	return out, nil
}

// checkFrame returns the bytes of frame f of b and the most plaintext its blocks can regenerate, after the
// checks every decode makes first: the range is exactly one frame, its content size is one its blocks can
// reach, and its bound is within max (0: no cap).
func checkFrame(b []byte, f Frame, max int64) ([]byte, uint64, error) {
	if f.Start < 0 || f.End < f.Start || f.End > int64(len(b)) {
		return nil, 0, &FrameError{Start: f.Start, Cause: errors.New("frame range outside the buffer")}
	}
	seg := b[f.Start:f.End]
	// The decoder would happily run on into a following frame; insist the range is exactly one frame.
	n, h, bound, err := scanFrameBound(seg, f.Start)
	if err == nil && n != len(seg) {
		err = errors.New("range is not exactly one frame")
	}
	// A content size the blocks cannot reach fails in any decoder; refusing it up front keeps a forged size
	// from making the decoder reserve that much memory first.
	if err == nil && h.hasFCS && h.fcs > bound {
		err = fmt.Errorf("frame content size %d exceeds the %d bytes its blocks can hold", h.fcs, bound)
	}
	if err == nil && max > 0 && int64(bound) > max {
		// not the harness's opaque "failed validation": the reason is dshfs's own limit, so say it
		return nil, 0, fmt.Errorf("corrupt Zstandard session log: frame at byte %d can decode to %d bytes, over max_frame_bytes (%d)", f.Start, bound, max)
	}
	if err != nil {
		return nil, 0, &FrameError{Start: f.Start, Cause: err}
	}
	return seg, bound, nil
}

// streamBlock is how much plaintext streamFrame hands over at a time.
const streamBlock = 1 << 20

// streamDecoders are single-goroutine streaming decoders, reset for each frame they decode.
var streamDecoders = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderMaxWindow(maxDecodeWindow),
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
	)
	if err != nil {
		panic("jsonl: zstd decoder options rejected: " + err.Error())
	}
	return d
}}

// streamFrame decodes frame f of b a piece of at most streamBlock bytes at a time, handing each to emit,
// whose buffer is reused once emit returns. A frame whose blocks say it decodes to hundreds of megabytes (a
// 6.5 KB frame of empty lines can) is then never whole in memory: what a reader keeps is what emit keeps.
// A decode failure is a *FrameError, reported after emit has seen the pieces before it; emit's own error
// ends the decode and comes back as it is.
func streamFrame(b []byte, f Frame, max int64, emit func([]byte) error) error {
	seg, _, err := checkFrame(b, f, max)
	if err != nil {
		return err
	}
	d := streamDecoders.Get().(*zstd.Decoder)
	defer streamDecoders.Put(d)
	if err := d.Reset(bytes.NewReader(seg)); err != nil {
		return &FrameError{Start: f.Start, Cause: err}
	}
	defer d.Reset(nil) // drops the reference to b
	buf := make([]byte, streamBlock)
	for {
		n, err := io.ReadFull(d, buf)
		if n > 0 {
			if eerr := emit(buf[:n]); eerr != nil {
				return eerr
			}
		}
		switch err {
		case nil:
		case io.EOF, io.ErrUnexpectedEOF:
			return nil
		default:
			return &FrameError{Start: f.Start, Cause: err}
		}
	}
}

// maxScratch bounds the scratch buffers kept for reuse; a rare huge frame's buffer is left to the collector.
const maxScratch = 4 << 20

var frameScratch = sync.Pool{New: func() any { return new([]byte) }}

// DecodeTornPrefix decodes as much plaintext as the harness's flushing prefix decoder (libzstd streaming,
// ZSTD_e_flush) recovers from an incomplete final frame: every complete block, plus the present bytes of a cut
// raw block (libzstd streams raw blocks through as they arrive); a cut compressed or RLE block yields nothing.
// No checksum is checked (the frame has none to check yet). Any decoding failure makes the harness discard the
// whole result, so it returns nil then, as it does when no block is complete.
func DecodeTornPrefix(torn []byte) []byte {
	h, err := parseFrameHeader(torn, 0)
	if err != nil {
		return nil
	}
	if len(h.dictID) > 0 && !allZero(h.dictID) {
		return nil // libzstd: dictionary_wrong, no dictionary is ever loaded
	}
	window, ok := frameWindow(h)
	if !ok {
		return nil
	}
	blockMax := min(window, maxBlockSize)

	// Re-frame the complete blocks: same compressed bytes in the same order, so every block still sees the
	// history it was compressed against, under a header that asks for no content size and no checksum.
	synth := make([]byte, 0, len(torn)+8)
	synth = append(synth, 0x28, 0xB5, 0x2F, 0xFD, 0x00, windowDescriptor(window))
	p := h.size
	lastHdr := -1
	var tail []byte
	sawLast := false
	for {
		k, err := readBlock(torn, p, 0)
		if err == errTruncated {
			// Only the payload of a raw block streams through before the block is complete.
			if len(torn)-p > 3 && k.typ == blockTypeRaw {
				if k.size > blockMax {
					return nil
				}
				tail = torn[p+3:]
			}
			break
		}
		if err != nil || k.size > blockMax {
			return nil // libzstd: reserved block type / "Block Size Exceeds Maximum"
		}
		lastHdr = len(synth)
		synth = append(synth, torn[k.start:k.end()]...)
		p = k.end()
		if k.last {
			sawLast = true
			break
		}
	}
	var out []byte
	if lastHdr >= 0 {
		synth[lastHdr] |= 1 // the last complete block now ends the synthetic frame
		out, err = decoder().DecodeAll(synth, nil)
		if err != nil {
			return nil
		}
	}
	out = append(out, tail...)
	// libzstd checks Frame_Content_Size when the last block has been decoded, even before the checksum arrives.
	if sawLast && h.hasFCS && uint64(len(out)) != h.fcs {
		return nil
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// frameWindow is the window a decoder must provide for h, refused (ok=false) beyond libzstd's default limit.
func frameWindow(h frameHeader) (int, bool) {
	var w uint64
	if h.descriptor&fhdSingleSegment != 0 {
		w = h.fcs
	} else {
		exp := uint(h.window>>3) + 10
		base := uint64(1) << exp
		w = base + base/8*uint64(h.window&7)
	}
	if w > maxDecodeWindow {
		return 0, false
	}
	return int(max(w, 1<<10)), true
}

// windowDescriptor is the smallest Window_Descriptor whose window is >= w (1 KiB <= w <= 2^27).
func windowDescriptor(w int) byte {
	for exp := 0; exp < 32; exp++ {
		base := 1 << (exp + 10)
		for m := 0; m < 8; m++ {
			if base+base/8*m >= w {
				return byte(exp<<3 | m)
			}
		}
	}
	panic("jsonl: window too large for a descriptor")
}

// harnessFrameHeader is what Node's zstdCompress writes before every frame: the input arrives as a stream of
// unknown length, so libzstd level 3 emits no Frame_Content_Size, Window_Descriptor 0x58 (2 MiB, windowLog 21)
// and the checksum flag the harness asks for.
var harnessFrameHeader = []byte{0x28, 0xB5, 0x2F, 0xFD, fhdChecksum, 0x58}

// harnessWindow is the window harnessFrameHeader declares; the encoder must never reference further back.
const harnessWindow = 1 << 21

var encoder = sync.OnceValue(func() *zstd.Encoder {
	e, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithEncoderCRC(true),
		zstd.WithWindowSize(harnessWindow),
		zstd.WithSingleSegment(false),
		zstd.WithEncoderConcurrency(1),
	)
	if err != nil {
		panic("jsonl: zstd encoder options rejected: " + err.Error())
	}
	return e
})

// emptyFrameBody is libzstd's body for empty input: one empty last raw block, then the low 32 bits of
// XXH64("") = 0xEF46DB3751D8E999, little-endian.
var emptyFrameBody = []byte{0x01, 0x00, 0x00, 0x99, 0xE9, 0xD8, 0x51}

// EncodeFrame compresses plaintext as ONE frame the way the harness writes (content checksum on, no dictionary,
// klauspost SpeedDefault as the stand-in for libzstd level 3) and appends it to dst. The frame header is written
// byte-for-byte as Node writes it (no content size, 2 MiB window); the block bytes come from a different
// compressor than libzstd and are generally not identical to the harness's, only equivalent.
func EncodeFrame(dst, plaintext []byte) []byte {
	dst = append(dst, harnessFrameHeader...)
	if len(plaintext) == 0 {
		return append(dst, emptyFrameBody...)
	}
	// klauspost writes its own header (content size, window rounded to the input); keep only its blocks and
	// checksum, which reference at most harnessWindow bytes back and so are valid under our header.
	mark := len(dst)
	dst = encoder().EncodeAll(plaintext, dst)
	h, err := parseFrameHeader(dst[mark:], 0)
	if err != nil {
		panic("jsonl: zstd encoder produced an unreadable frame header: " + err.Error())
	}
	return append(dst[:mark], dst[mark+h.size:]...)
}

// Bomb is a zstd frame of 128 KiB RLE blocks — four bytes per block on disk, 128 KiB each decoded — for
// tests that a store cannot make dshfs allocate what a frame claims (a decompression bomb).
func Bomb(blocks int) []byte {
	// magic, frame header descriptor 0 (no content size, no checksum), window descriptor 0x38 (128 KiB)
	out := []byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x38}
	for i := 0; i < blocks; i++ {
		last := uint32(0)
		if i == blocks-1 {
			last = 1
		}
		h := last | 1<<1 | (128<<10)<<3 // RLE block regenerating 128 KiB
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], h)
		out = append(out, b[0], b[1], b[2], 0)
	}
	return out
}
