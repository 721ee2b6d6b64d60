package jsonl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/namecodec"
)

// Compression selects the physical encoding of a root; a root holds exactly one.
type Compression string

// The two encodings the harness writes.
const (
	Zstd Compression = "zstd"
	None Compression = "none"
)

// Suffix is the transcript file suffix for an encoding.
func (c Compression) Suffix() string {
	if c == Zstd {
		return ".jsonl.zstd"
	}
	return ".jsonl"
}

func (c Compression) opposite() Compression {
	if c == Zstd {
		return None
	}
	return Zstd
}

// Backend is the JSONL session store at one root, byte-compatible with the harness's
// session-persistence-jsonl in the given compression mode.
type Backend struct {
	root string
	mode Compression
	pack bool

	// headers remembers what listing learned from each transcript's first record, keyed by path and
	// valid while the file keeps its device and inode: a header is written once and never rewritten, so a
	// mount re-listing 10k sessions every second reads no file twice.
	hmu     sync.Mutex
	headers map[string]cachedHeader

	realRoot atomic.Pointer[string] // root with symlinks resolved (resolvedRoot)

	// maxLine and maxFrame cap one event line and one decoded zstd frame (config [writer] max_line_bytes,
	// max_frame_bytes; 0: no cap): a session exceeding them is refused as corrupt instead of filling memory.
	maxLine, maxFrame int64
	// maxSession is the load budget of one session's events (eventstore.Budget)
	maxSession int64

	// hook, when set, is called before every durable write step (tests: fault injection, crash points,
	// recording what was made durable); an error fails the step as the system call would.
	hook func(op Op, path string) error

	// tuning is how parallel a load's decoding and a listing's header reads run (SetTuning)
	tuning eventstore.Tuning

	// watch is the running change feed (watch.go), nil when none runs
	watch atomic.Pointer[watching]
}

// Op names a durable write step for a test hook.
type Op string

// The durable write steps, in the order an append takes them.
const (
	OpWrite    Op = "write"      // bytes written to a file (path: the file)
	OpHalf     Op = "write-half" // an append, half of its bytes written (only while a hook is set)
	OpSync     Op = "fsync"      // a file's fsync
	OpLink     Op = "link"       // a temp file hard-linked to its final name (path: the final name)
	OpDirSync  Op = "dirsync"    // a directory's fsync (path: the directory)
	OpTruncate Op = "truncate"   // a file cut back (after a failed append, or a repair)
	OpAck      Op = "ack"        // an append durable, before the writer learns it
)

// SetHook installs a test hook called before every durable write step; nil removes it.
func (b *Backend) SetHook(h func(op Op, path string) error) { b.hook = h }

func (b *Backend) step(op Op, path string) error {
	if b.hook == nil {
		return nil
	}
	if err := b.hook(op, path); err != nil {
		return &eventstore.IOError{Err: fmt.Errorf("%s %s: %w", op, path, err)}
	}
	return nil
}

type cachedHeader struct {
	file  string // "<dev>:<ino>" of the transcript the entry was read from
	entry eventstore.Entry
}

var _ eventstore.Backend = (*Backend)(nil)

// Open returns the backend for root. An empty mode is detected from the artifacts the root holds (the
// encoding most sessions use, zstd for an empty or absent root), as the harness has no way to sniff it.
func Open(root string, mode Compression) (*Backend, error) { return OpenDefault(root, mode, Zstd) }

// OpenDefault is Open with the encoding a root holding no artifact gets (config writer.compression).
func OpenDefault(root string, mode, empty Compression) (*Backend, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	if mode == "" {
		var found bool
		if mode, found = Detect(abs); !found {
			mode = empty
		}
	}
	if mode != Zstd && mode != None {
		return nil, fmt.Errorf("unknown JSONL compression %q (want \"zstd\" or \"none\")", mode)
	}
	if fi, err := os.Stat(abs); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("store root %s is not a directory", abs)
	}
	return &Backend{root: abs, mode: mode, pack: true, maxLine: DefaultMaxLineBytes, maxFrame: DefaultMaxFrameBytes,
		maxSession: eventstore.DefaultMaxSessionBytes}, nil
}

