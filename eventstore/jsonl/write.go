package jsonl

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
)

// Materialize publishes a new transcript holding the header and the first batch, which may be empty
// (spec/jsonl.md §5.2): directories created 0700 and fsynced, content written to an exclusive temp file,
// fsynced, then hard-linked to the final name so an existing log is never clobbered, and the session
// directory fsynced.
func (b *Backend) Materialize(ctx context.Context, h event.Header, batch []event.Event) (eventstore.Artifact, error) {
	final, err := b.Locate(h)
	if err != nil {
		return eventstore.Artifact{}, err
	}
	opp := strings.TrimSuffix(final, b.mode.Suffix()) + b.mode.opposite().Suffix()
	if exists(opp) {
		return eventstore.Artifact{}, errors.New(b.mismatchText(opp))
	}
	content := b.encodeHeader(h)
	if len(batch) > 0 {
		content = b.appendBatch(content, batch)
	}
	dir := filepath.Dir(final)
	project := filepath.Dir(dir)
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
			return eventstore.Artifact{}, &eventstore.CommandError{Failure: eventstore.Exists, Code: eventstore.CodeAlreadyExists,
				Message: `refusing to materialize "` + h.ID + `": a log already exists on disk (load/resume it instead)`, Err: err}
		}
		return eventstore.Artifact{}, &eventstore.IOError{Err: err}
	}
	if err := b.syncDir(dir); err != nil {
		return eventstore.Artifact{}, err
	}
	_ = os.Remove(tmp)  // the publish is already durable; a stale temp link is harmless
	_ = stampLease(dir) // unstamped, the next writer waits out the quiet period: the session is published
	return statArtifact(final)
}

func (b *Backend) encodeHeader(h event.Header) []byte {
	line := append(h.Line(), '\n')
	if b.mode == Zstd {
		return EncodeFrame(nil, line)
	}
	return line
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
		lines = event.PackBatch(batch)
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
// cannot leave a seq gap (spec/jsonl.md §5.3).
func (b *Backend) AppendBatch(ctx context.Context, h event.Header, expect eventstore.Artifact, batch []event.Event, packing []event.Packing) (eventstore.Artifact, error) {
	path, err := b.Locate(h)
	if err != nil {
		return eventstore.Artifact{}, err
	}
	return b.appendBytes(path, expect, b.encodeBatch(nil, batch, packing))
}

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
		return got, &eventstore.CommandError{Failure: eventstore.Busy, Code: eventstore.CodeConflict,
			Message: "the artifact " + jsonString(path) + " was written by another process during this writer's append (" +
				strconv.FormatInt(before.Size, 10) + " + " + strconv.Itoa(len(content)) + " bytes became " + strconv.FormatInt(got.Size, 10) + ")"}
	}
	return got, nil
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
	path, err := b.Locate(h)
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
	return b.appendBytes(path, cur, b.appendBatch(nil, batch))
}

// KeepPending writes events that were accepted but could not be appended (the transcript changed under
// the writer) to `<artifact>.pending-<unix ns>` beside the transcript, one event line each, fsynced. The
// harness's discovery reads only the fixed transcript name, so the sidecar never disturbs it.
func (b *Backend) KeepPending(ctx context.Context, h event.Header, events []event.Event) (string, error) {
	path, err := b.Locate(h)
	if err != nil {
		return "", err
	}
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
// (eventstore.Flock). The harness itself takes no lock (spec/jsonl.md §6); writes by it are caught by the
// revision check.
func (b *Backend) Lock(ctx context.Context, id string) (eventstore.WriterLock, error) {
	path, err := b.find(id)
	if err != nil {
		return nil, err
	}
	f, _, err := b.openArtifact(path)
	if err != nil {
		return nil, err
	}
	return eventstore.Flock(f, id)
}
