package eventstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/load"
)

// Live returns the engine of a session this Store writes, nil when it holds none.
func (s *Store) Live(id string) *Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[id]
}

// LiveIDs lists the sessions this Store writes.
func (s *Store) LiveIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.live))
	for id := range s.live {
		ids = append(ids, id)
	}
	return ids
}

// Record remembers the outcome of a command on a session for its status.json.
func (s *Store) Record(id string, r Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.results[id]
	if rs == nil {
		rs = &results{}
		s.results[id] = rs
	}
	rs.last = &r
	if r.Err != nil {
		rs.lastErr = &r
	}
	rs.gen++
}

// Results returns the last command and the last failed command of a session (nil when none), and a
// generation that changes whenever either does.
func (s *Store) Results(id string) (last, lastErr *Result, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rs := s.results[id]; rs != nil {
		return rs.last, rs.lastErr, rs.gen
	}
	return nil, nil, 0
}

// Writer returns the engine of a session for writing: the live one, or the stored session opened live.
// A stored session is opened only when it can be continued as it is — balanced (no open turn), no live
// compaction lock, no torn tail — otherwise the error says to run resume: a crashed or foreign writer's
// turn is never closed implicitly. The writer lock is taken before the log is read.
func (s *Store) Writer(ctx context.Context, id string) (*Session, error) {
	defer s.lock(id)()
	if w := s.Live(id); w != nil {
		return w, nil
	}
	return s.lockAndAdopt(ctx, id, func() (*Inspection, error) {
		ins, err := s.Inspect(ctx, id)
		if err != nil {
			return nil, err
		}
		return ins, resumeNeeded(id, ins)
	})
}

// lockAndAdopt takes the session's writer lock, reads it with read (under the lock, so nobody writes in
// between) and makes it live; the lock is given back when read fails.
func (s *Store) lockAndAdopt(ctx context.Context, id string, read func() (*Inspection, error)) (*Session, error) {
	l, err := s.writeLock(ctx, id, true)
	if err != nil {
		return nil, err
	}
	ins, err := read()
	if err != nil {
		l.Release()
		return nil, err
	}
	return s.adopt(id, ins, l), nil
}

// resumeNeeded says why a stored session cannot be continued without a resume, nil when it can.
func resumeNeeded(id string, ins *Inspection) error {
	stored := ins.Events[:len(ins.Events)-len(ins.Closers)]
	switch {
	case len(ins.Closers) > 0:
		turn, _ := load.OpenTurn(stored)
		return cmdErr(Busy, CodeOpenTurn, fmt.Sprintf("session %s ends inside open turn %d, which a harness may still be writing (one before 0.1.5 takes no lock) or a crashed writer left open; nothing was written. Only when no harness runs this session, resume closes the turn with the harness's interrupted repair", jsQuote(id), turn))
	case ins.Prefix.Torn != nil:
		return cmdErr(Busy, CodeTornTail, fmt.Sprintf("session %s has %d torn bytes past its committed log; run resume to cut them (they are kept in a sidecar)", jsQuote(id), ins.Prefix.Torn.Bytes))
	case ins.Prefix.Later != nil && ins.Prefix.Later.RepairErr != nil:
		return cmdErr(Busy, CodeOpenTurn, fmt.Sprintf("session %s ends inside an open turn that no v4 repair closes: %v; nothing was written", jsQuote(id), ins.Prefix.Later.RepairErr))
	case CompactionLocked(stored):
		return cmdErr(Busy, CodeCompactionLock, fmt.Sprintf("session %s holds a live compaction lock (a compaction/start with no compaction/end); run resume to end its lifecycle", jsQuote(id)))
	}
	return nil
}

// CompactionLocked reports whether the log holds a live compaction lock, as the harness's
// inspectCompactionEntryState decides it (docs/harness.md#the-compaction-lock): scanning backwards, the
// newest compaction/start-or-end marker is a start, and no session/end-seed follows it. The harness does
// not match ids here: any newer end, of whatever transaction, hides an older start.
func CompactionLocked(events []event.Event) bool {
	_, locked := openCompaction(events)
	return locked
}

// openCompaction returns the index of the compaction/start holding the lock (see CompactionLocked).
func openCompaction(events []event.Event) (int, bool) {
	for i := len(events) - 1; i >= 0; i-- {
		switch events[i].Type {
		case "session/end-seed", "compaction/end":
			return -1, false
		case "compaction/start":
			return i, true
		}
	}
	return -1, false
}

// adopt makes a validated stored session live in this Store.
func (s *Store) adopt(id string, ins *Inspection, l WriterLock) *Session {
	w := newSession(s, id, ins, l)
	s.mu.Lock()
	s.live[id] = w
	s.mu.Unlock()
	w.mu.Lock()
	w.usedLocked()
	w.mu.Unlock()
	s.trimLive(w)
	return w
}

// release forgets a live engine (after Close, or a conflict being rescanned).
func (s *Store) release(w *Session) {
	s.mu.Lock()
	if s.live[w.id] == w {
		delete(s.live, w.id)
	}
	s.mu.Unlock()
}

// Resume is the harness's resume (prepare): take the writer lock, commit the crash repair (torn bytes
// kept in a sidecar, recovered events and closers appended), then append a session/end-seed unless the
// log already ends with one. The session stays live in this Store. A session this Store already holds
// live is refused when its turn is open (its writer is alive: nothing to repair) and otherwise resumed
// in place.
func (s *Store) Resume(ctx context.Context, id string) (*Session, error) {
	if err := s.WritesHeld(); err != nil {
		return nil, err
	}
	defer s.lock(id)()
	w := s.Live(id)
	if w == nil {
		var err error
		if w, err = s.lockAndAdopt(ctx, id, func() (*Inspection, error) { return s.repair(ctx, id) }); err != nil {
			return nil, err
		}
	} else if err := w.resumable(); err != nil {
		return nil, err
	}
	if err := w.endSeed(ctx); err != nil {
		return w, err
	}
	return w, nil
}