// Default caps of one line and one decoded frame (docs/configuration.md): far above any real session.
const (
	DefaultMaxLineBytes  = 64 << 20
	DefaultMaxFrameBytes = 256 << 20
)

// SetLimits sets the caps of one event line and one decoded zstd frame (0: no cap).
func (b *Backend) SetLimits(maxLine, maxFrame int64) { b.maxLine, b.maxFrame = maxLine, maxFrame }

// SetSessionLimit sets the load budget of one session's decoded events (config writer.max_session_bytes;
// 0: none); a session over it is refused with an *eventstore.TooLargeError.
func (b *Backend) SetSessionLimit(n int64) { b.maxSession = n }

// SetTuning sets how parallel a load's decoding and a listing's header reads run (the program decides;
// the zero Tuning takes one worker per P). Call it before the backend is used.
func (b *Backend) SetTuning(t eventstore.Tuning) { b.tuning = t }

// Detect reports which encoding the sessions under root use: the one more session directories hold
// generation files of, zstd on a tie; found is false when there are none (the encoding is then zstd).
//
// It stops as soon as the sessions not yet looked at could no longer change the answer: opening a store of
// one encoding looks at half of its session directories.
func Detect(root string) (c Compression, found bool) {
	var dirs []string
	for _, p := range subdirs(root) {
		dirs = append(dirs, subdirs(p)...)
	}
	var zstd, raw int
	for i, s := range dirs {
		left := len(dirs) - i
		if zstd > 0 && zstd >= raw+left {
			break // raw cannot get ahead
		}
		if raw > zstd+left {
			break // zstd cannot catch up
		}
		var z, r bool
		for _, name := range dirNames(s) {
			if g, ok := ParseGenerationName(name); ok {
				z, r = z || g.Compression == Zstd, r || g.Compression == None
			}
		}
		if z {
			zstd++
		}
		if r {
			raw++
		}
	}
	if raw > zstd {
		return None, true
	}
	return Zstd, zstd > 0
}

// Root is the absolute store root.
func (b *Backend) Root() string { return b.root }

// Compression is the encoding this backend reads and writes.
func (b *Backend) Compression() Compression { return b.mode }

// Name is "jsonl" for zstd roots and "jsonl+raw" for uncompressed ones (the STORE prefixes of docs/cli.md).
func (b *Backend) Name() string {
	if b.mode == Zstd {
		return "jsonl"
	}
	return "jsonl+raw"
}

// SetPackChunks turns packed chunk rows off (the harness's packChunks: false). Reading always decodes rows.
func (b *Backend) SetPackChunks(on bool) { b.pack = on }

// Locate returns the transcript path derived from the header's cwd and id (docs/harness.md#jsonl-store-layout).
func (b *Backend) Locate(h event.Header) (string, error) {
	project, seg, err := Place(h)
	if err != nil {
		return "", err
	}
	return filepath.Join(b.root, project, seg, "session"+b.mode.Suffix()), nil
}

// Place returns the directories a session of header h takes in a JSONL root — its project's and its
// own — or why it has none: a cwd that is no string or makes no project key, an id whose directory name
// would be over NAME_MAX. The other backends refuse such a session at create as well: the harness could
// not hold it, nor could a conversion or a backup into a JSONL root.
func Place(h event.Header) (project, dir string, err error) {
	project = NoCwdDir
	if h.Cwd != nil {
		if h.Cwd.Kind != event.KindString {
			return "", "", errors.New("header cwd is not a string")
		}
		k, err := namecodec.ProjectKey(h.Cwd.Str)
		if err != nil {
			return "", "", err
		}
		project = k
	}
	seg, err := namecodec.EncodeSegment(h.ID)
	if err != nil {
		return "", "", err
	}
	if len(seg) > maxNameBytes {
		return "", "", fmt.Errorf("session id %s encodes to a %d-byte directory name, over the filesystem's %d-byte limit", jsonString(h.ID), len(seg), maxNameBytes)
	}
	return project, seg, nil
}

