package jsonl

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
)

// Materialize publishes a new transcript holding the header and the first batch, which may be empty
// (docs/harness.md#durable-writes): directories created 0700 and fsynced, content written to an exclusive temp file,
// fsynced, then hard-linked to the final name so an existing log is never clobbered, and the session
// directory fsynced.
func (b *Backend) Materialize(ctx context.Context, h event.Header, batch []event.Event) (eventstore.Artifact, error) {
	final, err := b.Locate(h)
	if err != nil {
		// a header this layout cannot place (an id over NAME_MAX): bad input, as create answers it
		return eventstore.Artifact{}, &eventstore.CommandError{Failure: eventstore.Invalid, Code: eventstore.CodeBadInput, Message: err.Error()}
	}
	// An id the directory holds in any generation exists: a v0 log must never be made beside a newer
	// generation, which the harness would go on reading instead.
	if files := b.sessionFiles(filepath.Dir(final)); len(files.Opposite) > 0 {
		return eventstore.Artifact{}, errors.New(b.mismatchText(filepath.Join(files.Dir, files.Opposite[0])))
	} else if g, ok := files.Current(); ok {
		return eventstore.Artifact{}, &eventstore.CommandError{Failure: eventstore.Exists, Code: eventstore.CodeAlreadyExists,
			Message: `refusing to materialize "` + h.ID + `": a log already exists on disk (` + g.Name() + `; load/resume it instead)`}
	}
	final = b.artifactOf(h, final)
	content, err := b.encodeHeader(h)
	if err != nil {
		return eventstore.Artifact{}, err
	}
	if len(batch) > 0 {
		body, err := b.encodeFor(h, batch, nil)
		if err != nil {
			return eventstore.Artifact{}, err
		}
		content = append(content, body...)
	}
	dir := filepath.Dir(final)
	project := filepath.Dir(dir)
	// A create that fails (ENOSPC writing the header) must leave no empty session directory behind, nor a
	// project directory it made: the directories this call creates are removed again unless it publishes.
	published := false
	for _, d := range []string{project, dir} { // deferred: the session directory goes first
		if !exists(d) {
			defer func() {
				if !published {
					// a session directory this call made holds nothing but the lease file it made (released
					// by then): nobody else can have seen either
					os.Remove(filepath.Join(d, LeaseName))
					os.Remove(d) // only ever an empty directory
				}
			}()
		}
	}
	for _, step := range [][2]string{{b.root, filepath.Dir(b.root)}, {project, b.root}, {dir, project}} {
		if err := os.MkdirAll(step[0], 0o700); err != nil {
			return eventstore.Artifact{}, &eventstore.IOError{Err: err}
		}
		if err := b.syncDir(step[1]); err != nil {
			return eventstore.Artifact{}, err
		}
	}
	// The harness takes a new session's lease just before its first write: so does this one, so that a
	// harness creating the same id meanwhile and this write exclude each other.
	l, err := acquireLease(dir, h.ID)
	if err != nil {
		return eventstore.Artifact{}, err
	}
	defer l.Release()
	if exists(final) {
		return eventstore.Artifact{}, &eventstore.CommandError{Failure: eventstore.Exists, Code: eventstore.CodeAlreadyExists,
			Message: `refusing to materialize "` + h.ID + `": a log already exists on disk (load/resume it instead)`}
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return eventstore.Artifact{}, err
	}
	tmp := final + "." + hex.EncodeToString(rnd[:]) + ".tmp"
	if err := b.writeSynced(tmp, content); err != nil {
		os.Remove(tmp)
		return eventstore.Artifact{}, err
	}
	if err := b.step(OpLink, final); err != nil {
		os.Remove(tmp)
		return eventstore.Artifact{}, err
	}
	if err := os.Link(tmp, final); err != nil {
		os.Remove(tmp)
		if errors.Is(err, os.ErrExist) {
			published = true // another writer's: not ours to remove
			return eventstore.Artifact{}, &eventstore.CommandError{Failure: eventstore.Exists, Code: eventstore.CodeAlreadyExists,
				Message: `refusing to materialize "` + h.ID + `": a log already exists on disk (load/resume it instead)`, Err: err}
		}
		return eventstore.Artifact{}, &eventstore.IOError{Err: err}
	}
	published = true
	if err := b.syncDir(dir); err != nil {
		return eventstore.Artifact{}, err
	}
	_ = os.Remove(tmp)  // the publish is already durable; a stale temp link is harmless
	_ = stampLease(dir) // unstamped, the next writer waits out the quiet period: the session is published
	return statArtifact(final)
}

