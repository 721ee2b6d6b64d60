package jsonl

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
)

// Generation is a session format generation as its file name states it: 0 for session.jsonl, N for
// session.vN.jsonl. Releases after 0.1.2 publish a newer generation as a new immutable file beside the
// older ones (docs/formats.md#generations); the highest valid one is the session.
type Generation int

// GenerationFile is what a session directory entry's name says about it when it is a generation file.
type GenerationFile struct {
	Gen         Generation
	Compression Compression
}

// Name is the file name the harness gives this generation in this encoding.
func (g GenerationFile) Name() string {
	base := "session"
	if g.Gen > 0 {
		base += ".v" + strconv.Itoa(int(g.Gen))
	}
	return base + g.Compression.Suffix()
}

// ParseGenerationName reports whether name is a generation file exactly as the harness matches it,
// ^session(?:\.v([1-9][0-9]*))?\.jsonl$ with an optional .zstd: ".v0", upper case, leading zeros and
// temporaries (*.tmp, session.migration.*) are not generation files and ok is false for them.
func ParseGenerationName(name string) (GenerationFile, bool) {
	c := None
	if s, ok := strings.CutSuffix(name, ".zstd"); ok {
		name, c = s, Zstd
	}
	rest, ok := strings.CutSuffix(name, ".jsonl")
	if !ok {
		return GenerationFile{}, false
	}
	if rest == "session" {
		return GenerationFile{Gen: 0, Compression: c}, true
	}
	digits, ok := strings.CutPrefix(rest, "session.v")
	if !ok || digits == "" || digits[0] < '1' || digits[0] > '9' {
		return GenerationFile{}, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return GenerationFile{}, false
		}
	}
	n, err := strconv.Atoi(digits)
	if err != nil { // more digits than an int holds: no harness writes it, and it cannot be compared
		return GenerationFile{}, false
	}
	return GenerationFile{Gen: Generation(n), Compression: c}, true
}

// ReadGeneration is the generation this package reads and writes: the v0 log of the harness up to
// dsh-v0.1.2 (docs/harness.md).
const ReadGeneration Generation = 0

// Release names the harness releases that write a generation, for refusals that tell a user which harness
// made the file (docs/formats.md#generations).
func (g Generation) Release() string {
	switch {
	case g == 0:
		return "the harness up to dsh-v0.1.2"
	case g == 1:
		return "no tagged harness release (v1 was never a release's writer)"
	case g == 2:
		return "the harness's dsh-v0.1.3-alpha releases"
	case g == 3:
		return "the harness from dsh-v0.1.5-alpha.1 up to dsh-v0.2.0-rc.1"
	case g == 4:
		return "the harness from dsh-v0.2.0-rc.2 on"
	}
	return "a harness newer than dshfs reads"
}

// SessionFiles is what a session directory holds as the harness's resolver sees it: every generation file
// in the root's encoding, and those in the other encoding (each an encoding mismatch of the session).
type SessionFiles struct {
	Dir      string
	Files    []GenerationFile // the root's encoding, ascending by generation
	Opposite []string         // names of generation files in the other encoding, sorted
}

// Current is the session's artifact: the numerically highest generation, never a predecessor in its place.
// ok is false when the directory holds no generation file in the root's encoding.
func (s SessionFiles) Current() (GenerationFile, bool) {
	if len(s.Files) == 0 {
		return GenerationFile{}, false
	}
	return s.Files[len(s.Files)-1], true
}

// Path is a generation file's path in the directory.
func (s SessionFiles) Path(g GenerationFile) string { return filepath.Join(s.Dir, g.Name()) }

// Predecessors are the generation files below the current one: files an upgraded harness left untouched
// when it published a newer generation beside them, kept as evidence and never read in its place.
func (s SessionFiles) Predecessors() []GenerationFile {
	if len(s.Files) < 2 {
		return nil
	}
	return s.Files[:len(s.Files)-1]
}

// any reports whether the directory holds a generation file in either encoding.
func (s SessionFiles) any() bool { return len(s.Files) > 0 || len(s.Opposite) > 0 }

// sessionFiles reads a session directory's generation files. A directory that cannot be read holds none
// (the listing reports the directories it cannot read).
func (b *Backend) sessionFiles(dir string) SessionFiles { return b.filesOf(dir, dirNames(dir)) }

// keptSessionFiles is sessionFiles through the backend's kept listings (dirCache): for the lookups and the
// listing passes, which read a settled directory again and again; a write lists afresh what it changes.
func (b *Backend) keptSessionFiles(dir string) SessionFiles {
	return b.filesOf(dir, b.dirs.list(dir, kindNames, dirNames))
}

// filesOf sorts a session directory's names into its generation files.
func (b *Backend) filesOf(dir string, names []string) SessionFiles {
	s := SessionFiles{Dir: dir}
	for _, name := range names {
		g, ok := ParseGenerationName(name)
		switch {
		case !ok:
		case g.Compression == b.mode:
			s.Files = append(s.Files, g)
		default:
			s.Opposite = append(s.Opposite, name)
		}
	}
	sort.Slice(s.Files, func(i, j int) bool { return s.Files[i].Gen < s.Files[j].Gen })
	sort.Strings(s.Opposite)
	return s
}

// Supported says which generations dshfs reads and writes, for refusals.
const Supported = "dshfs reads generations v0, v2, v3 and v4 and writes v0 and v4"

