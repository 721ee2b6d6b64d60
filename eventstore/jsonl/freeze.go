package jsonl

import (
	"bytes"
	"context"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
)

var _ eventstore.Freezer = (*Backend)(nil)

// OpenArtifact implements eventstore.Freezer.
func (b *Backend) OpenArtifact(ctx context.Context, path string) (*os.File, eventstore.Artifact, error) {
	f, fi, err := b.openArtifact(path)
	if err != nil {
		return nil, eventstore.Artifact{}, err
	}
	return f, artifactOf(fi), nil
}

// tailBlock is how far back from the end a raw artifact is read at a time looking for its last LF.
const tailBlock = 64 << 10

// Freeze implements eventstore.Freezer. A raw artifact's prefix ends after its last LF, found reading
// backwards from the end (or forwards from prev's end when the file only grew); a zstd artifact's ends
// after its last complete frame, found by walking the frame structure without decompressing (from prev's
// end when the file only grew). The last complete record is then decoded for the prefix's time.
func (b *Backend) Freeze(ctx context.Context, path string, prev eventstore.Frozen) (eventstore.Frozen, error) {
	f, fi, err := b.openArtifact(path)
	if err != nil {
		return eventstore.Frozen{}, err
	}
	defer f.Close()
	art := artifactOf(fi)
	out := eventstore.Frozen{Token: art.Token, Identity: art.Identity}
	from := int64(0)
	if prev.Identity != "" && prev.Identity == art.Identity && prev.Size <= art.Size {
		if prev.Token == art.Token {
			return prev, nil
		}
		from, out.Size, out.ModTime = prev.Size, prev.Size, prev.ModTime // appended: only the new bytes
	}
	var last []byte // the last complete record of the prefix (a line, or a decoded frame's last line)
	if b.mode == Zstd {
		out.Size, last, err = b.freezeZstd(f, from, art.Size)
	} else {
		out.Size, last, err = b.freezeRaw(f, from, art.Size)
	}
	if err != nil {
		return eventstore.Frozen{}, err
	}
	if last == nil {
		if from == 0 {
			out.ModTime = art.ModTime // nothing complete: no data to take a time from
		}
		return out, nil
	}
	out.ModTime = recordTime(last, art.ModTime)
	return out, nil
}

// freezeRaw returns the end of the last complete line in [from, size) (from when there is none) and that
// line.
func (b *Backend) freezeRaw(f *os.File, from, size int64) (int64, []byte, error) {
	end := int64(-1)
	buf := make([]byte, tailBlock)
	for hi := size; hi > from && end < 0; {
		lo := max(from, hi-tailBlock)
		n, err := f.ReadAt(buf[:hi-lo], lo)
		if err != nil && err != io.EOF {
			return 0, nil, &eventstore.IOError{Err: err}
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			end = lo + int64(i) + 1
		}
		hi = lo
	}
	if end < 0 {
		return from, nil, nil
	}
	// the last line: from the LF before it (or the start) to end, at most max_line_bytes long
	start := end - 1
	limit := b.maxLine
	if limit <= 0 {
		limit = DefaultMaxLineBytes
	}
	for start > 0 && end-1-start < limit {
		lo := max(0, start-tailBlock, end-1-limit)
		n, err := f.ReadAt(buf[:start-lo], lo)
		if err != nil && err != io.EOF {
			return 0, nil, &eventstore.IOError{Err: err}
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			start = lo + int64(i) + 1
			break
		}
		if lo == 0 {
			start = 0
			break
		}
		start = lo
	}
	line := make([]byte, end-1-start)
	if _, err := f.ReadAt(line, start); err != nil && err != io.EOF {
		return 0, nil, &eventstore.IOError{Err: err}
	}
	return end, line, nil
}

// freezeZstd returns the end of the last complete frame in [from, size) (from when there is none) and the
// last line of that frame, decoded.
func (b *Backend) freezeZstd(f *os.File, from, size int64) (int64, []byte, error) {
	buf := make([]byte, size-from)
	if _, err := f.ReadAt(buf, from); err != nil && err != io.EOF {
		return 0, nil, &eventstore.IOError{Err: err}
	}
	frames, _, err := ScanFrames(buf, 0)
	if len(frames) == 0 {
		// nothing complete was added (or the bytes after from are not frames: the mirror copies what is
		// known good)
		return from, nil, nil
	}
	_ = err // frames before a bad one are complete: they are what a copy may take
	lastFrame := frames[len(frames)-1]
	plain, derr := decodeFrame(buf, lastFrame, b.maxFrame)
	end := from + lastFrame.End
	if derr != nil {
		return end, nil, nil
	}
	plain = bytes.TrimSuffix(plain, []byte{'\n'})
	if i := bytes.LastIndexByte(plain, '\n'); i >= 0 {
		plain = plain[i+1:]
	}
	return end, plain, nil
}

// recordTime is the time of the last event of one record — an event line, a packed row, or the header
// (createdAt) — or def when the record does not say.
func recordTime(rec []byte, def time.Time) time.Time {
	if h, err := event.ParseHeaderLine(append(append([]byte(nil), rec...), '\n')); err == nil {
		return time.UnixMilli(h.CreatedAt)
	}
	evs, _, err := decodeLine(rec)
	if err != nil || len(evs) == 0 {
		return def
	}
	raw, ok := evs[len(evs)-1].Member("time")
	if !ok {
		return def
	}
	ms, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return def
	}
	return time.UnixMilli(ms)
}
