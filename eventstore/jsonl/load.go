package jsonl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
)

// LoadStored reads the stored prefix of one session (the harness's loadStored): header checks, the scan with
// torn-tail rules, and identity binding.
func (b *Backend) LoadStored(ctx context.Context, id string) (*eventstore.Prefix, error) {
	return b.LoadStoredProgress(ctx, id, nil)
}

var _ eventstore.ProgressiveBackend = (*Backend)(nil)

// LoadStoredProgress is LoadStored reporting a zstd artifact's events to progress (nil: none) as its
// pieces are decoded (eventstore.ProgressiveBackend). A raw transcript reports nothing before the end:
// its read starts over when the file changes under it (stableRead), and what it reported would then not
// be a prefix of what it returns.
func (b *Backend) LoadStoredProgress(ctx context.Context, id string, progress eventstore.ProgressSink) (*eventstore.Prefix, error) {
	files, g, err := b.discover(id)
	if err != nil {
		return nil, err
	}
	if g.Gen == ReadGeneration || !readsGeneration(g.Gen) {
		if err := b.checkGeneration(files, g); err != nil {
			return nil, err
		}
	} // a later generation this package reads has its header checked by loadLater
	path := files.Path(g)
	var p *eventstore.Prefix
	var art eventstore.Artifact
	if g.Gen != ReadGeneration {
		p, art, err = b.loadLater(path, g)
	} else if b.mode == None {
		p, art, err = b.loadRaw(path, eventstore.WantsPacked(progress))
	} else {
		var buf []byte
		var mem *offHeap
		if buf, art, mem, err = b.readDecodeOnly(path); err == nil {
			p, err = b.scanZstd(buf, path, progress, mem)
			mem.free()
		}
	}
	if err != nil {
		var uv *event.UnsupportedVersionError
		if errors.As(err, &uv) {
			return nil, &eventstore.UnsupportedError{Message: uv.Error() + " (raw log: " + path + ")", Path: path}
		}
		return nil, err
	}
	if err := b.checkIdentity(path, p.Header, id, true); err != nil {
		return nil, err
	}
	p.Artifact, p.Path = art, path
	return p, nil
}

// rawChunk is how much of a raw transcript is read at a time. Events alias the chunk they were read from,
// so a chunk holding events stays alive with them and one holding none (blank or unparsable lines) is
// garbage as soon as it is scanned: a load's memory follows the log's events, never the file's size.
const rawChunk = 8 << 20

// loadRaw scans a raw transcript as it is read, between two equal fstats of the open file (stableRead),
// so that the prefix and the artifact's revision belong together.
func (b *Backend) loadRaw(path string, packed bool) (*eventstore.Prefix, eventstore.Artifact, error) {
	var p *eventstore.Prefix
	art, err := b.stableRead(path, func(f *os.File, info os.FileInfo) (err error) {
		p, err = b.scanRaw(f, info.Size(), packed)
		return err
	})
	return p, art, err
}

