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
	descriptorReserved = 0x18
	blockTypeRLE       = 1
	blockTypeReserved  = 3
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

// frameEnd returns the end offset of the frame starting at b[start], or -1 when the data ends inside it
// (a torn frame). Bad magic, reserved bits and reserved block types are corruption with the v0 reader's texts.
func frameEnd(b []byte, start int) (int, error) {
	p := start
	if len(b)-p < 4 {
		return -1, nil
	}
	if binary.LittleEndian.Uint32(b[p:]) != zstdMagic {
		return 0, &CorruptError{Message: "corrupt Zstandard session log: invalid frame magic at byte " + strconv.Itoa(p)}
	}
	p += 4
	if p >= len(b) {
		return -1, nil
	}
	d := b[p]
	if d&descriptorReserved != 0 {
		return 0, &CorruptError{Message: "corrupt Zstandard session log: reserved frame-header bit at byte " + strconv.Itoa(p)}
	}
	p++
	single := d&0x20 != 0
	if !single {
		p++ // Window_Descriptor
	}
	p += []int{0, 1, 2, 4}[d&3] // Dictionary_ID
	switch flag := d >> 6; {
	case flag != 0:
		p += 1 << flag
	case single:
		p++
	}
	for {
		if p+3 > len(b) {
			return -1, nil
		}
		h := int(b[p]) | int(b[p+1])<<8 | int(b[p+2])<<16
		typ := (h >> 1) & 3
		if typ == blockTypeReserved {
			return 0, &CorruptError{Message: "corrupt Zstandard session log: reserved block type at byte " + strconv.Itoa(p)}
		}
		size := h >> 3
		if typ == blockTypeRLE {
			size = 1
		}
		p += 3 + size
		if p > len(b) {
			return -1, nil
		}
		if h&1 != 0 {
			break
		}
	}
	if d&0x04 != 0 {
		p += 4 // Content_Checksum
	}
	if p > len(b) {
		return -1, nil
	}
	return p, nil
}

// unframe returns the text of a compressed artifact: the plaintext of its complete frames, the header
// frame checked to hold exactly one line. A torn final frame is left out whole (as the harness's raw
// reads leave it out); a complete frame whose text stops inside a line is corruption.
func unframe(b []byte) ([]byte, error) {
	var text []byte
	frames := 0
	for p := 0; p < len(b); {
		end, err := frameEnd(b, p)
		if err != nil {
			return nil, err
		}
		if end < 0 {
			break
		}
		plain, err := zstdDecoder().DecodeAll(b[p:end], nil)
		if err != nil {
			return nil, &CorruptError{Message: "corrupt Zstandard session log: frame at byte " + strconv.Itoa(p) + " failed validation"}
		}
		if frames == 0 && (len(plain) == 0 || bytes.IndexByte(plain, '\n') != len(plain)-1) {
			return nil, &CorruptError{Message: "corrupt Zstandard session log: first frame is not exactly one header line"}
		}
		text = append(text, plain...)
		frames++
		p = end
	}
	if frames == 0 {
		return nil, &CorruptError{Message: "empty or header-less Zstandard session log"}
	}
	if text[len(text)-1] != '\n' {
		return nil, &CorruptError{Message: "corrupt Zstandard session log: complete frame contains a torn JSONL record"}
	}
	return text, nil
}