// encodeHeader is a new session's header line, alone in its frame in a zstd root. A v4 header is the
// codec's physical line: its logical header (Logical) with "type" first.
func (b *Backend) encodeHeader(h event.Header) ([]byte, error) {
	line := h.Line()
	if h.Version == 4 {
		if len(h.Logical) < 2 || h.Logical[0] != '{' {
			return nil, errors.New("a v4 header needs its logical form")
		}
		line = append([]byte(`{"type":"session",`), h.Logical[1:]...)
	}
	line = append(line, '\n')
	if b.mode == Zstd {
		return EncodeFrame(nil, line), nil
	}
	return line, nil
}

// appendBatch encodes one durable batch: its lines (chunk runs packed) each ending in LF, as one frame in
// zstd mode.
func (b *Backend) appendBatch(dst []byte, batch []event.Event) []byte {
	return b.encodeBatch(dst, batch, nil)
}

// encodeBatch is appendBatch with the events' packing classified beforehand (nil: classify now).
func (b *Backend) encodeBatch(dst []byte, batch []event.Event, packing []event.Packing) []byte {
	var lines [][]byte
	switch {
	case b.pack && len(packing) == len(batch):
		lines = event.PackBatchOf(batch, packing)
	case b.pack:
		lines = event.PackBatch(batch, b.tuning.N())
	default:
		for _, e := range batch {
			lines = append(lines, e.Raw)
		}
	}
	var body []byte
	for _, l := range lines {
		body = append(append(body, l...), '\n')
	}
	if b.mode == Zstd {
		return EncodeFrame(dst, body)
	}
	return append(dst, body...)
}

func (b *Backend) writeSynced(path string, content []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return &eventstore.IOError{Err: err}
	}
	werr := b.step(OpWrite, path)
	if werr == nil {
		_, werr = f.Write(content)
	}
	if werr == nil {
		if werr = b.step(OpSync, path); werr == nil {
			werr = f.Sync()
		}
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		// the file is this call's (O_EXCL): a disk full must not leave an empty or partial one behind (a
		// .pending sidecar of nothing would claim events were kept)
		os.Remove(path)
		return &eventstore.IOError{Err: werr}
	}
	return nil
}

func (b *Backend) syncDir(dir string) error {
	if err := b.step(OpDirSync, dir); err != nil {
		return err
	}
	return eventstore.SyncDir(dir)
}

// conflict is the refusal of a write whose artifact is no longer what the writer last saw.
func conflict(path string, want, got eventstore.Artifact) error {
	return &eventstore.CommandError{Failure: eventstore.Busy, Code: eventstore.CodeConflict,
		Message: "the artifact " + jsonString(path) + " changed under this writer (another process wrote it: revision " +
			want.Token + " became " + got.Token + "); nothing was written"}
}

// AppendBatch appends one batch at EOF and fsyncs, after checking that the transcript is still in the state
// expect describes; on failure the file is cut back to its previous size so a retry of the same batch
// cannot leave a seq gap (docs/harness.md#durable-writes).
func (b *Backend) AppendBatch(ctx context.Context, h event.Header, expect eventstore.Artifact, batch []event.Event, packing []event.Packing) (eventstore.Artifact, error) {
	path, err := b.writeTarget(h)
	if err != nil {
		return eventstore.Artifact{}, err
	}
	content, err := b.encodeFor(h, batch, packing)
	if err != nil {
		return eventstore.Artifact{}, err
	}
	return b.appendBytes(path, expect, content)
}