// scanRaw reads a raw transcript: the header line, then every complete line through the scanner, chunk by
// chunk, each chunk's lines decoded in parallel. A line over max_line_bytes is corruption (found as soon as
// it is that long, without buffering the rest of it); the bytes after the last LF are the torn tail. size
// is the transcript's size as stat'ed (0: unknown), which the event list is sized from (scanner.grow).
// With packed set, chunk rows are kept packed (eventstore.PackedSink).
func (b *Backend) scanRaw(r io.Reader, size int64, packed bool) (*eventstore.Prefix, error) {
	var (
		carry []byte // read, not yet consumed: an incomplete line at the end of the last chunk
		total int64
		eof   bool
	)
	fill := func(need int) error {
		// A line still incomplete after a chunk grows the buffer by half its length (or by what the rest of
		// it is known to need), not by a chunk: a long line is then read in a few copies, not one per chunk
		// (a quadratic pile of garbage), and never past max_line_bytes and a chunk.
		room := max(rawChunk, len(carry)/2, need+rawChunk)
		if b.maxLine > 0 {
			room = max(rawChunk, min(room, int(b.maxLine)+2-len(carry)))
		}
		if size > 0 {
			// Events alias the buffer, so a small log read into a whole chunk keeps the chunk alive with
			// them (8 MiB for a 100 KiB session, held by every live engine and cached snapshot of it): read
			// no more than the rest of the file as stat'ed, plus a byte to find its end. A file that grew
			// since is read on in the next chunk.
			room = min(room, max(int(size-total)+1, need+1))
		}
		buf := make([]byte, len(carry), len(carry)+room)
		copy(buf, carry) // the previous chunk is released unless its events keep it
		n, err := io.ReadFull(r, buf[len(buf):cap(buf)])
		carry, total = buf[:len(buf)+n], total+int64(n)
		switch err {
		case nil:
		case io.EOF, io.ErrUnexpectedEOF:
			eof = true
		default:
			return &eventstore.IOError{Err: err}
		}
		return nil
	}
	nl := -1
	for nl < 0 {
		if b.maxLine > 0 && int64(len(carry)) > b.maxLine+1 {
			return nil, fmt.Errorf("corrupt session log: the header record is not complete within max_line_bytes (%d bytes)", b.maxLine)
		}
		if eof {
			return nil, errHeaderless
		}
		if err := fill(0); err != nil {
			return nil, err
		}
		nl = bytes.IndexByte(carry, '\n')
	}
	h, err := event.ParseHeaderLine(carry[:nl+1])
	if err != nil {
		return nil, err
	}
	s := newScanner(int64(nl + 1))
	s.Budget.Limit = b.maxSession
	carry = carry[nl+1:]
	workers := b.tuning.N()
	pieces := 2 * workers // a raw log's complete lines, cut so each worker has two pieces
	for line := 0; ; {
		if last := bytes.LastIndexByte(carry, '\n'); last >= 0 {
			complete := carry[:last+1]
			if err := b.checkLines(complete, line); err != nil {
				return nil, err
			}
			line += bytes.Count(complete, []byte{'\n'})
			parts := splitLines(complete, pieces)
			if err := decodeParallel(workers, len(parts), func(i int) chunk { return predecode(parts[i], false, packed) }, func(c chunk) error {
				if size > 0 {
					s.share = float64(s.input+int64(c.size)) / float64(size)
				}
				return s.writeChunk(c)
			}); err != nil {
				return nil, err
			}
			carry = carry[last+1:]
		}
		if b.maxLine > 0 && int64(len(carry)) > b.maxLine {
			return nil, fmt.Errorf("corrupt session log: line %d is over %d bytes, over max_line_bytes (%d)", line+1, len(carry), b.maxLine)
		}
		if eof {
			break
		}
		need := 0
		if ra, ok := r.(io.ReaderAt); ok && b.maxLine > 0 && len(carry) >= rawChunk/2 {
			// a long line: find where it ends before buffering any more of it, so that one over
			// max_line_bytes is refused having cost a chunk, not the limit
			n, err := lineRest(ra, total, b.maxLine-int64(len(carry)))
			if err != nil {
				return nil, err
			}
			if n < 0 {
				return nil, fmt.Errorf("corrupt session log: line %d is over %d bytes, over max_line_bytes (%d)", line+1, b.maxLine, b.maxLine)
			}
			need = int(n)
		}
		if err := fill(need); err != nil {
			return nil, err
		}
	}
	p := &eventstore.Prefix{Header: h, Events: s.list(), RowMembers: s.Rows, Packed: s.Packed}
	if s.committed < total {
		p.Torn = &eventstore.Torn{TruncateTo: s.committed, Bytes: total - s.committed}
	}
	return p, nil
}

// lineRest is how many bytes from offset off of ra end the line in progress (its LF included; up to EOF
// for a final fragment), read in small pieces and kept nowhere; -1 when that is more than limit bytes
// (before its LF).
func lineRest(ra io.ReaderAt, off, limit int64) (int64, error) {
	buf := make([]byte, 256<<10)
	var seen int64
	for {
		n, err := ra.ReadAt(buf, off+seen)
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			if seen+int64(i) > limit {
				return -1, nil
			}
			return seen + int64(i) + 1, nil
		}
		seen += int64(n)
		if seen > limit {
			return -1, nil
		}
		if err == io.EOF {
			return seen, nil
		}
		if err != nil {
			return 0, &eventstore.IOError{Err: err}
		}
	}
}

// checkLines refuses text holding a line longer than max_line_bytes (lines numbered from first+1).
func (b *Backend) checkLines(text []byte, first int) error {
	if b.maxLine <= 0 || int64(len(text)) <= b.maxLine {
		return nil
	}
	for n, rest := first+1, text; len(rest) > 0; n++ {
		end := bytes.IndexByte(rest, '\n')
		if end < 0 {
			end = len(rest)
		}
		if int64(end) > b.maxLine {
			return fmt.Errorf("corrupt session log: line %d is %d bytes, over max_line_bytes (%d)", n, end, b.maxLine)
		}
		rest = rest[min(end+1, len(rest)):]
	}
	return nil
}

// checkIdentity binds an artifact to its header (docs/harness.md#header-line): the requested id must match, and the
// path must be the one the header's cwd and id derive, or the same file through a symlink or case alias.
func (b *Backend) checkIdentity(path string, h event.Header, want string, checkID bool) error {
	if checkID && h.ID != want {
		return fmt.Errorf(`corrupt session log "%s": requested id "%s" does not match header id "%s"`, path, want, h.ID)
	}
	expected, err := b.Locate(h)
	if err != nil {
		return fmt.Errorf(`corrupt session log "%s": header id cannot name a storage path`, path)
	}
	if _, ok := ParseGenerationName(filepath.Base(path)); ok {
		// the header names the session's directory; the generation file in it is the one being read
		expected = filepath.Join(filepath.Dir(expected), filepath.Base(path))
	}
	if path != expected && !sameFile(path, expected) {
		return fmt.Errorf(`corrupt session log "%s": header id "%s" and cwd identify "%s"`, path, h.ID, expected)
	}
	return nil
}

func sameFile(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}