// Create materializes a header-only session at once (every create — ctl, mkdir, CLI — does, so the
// harness lists and opens it). An existing session, an empty id or one the backend cannot name is
// refused, and nothing is written. The header is written as given (commands build valid ones; tests
// build invalid ones on purpose).
func (s *Store) Create(ctx context.Context, h event.Header) error {
	defer s.lock(h.ID)()
	if err := checkNewID(h.ID); err != nil {
		return err
	}
	if g := int(h.Version); !s.writesGeneration(g) {
		return cmdErr(Invalid, CodeBadInput, fmt.Sprintf("the %s store does not write format generation v%d sessions (dshfs writes v4 in JSONL roots and fleet stores only); nothing was written", s.b.Name(), g))
	}
	if _, err := s.b.Locate(h); err != nil {
		return cmdErr(Invalid, CodeBadInput, err.Error())
	}
	if err := s.absent(ctx, h.ID); err != nil {
		return err
	}
	if err := s.WritesHeld(); err != nil {
		return err
	}
	if _, err := s.b.Materialize(ctx, h, nil); err != nil {
		return AsCommandError(err)
	}
	return nil
}

// absent refuses an id that a live engine or a stored artifact already uses, with the harness's text. A
// lookup that failed (the disk, the database) says nothing either way: it is that failure (EIO), never
// "exists" or "not found".
func (s *Store) absent(ctx context.Context, id string) error {
	exists := s.Live(id) != nil
	if !exists {
		_, err := s.b.Stat(ctx, id, "")
		var ioe *IOError
		if errors.As(err, &ioe) {
			return &CommandError{Failure: Failed, Code: CodeWriteFailed,
				Message: "cannot tell whether session " + jsQuote(id) + " exists: " + err.Error() + "; nothing was created", Err: err}
		}
		exists = err == nil || !IsNotFound(err)
	}
	if exists {
		return cmdErr(Exists, CodeAlreadyExists, "session "+jsQuote(id)+" already exists")
	}
	return nil
}

// Append is one writer run over explicit events: the session's engine (opened live if needed) accepts
// the batch, whose first seq must be the next one, and flushes it as one durable batch.
func (s *Store) Append(ctx context.Context, id string, batch []event.Event) error {
	if len(batch) == 0 {
		return nil
	}
	w, err := s.Writer(ctx, id)
	if err != nil {
		return err
	}
	if err := w.AcceptEvents(batch); err != nil {
		return err
	}
	return w.Flush(ctx)
}

// Close flushes and releases every live session. A session whose flush fails is abandoned with its
// pending events kept in a sidecar beside the artifact (Session.Abandon), so nothing accepted is lost when
// the process ends; the first error is returned and every failure recorded.
func (s *Store) Close(ctx context.Context) error {
	s.ResumeWrites("unmount") // closing ends a quiesce: what was accepted is written as usual
	var first error
	for _, id := range s.LiveIDs() {
		w := s.Live(id)
		if w == nil {
			continue
		}
		err := w.Close(ctx)
		if err != nil {
			err = w.Abandon(ctx, err)
			s.Record(id, Result{Command: "close", Err: AsCommandError(err)})
			if first == nil {
				first = err
			}
		}
	}
	return first
}

// Rescan releases every live session whose artifact changed under it (its pending events are already
// kept in a sidecar), so the next write reads the session again. It returns how many were released;
// AcknowledgeForeign then accepts their foreign changes, with those of the sessions refused as live
// elsewhere.
func (s *Store) Rescan() int {
	n := 0
	for _, id := range s.LiveIDs() {
		if w := s.Live(id); w != nil && w.conflicted() {
			w.release()
			s.mu.Lock()
			s.foreign[id] = true // another process wrote it: AcknowledgeForeign accepts that change too
			s.mu.Unlock()
			n++
		}
	}
	return n
}

// checkNewID refuses an id a new session (create, a fork's child) cannot take: an empty one, one holding
// NUL (which no C tool can pass around, though a directory name can encode it), and bytes that are not
// WTF-8 — UTF-8 plus the lone surrogates a JS string may hold — which encoding the header would silently
// replace with U+FFFD, so that the session created is not the one asked for.
func checkNewID(id string) error {
	if id == "" {
		return cmdErr(Invalid, CodeBadInput, "session id must be a non-empty string")
	}
	if strings.IndexByte(id, 0) >= 0 {
		return cmdErr(Invalid, CodeBadInput, "session id "+strconv.Quote(id)+" contains NUL; a session id cannot")
	}
	if at := invalidWTF8(id); at >= 0 {
		return cmdErr(Invalid, CodeBadInput, fmt.Sprintf("session id %s is not valid UTF-8 (byte 0x%02X at offset %d); nothing was created", strconv.Quote(id), id[at], at))
	}
	return nil
}

// invalidWTF8 is the offset of the first byte of s that is neither UTF-8 nor the WTF-8 form of a lone
// surrogate (ED A0..BF 80..BF), -1 when there is none.
func invalidWTF8(s string) int {
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			i++
			continue
		}
		if s[i] == 0xED && i+2 < len(s) && s[i+1] >= 0xA0 && s[i+1] <= 0xBF && s[i+2]&0xC0 == 0x80 {
			i += 3
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return -1
}