// maxNameBytes is NAME_MAX of Linux filesystems: no directory name can be longer.
const maxNameBytes = 255

// Stat returns the transcript's state; its token is the harness's revision token
// `<dev>:<ino>:<size>:<mtimeNs>:<ctimeNs>`. With a path (where a listing found it) it costs one stat.
func (b *Backend) Stat(ctx context.Context, id, path string) (eventstore.Artifact, error) {
	if path == "" {
		var err error
		if path, err = b.find(id); err != nil {
			return eventstore.Artifact{}, err
		}
	}
	return statArtifact(path)
}

func statArtifact(path string) (eventstore.Artifact, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return eventstore.Artifact{}, &eventstore.IOError{Err: err}
	}
	return artifactOf(fi), nil
}

func artifactOf(fi fs.FileInfo) eventstore.Artifact {
	a := eventstore.Artifact{ModTime: fi.ModTime(), Size: fi.Size()}
	token, ok := eventstore.FileToken(fi)
	if !ok {
		a.Token = fmt.Sprintf("0:0:%d:%d:0", fi.Size(), fi.ModTime().UnixNano())
		return a
	}
	st := fi.Sys().(*syscall.Stat_t)
	a.Identity = strconv.FormatUint(uint64(st.Dev), 10) + ":" + strconv.FormatUint(st.Ino, 10)
	a.Token = token
	a.Owner = &eventstore.Owner{UID: st.Uid, GID: st.Gid, Perm: uint32(fi.Mode().Perm())}
	return a
}

// find returns the transcript of id: the current generation's file, whichever generation that is.
func (b *Backend) find(id string) (string, error) {
	files, g, err := b.discover(id)
	if err != nil {
		return "", err
	}
	return files.Path(g), nil
}

// discover finds the session directory of id and its current generation, applying the harness's
// targeted-lookup checks: flat-layout files and generation files in the other encoding are errors, and the
// same id in two project directories is a duplicate. The highest generation is the session; a predecessor
// is never returned in its place.
func (b *Backend) discover(id string) (SessionFiles, GenerationFile, error) {
	seg, err := namecodec.EncodeSegment(id)
	if err != nil {
		return SessionFiles{}, GenerationFile{}, err
	}
	var (
		matches []SessionFiles
		current GenerationFile
	)
	for _, project := range subdirs(b.root) {
		for _, c := range []Compression{Zstd, None} {
			flat := filepath.Join(project, seg+c.Suffix())
			if exists(flat) {
				return SessionFiles{}, GenerationFile{}, errors.New(flatLayoutText(flat))
			}
		}
		files := b.sessionFiles(filepath.Join(project, seg))
		if len(files.Opposite) > 0 {
			return SessionFiles{}, GenerationFile{}, errors.New(b.mismatchText(filepath.Join(files.Dir, files.Opposite[0])))
		}
		if g, ok := files.Current(); ok {
			matches, current = append(matches, files), g
		}
	}
	if len(matches) > 1 {
		return SessionFiles{}, GenerationFile{}, errors.New(duplicateText(id))
	}
	if len(matches) == 0 {
		return SessionFiles{}, GenerationFile{}, &eventstore.NotFoundError{ID: id}
	}
	return matches[0], current, nil
}

func duplicateText(id string) string {
	return `duplicate JSONL session id "` + id + `" appears in multiple project directories`
}

func flatLayoutText(path string) string {
	return "session artifact " + jsonString(path) + " uses the unsupported flat-file layout; use a separate root or move it into a project/session directory before loading"
}

func (b *Backend) mismatchText(path string) string {
	return "session artifact " + jsonString(path) + " uses " + b.mode.opposite().Suffix() +
		", but this backend is configured for compression " + jsonString(string(b.mode)) +
		"; use a separate root or select the matching compression mode"
}