// writeTarget is the artifact a writer of header h appends to: the session's v0 log, or its v4 file for a
// v4 header. Either must still be the session: a newer generation published beside it since the writer
// read it is a conflict, never written to.
func (b *Backend) writeTarget(h event.Header) (string, error) {
	path, err := b.Locate(h)
	if err != nil {
		return "", err
	}
	path = b.artifactOf(h, path)
	if err := b.requireWritable(path); err != nil {
		return "", superseded(path, err)
	}
	return path, nil
}

// artifactOf is the artifact a session with header h is written to, given its v0 log's path (Locate): that
// log, or the v4 file beside it for a v4 header.
func (b *Backend) artifactOf(h event.Header, located string) string {
	if h.Version != 4 {
		return located
	}
	return filepath.Join(filepath.Dir(located), GenerationFile{Gen: 4, Compression: b.mode}.Name())
}

// encodeFor is one batch as the writer of header h stores it: v0's lines (packed where the harness packs
// them), or v4's physical rows, each batch one zstd frame in a zstd root.
func (b *Backend) encodeFor(h event.Header, batch []event.Event, packing []event.Packing) ([]byte, error) {
	if h.Version != 4 {
		return b.encodeBatch(nil, batch, packing), nil
	}
	var body []byte
	for _, e := range batch {
		row, err := generation.PhysicalRow(e)
		if err != nil {
			return nil, err
		}
		body = append(append(body, row...), '\n')
	}
	if b.mode == Zstd {
		return EncodeFrame(nil, body), nil
	}
	return body, nil
}

// superseded is the refusal of a write to a v0 log that stopped being the session under its writer: a
// conflict, as a foreign write is, so that a live writer keeps its accepted events in a sidecar and takes
// no more, instead of retrying a write that can never land.
func superseded(path string, err error) error {
	return &eventstore.CommandError{Failure: eventstore.Busy, Code: eventstore.CodeConflict,
		Message: "the artifact " + jsonString(path) + " is no longer the session under this writer: " + err.Error() + "; nothing was written", Err: err}
}

// requireWritable refuses a write to the v0 log at path once it is no longer the session: a newer
// generation published beside it since the writer loaded it (an upgraded harness opened the session), or
// a generation file in the other encoding. The v0 file's revision does not change when that happens, so
// the writer's revision check alone would append where the harness never reads again.
//
// The same holds for a v4 file; a generation dshfs does not write (v2, v3, and any it does not read) is
// refused as the session's generation.
func (b *Backend) requireWritable(path string) error {
	files := b.sessionFiles(filepath.Dir(path))
	if len(files.Opposite) > 0 {
		return errors.New(b.mismatchText(filepath.Join(files.Dir, files.Opposite[0])))
	}
	want, _ := ParseGenerationName(filepath.Base(path))
	g, ok := files.Current()
	if !ok {
		return nil // nothing published yet: a create writes it
	}
	if g.Gen != want.Gen || !writesGeneration(g.Gen) {
		if g.Gen != ReadGeneration {
			if err := b.checkLaterHeader(files, g); err != nil {
				return err
			}
		}
		return b.generationError(files, g)
	}
	return nil
}

// writesGeneration reports whether dshfs writes sessions of generation g.
func writesGeneration(g Generation) bool { return g == ReadGeneration || g == 4 }

// WritesGeneration says that a JSONL root is written in v0 and v4 (eventstore.GenerationWriter).
func (b *Backend) WritesGeneration(g int) bool { return writesGeneration(Generation(g)) }

