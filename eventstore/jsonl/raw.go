package jsonl

import (
	"bytes"
	"context"
	"io"

	"github.com/dshfs/dshfs/eventstore"
)

// ReadRaw returns the artifact's text: raw mode the whole file including a torn tail, zstd the complete
// frames decoded. Unlike the harness's readRaw it does not require a valid header, so refused sessions stay
// readable.
func (b *Backend) ReadRaw(ctx context.Context, id string) ([]byte, error) {
	buf, err := b.artifactBytes(id)
	if err != nil || b.mode == None {
		return buf, err
	}
	return rawText(buf, b.maxFrame)
}

// WriteRaw writes what ReadRaw returns to w, a frame at a time: the text of a zstd artifact is never whole
// in memory (the raw.jsonl of the 500k-event bench session is 32 MB decoded, 14 MB compressed). An error of w
// comes back as it is; after a decode error the frames before it have been written.
func (b *Backend) WriteRaw(ctx context.Context, id string, w io.Writer) error {
	if b.mode == None {
		return b.copyRaw(id, w)
	}
	buf, err := b.artifactBytes(id)
	if err != nil {
		return err
	}
	return writeRawText(w, buf, b.maxFrame)
}

// copyRaw copies an uncompressed transcript to w through a small buffer: raw.jsonl of a 1 GB refused
// session must not cost a gigabyte. Errors of w come back as they are.
func (b *Backend) copyRaw(id string, w io.Writer) error {
	path, err := b.find(id)
	if err != nil {
		return err
	}
	f, _, err := b.openArtifact(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 256<<10)
	for {
		n, rerr := f.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return &eventstore.IOError{Err: rerr}
		}
	}
}

// artifactBytes is the stored bytes of session id's transcript (zstd: compressed).
func (b *Backend) artifactBytes(id string) ([]byte, error) {
	path, err := b.find(id)
	if err != nil {
		return nil, err
	}
	buf, _, err := b.readArtifact(path)
	return buf, err
}

// RawText decodes every complete frame of a zstd artifact, omitting a torn final frame.
func RawText(buf []byte) ([]byte, error) { return rawText(buf, 0) }

// RawTextCapped is RawText refusing, before decoding it, a frame that could decode to more than maxFrame
// bytes (writer.max_frame_bytes; 0 is no cap): for frames a reader has not vetted yet.
func RawTextCapped(buf []byte, maxFrame int64) ([]byte, error) { return rawText(buf, maxFrame) }

func rawText(buf []byte, maxFrame int64) ([]byte, error) {
	var out bytes.Buffer
	if err := writeRawText(&out, buf, maxFrame); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// writeRawText writes the decoded text of every complete frame of buf to w, in order.
func writeRawText(w io.Writer, buf []byte, maxFrame int64) error {
	frames, _, err := ScanFrames(buf, 0)
	if err != nil {
		return err
	}
	if len(frames) == 0 {
		return errZstdHeaderless
	}
	for _, f := range frames {
		if _, bound, err := checkFrame(buf, f, maxFrame); err == nil && bound >= zstdPieceText {
			// a large frame a piece at a time: raw.jsonl of a small file of RLE blocks stays small in memory
			if err := streamFrame(buf, f, maxFrame, func(p []byte) error {
				_, err := w.Write(p)
				return err
			}); err != nil {
				return err
			}
			continue
		}
		plain, err := decodeFrame(buf, f, maxFrame)
		if err != nil {
			return err
		}
		if _, err := w.Write(plain); err != nil {
			return err
		}
	}
	return nil
}