func jsonString(s string) string { return string(event.Stringify(event.String(s))) }

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
	if err := b.checkGeneration(files, g); err != nil {
		return nil, err
	}
	path := files.Path(g)
	var p *eventstore.Prefix
	var art eventstore.Artifact
	if g.Gen != ReadGeneration {
		p, art, err = b.loadLater(path, g)
	} else if b.mode == None {
		p, art, err = b.loadRaw(path)
	} else {
		var buf []byte
		if buf, art, err = b.readArtifact(path); err == nil {
			p, err = b.scanZstd(buf, path, progress)
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
func (b *Backend) loadRaw(path string) (*eventstore.Prefix, eventstore.Artifact, error) {
	var p *eventstore.Prefix
	art, err := b.stableRead(path, func(f *os.File, info os.FileInfo) (err error) {
		p, err = b.scanRaw(f, info.Size())
		return err
	})
	return p, art, err
}

// scanRaw reads a raw transcript: the header line, then every complete line through the scanner, chunk by
// chunk, each chunk's lines decoded in parallel. A line over max_line_bytes is corruption (found as soon as
// it is that long, without buffering the rest of it); the bytes after the last LF are the torn tail. size
// is the transcript's size as stat'ed (0: unknown), which the event list is sized from (scanner.grow).
func (b *Backend) scanRaw(r io.Reader, size int64) (*eventstore.Prefix, error) {
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
			if err := decodeParallel(workers, len(parts), func(i int) chunk { return predecode(parts[i], false) }, func(c chunk) error {
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
	p := &eventstore.Prefix{Header: h, Events: s.list(), RowMembers: s.Rows}
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
func (b *Backend) decodePiece(buf []byte, piece []Frame) chunk {
	if len(piece) == 1 {
		if _, bound, err := checkFrame(buf, piece[0], b.maxFrame); err == nil && bound >= zstdPieceText {
			return b.decodeStreamed(buf, piece[0])
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
	c := predecode(out, true) // the events keep only copies: the scratch buffer goes back to the pool
	putScratch(scratch, out)
	c.err = failed
	return c
}

// decodeStreamed is decodePiece for a piece of one large frame: the frame is decoded a piece at a time
// (streamFrame) and each run of complete lines predecoded as it arrives, so what the chunk costs is its
// events and at most one incomplete line (bounded by max_line_bytes), never the frame's whole text. A
// frame of 200 MB of empty lines then costs a megabyte, where decoding it whole cost its size twice over.
func (b *Backend) decodeStreamed(buf []byte, f Frame) chunk {
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
		d := predecode(text, true) // owned: text is reused below
		if err := budget.Add(*d.events); err != nil {
			d.releaseEvents()
			return err
		}
		acc.add(d)
		carry = append(text[:0], p[last+1:]...)
		return nil
	})
	if err != nil {
		acc.releaseEvents()
		return chunk{events: chunkEvents.Get().(*[]event.Event), err: err}
	}
	acc.tail = bytes.Clone(carry)
	acc.size += len(carry)
	return acc
}

// scanZstd scans a zstd artifact's frames, reporting the header and the events to progress (nil: none)
// as it goes (eventstore.ProgressiveBackend).
func (b *Backend) scanZstd(buf []byte, path string, progress eventstore.ProgressSink) (*eventstore.Prefix, error) {
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
	pieces := framePieces(buf, frames[1:], zstdPieceBytes, zstdPieceText)
	done := 0
	err = decodeParallel(b.tuning.N(), len(pieces), func(i int) chunk {
		return b.decodePiece(buf, pieces[i])
	}, func(c chunk) error {
		last := pieces[done]
		s.share = float64(last[len(last)-1].End) / float64(len(buf))
		done++
		if err := s.writeChunk(c); err != nil {
			return err
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
		if err := s.write(DecodeTornPrefix(buf[tornStart:])); err != nil {
			return nil, err
		}
		p.Torn = &eventstore.Torn{TruncateTo: tornStart, Bytes: int64(len(buf)) - tornStart, Recovered: len(s.Events) - complete}
	}
	p.Events, p.RowMembers = s.list(), s.Rows
	return p, nil
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

// List discovers every session directory holding a transcript, reading its header only.
func (b *Backend) List(ctx context.Context) (eventstore.Listing, error) {
	var out eventstore.Listing
	var found []listed
	byID := map[string][]int{}
	for _, project := range subdirs(b.root) {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		entries, err := os.ReadDir(project)
		if err != nil {
			out.RootErrors = append(out.RootErrors, eventstore.RootError{Path: project, Message: err.Error()})
			continue
		}
		for _, de := range entries {
			full := filepath.Join(project, de.Name())
			if de.Type().IsRegular() && (strings.HasSuffix(de.Name(), ".jsonl") || strings.HasSuffix(de.Name(), ".jsonl.zstd")) {
				out.RootErrors = append(out.RootErrors, eventstore.RootError{Path: full, Message: flatLayoutText(full)})
			}
		}
		for _, de := range entries {
			if !de.IsDir() {
				continue
			}
			found = append(found, listed{project: filepath.Base(project), name: de.Name(), dir: filepath.Join(project, de.Name())})
		}
	}
	out.Entries = b.entries(found)
	for i, e := range out.Entries {
		byID[e.ID] = append(byID[e.ID], i)
	}
	// The same id twice is a duplicate only among sessions the harness would open: a stray directory whose
	// raw name merely decodes to a sibling's id (a literal newline beside "~000A") is already refused for
	// its identity and must not take the valid sibling down with it (the harness's inspect() opens that one).
	for id, idx := range byID {
		var valid []int
		for _, i := range idx {
			if out.Entries[i].Refusal == nil {
				valid = append(valid, i)
			}
		}
		if len(valid) < 2 {
			continue
		}
		for _, i := range valid {
			out.Entries[i].Refusal = errors.New(duplicateText(id))
		}
	}
	b.followListing(out)
	return out, nil
}

// listed is a session directory as a listing found it: reached through directory entries that are
// directories (a project directory and the session's own, not links to them).
type listed struct {
	project, name, dir string
}

// entries reads the listed directories' generation files and their current artifacts' headers, in order;
// a directory holding no generation file is no session and is left out. A listing of many sessions is a
// sequence of small reads, each waiting on the kernel (and, cold, on the disk), so a few run at once.
func (b *Backend) entries(found []listed) []eventstore.Entry {
	out := make([]eventstore.Entry, len(found))
	session := make([]bool, len(found))
	workers := min(len(found), b.tuning.N())
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			buf := make([]byte, 0, headerReadSize)
			for {
				i := int(next.Add(1) - 1)
				if i >= len(found) {
					return
				}
				files := b.sessionFiles(found[i].dir)
				if session[i] = files.any(); session[i] {
					out[i] = b.entry(found[i], files, &buf)
				}
			}
		})
	}
	wg.Wait()
	kept := out[:0]
	for i, e := range out {
		if session[i] {
			kept = append(kept, e)
		}
	}
	return kept
}

// artifactFile is a listed session's artifact and its lstat.
type artifactFile struct {
	eventstore.Artifact
	path  string
	lstat fs.FileInfo
}

// direct reports whether the artifact can be read without resolving links: a regular file reached through
// real directories below the root cannot resolve outside it, so the careful open (openArtifact) has nothing
// to check that the lstat and an O_NOFOLLOW open do not.
func (a artifactFile) direct() bool { return a.lstat != nil && a.lstat.Mode().IsRegular() }

// entry reads one session's header the way listing does and turns every reason the harness would skip or
// reject it into a refusal carrying the text its inspect() would give. Its Path is the current generation's
// file (for a session refused for a file in the other encoding, that file when there is no other), and its
// Beside the other generation files in its directory, either encoding. buf is scratch space for the read.
func (b *Backend) entry(l listed, files SessionFiles, buf *[]byte) eventstore.Entry {
	id, decoded := namecodec.DecodeSegment(l.name)
	if !decoded {
		id = l.name
	}
	e := eventstore.Entry{ID: id, ProjectDir: l.project}
	for _, p := range files.Predecessors() {
		e.Beside = append(e.Beside, files.Path(p))
	}
	g, ok := files.Current()
	opposite := files.Opposite
	if ok {
		e.Path, e.Generation = files.Path(g), int(g.Gen)
	} else {
		e.Path, opposite = filepath.Join(files.Dir, opposite[0]), opposite[1:]
	}
	for _, name := range opposite {
		e.Beside = append(e.Beside, filepath.Join(files.Dir, name))
	}
	art := artifactFile{path: e.Path}
	var err error
	if art.lstat, err = os.Lstat(e.Path); err == nil && art.direct() {
		art.Artifact = artifactOf(art.lstat) // a regular file's lstat is its stat
	} else if art.Artifact, err = statArtifact(e.Path); err != nil {
		if _, _, oerr := b.openArtifact(e.Path); oerr != nil {
			err = oerr // says why: a dangling link, a loop
		}
		e.Refusal = err
		return e
	}
	e.Revision, e.Identity, e.ModTime, e.Owner = art.Token, art.Identity, art.ModTime, art.Owner
	if len(files.Opposite) > 0 {
		e.Refusal = errors.New(b.mismatchText(filepath.Join(files.Dir, files.Opposite[0])))
		return e
	}
	path, file := e.Path, art.Identity
	b.hmu.Lock()
	c, ok := b.headers[path]
	b.hmu.Unlock()
	if ok && c.file == file {
		c.entry.Revision, c.entry.ModTime, c.entry.Owner, c.entry.Beside = art.Token, art.ModTime, art.Owner, e.Beside
		return c.entry
	}
	if g.Gen == ReadGeneration {
		e = b.readEntry(e, art, id, decoded, buf)
	} else {
		e = b.generationEntry(e, files, g)
	}
	var ge *GenerationError
	if e.Refusal != nil && !errors.As(e.Refusal, &ge) {
		return e // re-read next time: a header still being written must not stay refused
	}
	b.hmu.Lock()
	if b.headers == nil {
		b.headers = map[string]cachedHeader{}
	}
	b.headers[path] = cachedHeader{file: file, entry: e}
	b.hmu.Unlock()
	return e
}

// generationEntry lists a session whose current generation is not the one this package reads: its first
// line verbatim (header.json of a refused session) and checkGeneration's verdict.
func (b *Backend) generationEntry(e eventstore.Entry, files SessionFiles, g GenerationFile) eventstore.Entry {
	rec, err := b.headerRecord(e.Path)
	if err == nil {
		if v, err := event.Parse(bytes.TrimSuffix(rec, []byte("\n"))); err == nil && v.Kind == event.KindObject {
			e.HeaderLine = bytes.Clone(bytes.TrimSuffix(rec, []byte("\n")))
		}
	}
	// checkGeneration's verdict, on the record read once here
	if err == nil {
		err = laterVersionRefusal(rec, g, e.Path)
	}
	if err == nil && !readsGeneration(g.Gen) {
		err = b.generationError(files, g)
	}
	if err != nil {
		e.Refusal = err
		return e
	}
	// a generation this package reads: its header as the codec restores it
	h, herr := laterHeaderRecord(rec, g.Gen)
	if herr != nil {
		e.Refusal = laterRefusal(e.Path, herr)
		return e
	}
	e.Header = &h
	id, decoded := namecodec.DecodeSegment(filepath.Base(files.Dir))
	if !decoded {
		id = filepath.Base(files.Dir)
	}
	e.Refusal = b.checkIdentity(e.Path, h, id, decoded)
	return e
}

// readEntry reads one transcript's first record for the listing.
func (b *Backend) readEntry(e eventstore.Entry, l artifactFile, id string, decoded bool, buf *[]byte) eventstore.Entry {
	path := l.path
	rec, err := b.listedHeader(l, buf)
	if err != nil {
		e.Refusal = err
		return e
	}
	h, err := event.ParseHeaderLine(rec)
	// The header line is kept whenever it is a JSON object, a refused one too (status shows what it says); a
	// header that parsed is one, so only a refused record is parsed again to tell.
	if line := bytes.TrimSuffix(rec, []byte("\n")); err == nil {
		e.HeaderLine = line
	} else if v, perr := event.Parse(line); perr == nil && v.Kind == event.KindObject {
		e.HeaderLine = line
	}
	if err != nil {
		var uv *event.UnsupportedVersionError
		if errors.As(err, &uv) {
			err = &eventstore.UnsupportedError{Message: uv.Error() + " (raw log: " + path + ")", Path: path}
		}
		e.Refusal = err
		return e
	}
	e.Header = &h
	if err := b.checkIdentity(path, h, id, decoded); err != nil {
		e.Refusal = err
	}
	return e
}

// headerReadSize is how much of a transcript one read asks for while looking for its header record: a
// header line or frame is a few hundred bytes, so one read almost always finds it whole.
const headerReadSize = 8192

// listedHeader is headerRecord for a listed transcript: one the listing found as a regular file below real
// directories is opened without following links and without the runtime's poller (a listing opens one file
// per session: resolving every path component, and registering and unregistering each descriptor with
// epoll, were most of its system calls), and is checked by fstat to be the file the lstat saw; any other,
// or one that changed in between, goes the careful way.
func (b *Backend) listedHeader(l artifactFile, buf *[]byte) ([]byte, error) {
	if !l.direct() {
		return b.headerRecord(l.path)
	}
	fd, err := unix.Open(l.path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return b.headerRecord(l.path) // says why, or reads what replaced it
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	was, _ := l.lstat.Sys().(*syscall.Stat_t)
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || was == nil || st.Ino != was.Ino || st.Dev != was.Dev {
		return b.headerRecord(l.path)
	}
	return b.readHeader(func(p []byte) (int, error) {
		for {
			n, err := unix.Read(fd, p)
			switch {
			case err == unix.EINTR:
				continue
			case err != nil:
				return 0, err
			case n == 0:
				return 0, io.EOF
			}
			return n, nil
		}
	}, buf)
}

// headerRecord reads the first record (raw: through the first LF; zstd: the first frame, decoded) without
// reading the rest of the artifact.
func (b *Backend) headerRecord(path string) ([]byte, error) {
	f, _, err := b.openArtifact(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var scratch []byte
	return b.readHeader(f.Read, &scratch)
}

// readHeader reads through read until it has the first record, and returns a copy of it of its own (the
// caller keeps it; the reads go to *scratch, which is left grown for the next header unless a huge record
// grew it).
func (b *Backend) readHeader(read func([]byte) (int, error), scratch *[]byte) ([]byte, error) {
	buf := (*scratch)[:0]
	defer func() {
		if cap(buf) <= 1<<20 {
			*scratch = buf[:0]
		}
	}()
	for {
		if cap(buf)-len(buf) < headerReadSize {
			buf = slices.Grow(buf, headerReadSize)
		}
		n, err := read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if b.mode == None {
			if nl := bytes.IndexByte(buf, '\n'); nl >= 0 {
				return exactCopy(buf[:nl+1]), nil
			}
		} else if n > 0 {
			frames, _, serr := ScanFrames(buf, 1)
			if serr != nil {
				return nil, serr
			}
			if len(frames) == 1 {
				plain, derr := decodeFrame(buf, frames[0], b.maxFrame)
				if derr != nil {
					return nil, errors.New("corrupt Zstandard session log: header frame failed validation")
				}
				if err := checkHeaderFrame(plain); err != nil {
					return nil, err
				}
				return plain, nil
			}
		}
		limit, name := b.maxLine, "max_line_bytes"
		if b.mode == Zstd {
			limit, name = b.maxFrame, "max_frame_bytes"
		}
		if limit > 0 && int64(len(buf)) > limit+1 {
			// no header record ends within any sane size: stop reading instead of buffering the file
			return nil, fmt.Errorf("corrupt session log: the header record is not complete within %s (%d bytes)", name, limit)
		}
		if err != nil {
			if b.mode == Zstd {
				return nil, errZstdHeaderless
			}
			return nil, errHeaderless
		}
	}
}

// subdirs lists the directories (not symlinks to them, as the harness's Dirent check) in dir, sorted.
func subdirs(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(out)
	return out
}

// exists reports whether a name is there at all — a dangling symlink counts, so that a broken artifact is
// listed and refused with its reason instead of silently skipped.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
