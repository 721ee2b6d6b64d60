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
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/namecodec"
)

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
				files := b.keptSessionFiles(found[i].dir)
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
		e = b.generationEntry(e, files, g, buf)
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
// line verbatim (header.json of a refused session) and checkGeneration's verdict. buf is the listing's
// scratch for reading headers.
func (b *Backend) generationEntry(e eventstore.Entry, files SessionFiles, g GenerationFile, buf *[]byte) eventstore.Entry {
	rec, err := b.headerRecord(e.Path, buf)
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
		return b.headerRecord(l.path, buf)
	}
	fd, err := unix.Open(l.path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return b.headerRecord(l.path, buf) // says why, or reads what replaced it
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	was, _ := l.lstat.Sys().(*syscall.Stat_t)
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || was == nil || st.Ino != was.Ino || st.Dev != was.Dev {
		return b.headerRecord(l.path, buf)
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
// reading the rest of the artifact. scratch is readHeader's (a listing passes one for all its headers),
// or nil.
func (b *Backend) headerRecord(path string, scratch *[]byte) ([]byte, error) {
	f, _, err := b.openArtifact(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if scratch == nil {
		scratch = new([]byte)
	}
	return b.readHeader(f.Read, scratch)
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
		if n == 0 && err == nil {
			continue
		}
		head, done, herr := b.headerIn(buf, err != nil)
		if done {
			if herr == nil && b.mode == None {
				head = exactCopy(head)
			}
			return head, herr
		}
	}
}

// headerIn finds the first record in the first bytes of an artifact (all of it when eof): raw, the line
// through its LF, within buf; zstd, the first frame, decoded into memory of its own. done is false when
// buf holds no whole record yet and more bytes could complete it.
func (b *Backend) headerIn(buf []byte, eof bool) (head []byte, done bool, err error) {
	if b.mode == None {
		if nl := bytes.IndexByte(buf, '\n'); nl >= 0 {
			return buf[:nl+1], true, nil
		}
	} else if len(buf) > 0 {
		frames, _, serr := ScanFrames(buf, 1)
		if serr != nil {
			return nil, true, serr
		}
		if len(frames) == 1 {
			plain, derr := decodeFrame(buf, frames[0], b.maxFrame)
			if derr != nil {
				return nil, true, errors.New("corrupt Zstandard session log: header frame failed validation")
			}
			if err := checkHeaderFrame(plain); err != nil {
				return nil, true, err
			}
			return plain, true, nil
		}
	}
	limit, name := b.maxLine, "max_line_bytes"
	if b.mode == Zstd {
		limit, name = b.maxFrame, "max_frame_bytes"
	}
	if limit > 0 && int64(len(buf)) > limit+1 {
		// no header record ends within any sane size: stop reading instead of buffering the file
		return nil, true, fmt.Errorf("corrupt session log: the header record is not complete within %s (%d bytes)", name, limit)
	}
	if eof {
		if b.mode == Zstd {
			return nil, true, errZstdHeaderless
		}
		return nil, true, errHeaderless
	}
	return nil, false, nil
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
	var st unix.Stat_t // not os.Lstat: a discover probes two names that are usually absent
	return unix.Lstat(path, &st) == nil
}