// GenerationError refuses a session whose artifact is of a generation this build does not read (v1, or one
// newer than v3), or a write to one of any generation but v0. It is an *eventstore.UnsupportedError to
// status.json, the CLI and errno alike (the log is intact; this build cannot interpret or extend it), and
// says what still works on the session.
type GenerationError struct {
	Path         string         // the session's artifact
	File         GenerationFile // its generation, as its name states and its header confirms
	Predecessors []string       // older generation files beside it, never served in its place
	Reads        bool           // the session is read (v2, v3) and only a write is refused
}

func (e *GenerationError) Error() string {
	msg := "session artifact " + jsonString(e.Path) + " is format generation v" + strconv.Itoa(int(e.File.Gen)) +
		", written by " + e.File.Gen.Release()
	if int(e.File.Gen) > generation.Latest {
		// the harness's own refusal first, as a v4 build words it
		msg = "stored Session uses newer format v" + strconv.Itoa(int(e.File.Gen)) + "; this build writes v" +
			strconv.Itoa(generation.Latest) + " (raw log: " + e.Path + "): " + msg
	}
	msg += "; " + Supported
	switch len(e.Predecessors) {
	case 0:
	case 1:
		msg += " (the older " + e.Predecessors[0] + " beside it is kept untouched and is not the session)"
	default:
		msg += " (the older " + strings.Join(e.Predecessors, ", ") + " beside it are kept untouched and are not the session)"
	}
	if e.Reads {
		return msg + ": every view of this session works; append, resume, compact, prune, close and a fork of it are refused (write it with the harness that wrote it)"
	}
	return msg + ": ls, check, status.json, raw.jsonl and store/ show this session; its other views and every write are refused"
}

// Unwrap makes the refusal an unsupported-format one for eventstore.Classify.
func (e *GenerationError) Unwrap() error {
	return &eventstore.UnsupportedError{Message: e.Error(), Path: e.Path}
}

// checkGeneration decides whether the session's artifact is read. Generation 0 is read by this package's
// scanner, v2 and v3 by package generation (later.go), each after the harness's check that its header
// states the version its name does; any other generation is refused with a *GenerationError.
func (b *Backend) checkGeneration(files SessionFiles, g GenerationFile) error {
	if g.Gen == ReadGeneration {
		return nil
	}
	if err := b.checkLaterHeader(files, g); err != nil || readsGeneration(g.Gen) {
		return err
	}
	return b.generationError(files, g)
}

// checkLaterHeader applies the harness's check that a later generation's header states its file name's
// version.
func (b *Backend) checkLaterHeader(files SessionFiles, g GenerationFile) error {
	return b.laterHeaderAt(files.Path(g), g)
}

// laterHeaderAt is checkLaterHeader of the artifact at path, read for its header alone.
func (b *Backend) laterHeaderAt(path string, g GenerationFile) error {
	rec, err := b.headerRecord(path, nil)
	if err != nil {
		return err
	}
	return laterVersionRefusal(rec, g, path)
}

// laterVersionRefusal is checkLaterHeader's verdict on a header record already read.
func laterVersionRefusal(rec []byte, g GenerationFile, path string) error {
	if err := headerVersionMatches(rec, g.Gen); err != nil {
		return fmt.Errorf("%w (raw log: %s)", err, path)
	}
	return nil
}

// generationError is the refusal of a session whose current generation is g: to read it (a generation this
// package does not read) or to write it (any but v0).
func (b *Backend) generationError(files SessionFiles, g GenerationFile) error {
	e := &GenerationError{Path: files.Path(g), File: g, Reads: readsGeneration(g.Gen)}
	for _, p := range files.Predecessors() {
		e.Predecessors = append(e.Predecessors, p.Name())
	}
	return e
}

// headerVersionMatches applies the harness's check that a generation file's header states the version its
// name does, with the harness's texts.
func headerVersionMatches(rec []byte, want Generation) error {
	v, err := event.Parse(bytes.TrimSuffix(rec, []byte("\n")))
	if err != nil {
		return errors.New("corrupt session log: header line is not valid JSON")
	}
	if v.Kind != event.KindObject {
		return errors.New("corrupt session log: first line is not a JSON object")
	}
	ver, _ := v.Get("version")
	if ver.Kind != event.KindNumber || ver.Num < 0 || ver.Num != math.Trunc(ver.Num) || ver.Num > event.MaxSafeInteger ||
		(ver.Num == 0 && math.Signbit(ver.Num)) {
		return errors.New("corrupt session log: header version is not a non-negative safe integer")
	}
	if Generation(ver.Num) != want || float64(want) != ver.Num {
		return fmt.Errorf("resolved JSONL source filename identifies v%d, but its header identifies v%s", want, strconv.FormatFloat(ver.Num, 'f', -1, 64))
	}
	return nil
}

// dirNames are the names in dir, unsorted, nil when it cannot be read. Listing reads every session
// directory once per pass, so this asks the kernel for names alone — no stat, no sort, and no registration
// with the runtime's poller, which os.Open of a directory costs two more system calls per session.
func dirNames(dir string) []string {
	fd, err := openDir(dir)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	var names []string
	buf := make([]byte, 4096) // a session directory holds a handful of names
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return names
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

func openDir(dir string) (int, error) {
	for {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}