func (b *Backend) appendBytes(path string, expect eventstore.Artifact, content []byte) (eventstore.Artifact, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return eventstore.Artifact{}, &eventstore.IOError{Err: err}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return eventstore.Artifact{}, &eventstore.IOError{Err: err}
	}
	before := artifactOf(fi)
	if before.Token != expect.Token {
		return eventstore.Artifact{}, conflict(path, expect, before)
	}
	werr := b.step(OpWrite, path)
	if werr == nil {
		werr = b.write(f, path, content)
	}
	if werr == nil {
		if werr = b.step(OpSync, path); werr == nil {
			werr = f.Sync()
		}
	}
	if werr != nil {
		// Cut back to the size before the append, and report the state that leaves, so the writer's next
		// attempt expects its own rollback and not a foreign write. When the size could not be restored,
		// no state is reported: the next attempt then refuses as a conflict instead of appending after
		// partial bytes.
		rerr := b.truncateSynced(path, fi.Size())
		cur, serr := statArtifact(path)
		if serr == nil && cur.Size == fi.Size() {
			if rerr != nil {
				werr = fmt.Errorf("%w (cut back to %d bytes, but that could not be fsynced: %v)", werr, fi.Size(), rerr)
			}
			return cur, &eventstore.IOError{Err: werr}
		}
		return eventstore.Artifact{}, &eventstore.IOError{Err: fmt.Errorf("failed to roll back append to %s: %v (after %w)", jsonString(path), rerr, werr)}
	}
	after, err := f.Stat()
	if err != nil {
		return eventstore.Artifact{}, &eventstore.IOError{Err: err}
	}
	got := artifactOf(after)
	_ = b.step(OpAck, path) // the bytes are durable: only a crash can happen here, not a failure
	// never a failure: the batch is durable, and a failed write would be retried (unstamped, the next
	// writer that opens the session waits out the quiet period)
	_ = stampLease(filepath.Dir(path))
	if got.Size != before.Size+int64(len(content)) {
		return b.raced(path, before, got, content)
	}
	return got, nil
}

// maxRaceScan bounds what raced reads of the bytes added while it appended: beyond it, a conflict.
const maxRaceScan = 64 << 20

// raced settles an append that another process raced: after the write and fsync the file is not the
// previous size plus the batch. The batch must end up either written or not, never both in the artifact
// and (by the caller, on a conflict) in a pending sidecar:
//   - the batch is the file's tail (the foreign bytes came first): it is cut back out, only its own bytes,
//     and the append is a conflict: nothing of it was written;
//   - foreign bytes follow the batch: it was written, and is reported so; the state returned is not the
//     file's, so the writer's next append refuses as a conflict instead of stacking on foreign bytes;
//   - the batch is not found whole among the added bytes: a conflict saying which of its events are in
//     the artifact cannot be told.
func (b *Backend) raced(path string, before, got eventstore.Artifact, content []byte) (eventstore.Artifact, error) {
	race := "the artifact " + jsonString(path) + " was written by another process during this writer's append (" +
		strconv.FormatInt(before.Size, 10) + " + " + strconv.Itoa(len(content)) + " bytes became " + strconv.FormatInt(got.Size, 10) + ")"
	busy := func(msg string) error {
		return &eventstore.CommandError{Failure: eventstore.Busy, Code: eventstore.CodeConflict, Message: msg}
	}
	r, err := os.Open(path)
	if err != nil {
		return eventstore.Artifact{}, busy(race + "; whether this writer's batch is in it could not be read: " + err.Error())
	}
	defer r.Close()
	// where the batch is among what was added since the previous size (an O_APPEND write lands whole)
	found := int64(-1)
	if added := got.Size - before.Size; added <= maxRaceScan {
		buf := make([]byte, added)
		if _, err := r.ReadAt(buf, before.Size); err == nil {
			if i := bytes.Index(buf, content); i >= 0 && bytes.Index(buf[i+1:], content) < 0 {
				found = before.Size + int64(i)
			}
		}
	}
	if found < 0 {
		return eventstore.Artifact{}, busy(race + "; this writer's batch could not be told apart in it: read the session again (rescan) to see which of its events are there")
	}
	// cut back only while the file is still what was read: a third write after it must not be cut (and
	// then follows the batch, which is written)
	if tail := got.Size - int64(len(content)); found == tail {
		if cur, err := statArtifact(path); err == nil && cur.Token == got.Token {
			if err := b.truncateSynced(path, tail); err != nil {
				return eventstore.Artifact{}, busy(race + "; this writer's batch is its tail and could not be cut back (" + err.Error() + "): run rescan before writing again")
			}
			return eventstore.Artifact{}, busy(race + "; this writer's batch was cut back out of it: nothing was written")
		}
	}
	// written, with foreign bytes after it: an artifact state no stat will match, so the next append is
	// refused, not stacked on bytes this writer did not write
	written := got
	written.Size = found + int64(len(content))
	written.Token = "raced:" + got.Token
	return written, nil
}

// write writes an append's bytes; under a test hook it writes them in two halves with a step between, so a
// crash can be placed after a partial write.
func (b *Backend) write(f *os.File, path string, content []byte) error {
	if b.hook != nil && len(content) > 1 {
		half := len(content) / 2
		if _, err := f.Write(content[:half]); err != nil {
			return err
		}
		if err := b.step(OpHalf, path); err != nil {
			return err
		}
		content = content[half:]
	}
	_, err := f.Write(content)
	return err
}

func (b *Backend) truncateSynced(path string, size int64) error {
	if err := b.step(OpTruncate, path); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return err
	}
	if err := b.step(OpSync, path); err != nil {
		return err
	}
	return f.Sync()
}

// CommitRepair cuts a torn tail and appends the recovered events and closers as one batch. The cut bytes are
// first kept in a sidecar `<artifact>.torn-<unix ns>` beside the transcript — the harness's discovery reads
// only the fixed transcript name, and evidence is never thrown away.
func (b *Backend) CommitRepair(ctx context.Context, h event.Header, expect eventstore.Artifact, torn *eventstore.Torn, recovered, closers []event.Event) (eventstore.Artifact, error) {
	path, err := b.writeTarget(h)
	if err != nil {
		return eventstore.Artifact{}, err
	}
	cur, err := statArtifact(path)
	if err != nil {
		return eventstore.Artifact{}, err
	}
	if cur.Token != expect.Token {
		return eventstore.Artifact{}, conflict(path, expect, cur)
	}
	if torn != nil {
		buf, _, err := b.readArtifact(path)
		if err != nil {
			return eventstore.Artifact{}, err
		}
		if int64(len(buf)) > torn.TruncateTo {
			side := path + ".torn-" + strconv.FormatInt(time.Now().UnixNano(), 10)
			if err := b.writeSynced(side, buf[torn.TruncateTo:]); err != nil {
				return eventstore.Artifact{}, err
			}
			if err := b.syncDir(filepath.Dir(path)); err != nil {
				return eventstore.Artifact{}, err
			}
		}
		if err := b.truncateSynced(path, torn.TruncateTo); err != nil {
			return eventstore.Artifact{}, &eventstore.IOError{Err: err}
		}
		if cur, err = statArtifact(path); err != nil {
			return eventstore.Artifact{}, err
		}
	}
	batch := append(append([]event.Event(nil), recovered...), closers...)
	if len(batch) == 0 {
		_ = stampLease(filepath.Dir(path))
		return cur, nil
	}
	content, err := b.encodeFor(h, batch, nil)
	if err != nil {
		return eventstore.Artifact{}, err
	}
	return b.appendBytes(path, cur, content)
}

// KeepPending writes events that were accepted but could not be appended (the transcript changed under
// the writer) to `<artifact>.pending-<unix ns>` beside the transcript, one event line each, fsynced. The
// harness's discovery reads only the fixed transcript name, so the sidecar never disturbs it.
func (b *Backend) KeepPending(ctx context.Context, h event.Header, events []event.Event) (string, error) {
	path, err := b.Locate(h)
	if err != nil {
		return "", err
	}
	path = b.artifactOf(h, path) // named after the artifact the events were for
	var body []byte
	for _, e := range events {
		body = append(append(body, e.Raw...), '\n')
	}
	side := path + ".pending-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	if err := b.writeSynced(side, body); err != nil {
		return "", err
	}
	if err := b.syncDir(filepath.Dir(path)); err != nil {
		return "", err
	}
	return side, nil
}

// Lock takes the session's writer lock without blocking: an exclusive flock(2) on the transcript itself
// (eventstore.Flock). The harness itself takes no lock (docs/harness.md#one-writer); writes by it are caught by the
// revision check.
func (b *Backend) Lock(ctx context.Context, id string) (eventstore.WriterLock, error) {
	path, err := b.find(id)
	if err == nil {
		err = b.requireWritable(path)
	}
	if err != nil {
		return nil, err
	}
	f, _, err := b.openArtifact(path)
	if err != nil {
		return nil, err
	}
	return eventstore.Flock(f, id)
}
