package eventstore

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"time"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
)

// Fork is the harness's SessionStore.fork (docs/harness.md#fork-resume-and-the-end-seed) over a stored or
// live session: the child holds the parent's events 0..boundary (inclusive; nil means the last) followed by a
// session/end-seed, and a header naming the parent, the seed length and the parent's cwd. The checks run in
// the harness's order with its codes and texts; on any error no child exists. A live parent is flushed first,
// so the child is always a durable prefix. The child is published atomically, header and events together. It
// returns the child id (a new UUIDv4 when child is "").
func (s *Store) Fork(ctx context.Context, id string, boundary *int64, child string) (string, error) {
	if child != "" {
		if err := checkNewID(child); err != nil {
			return "", err
		}
		if err := s.absent(ctx, child); err != nil {
			return "", err
		}
	}
	events, h, err := s.forkSource(ctx, id)
	if err != nil {
		return "", err
	}
	if h.Logical != nil && h.Version != 4 {
		// a child takes its parent's generation, and dshfs writes v0 and v4 only: a v0 child holding a
		// v2 or v3 log's events would be a log no harness reads
		return "", cmdErr(Refused, CodeBadInput, fmt.Sprintf("session %s is format generation v%s: dshfs does not materialize a child of that generation (fork it with the harness that wrote it); nothing was written", jsQuote(id), event.FormatNumber(h.Version)))
	}
	seed, err := forkSeed(id, events, boundary)
	if err != nil {
		return "", err
	}
	if child == "" {
		child = NewSessionID()
	}
	now := time.Now().UnixMilli()
	parent := event.String(id)
	var ch event.Header
	var batch []event.Event
	if h.Version == 4 {
		if ch, batch, err = forkV4(h, id, child, seed, now); err != nil {
			return "", err
		}
	} else {
		length := event.Int(int64(len(seed)))
		ch = event.Header{ID: child, CreatedAt: now, Cwd: h.Cwd, ParentSession: &parent, SeedLength: &length}
		batch = append([]event.Event(nil), seed...)
		if n := len(seed); n == 0 || seed[n-1].Type != "session/end-seed" {
			batch = append(batch, event.NewEventFrom("session/end-seed", int64(n), now, []byte("{}")))
		}
	}
	defer s.lock(child)()
	if err := s.absent(ctx, child); err != nil {
		return "", err
	}
	if _, err := s.b.Locate(ch); err != nil {
		return "", cmdErr(Invalid, CodeBadInput, err.Error())
	}
	if err := s.WritesHeld(); err != nil {
		return "", err
	}
	if _, err := s.b.Materialize(ctx, ch, batch); err != nil {
		return "", AsCommandError(err)
	}
	return child, nil
}

// forkSource is the parent's log as a fork sees it: a live parent flushed, a stored one as stored.
func (s *Store) forkSource(ctx context.Context, id string) ([]event.Event, event.Header, error) {
	if w := s.Live(id); w != nil {
		if err := w.Flush(ctx); err != nil {
			return nil, event.Header{}, err
		}
		snap, err := w.SnapshotContext(ctx)
		if err != nil {
			return nil, event.Header{}, AsCommandError(err)
		}
		return snap.Events, snap.Header, nil
	}
	// A stored parent is read under its writer lock: a writer elsewhere may hold accepted events that
	// are not durable yet, and the child must be a durable prefix of what that writer acknowledged.
	l, err := s.writeLock(ctx, id, false)
	if err != nil {
		if IsNotFound(err) {
			return nil, event.Header{}, cmdErr(Missing, CodeNotFound, "session "+jsQuote(id)+" not found")
		}
		return nil, event.Header{}, AsCommandError(err)
	}
	defer l.Release()
	ins, err := s.Inspect(ctx, id)
	if err != nil {
		return nil, event.Header{}, AsCommandError(err)
	}
	return ins.Events[:len(ins.Events)-len(ins.Closers)], ins.Header, nil
}

// forkSeed applies the boundary rules (docs/harness.md#fork-resume-and-the-end-seed: the boundary checks) and
// returns the seed.
func forkSeed(id string, events []event.Event, boundary *int64) ([]event.Event, error) {
	invalid := func(msg string) error { return cmdErr(Invalid, CodeInvalidBoundary, msg) }
	if boundary == nil {
		if len(events) == 0 {
			return nil, nil
		}
		last := int64(len(events) - 1)
		boundary = &last
	}
	b := *boundary
	if b < 0 || b > event.MaxSafeInteger {
		return nil, InvalidBoundary(id, strconv.FormatInt(b, 10))
	}
	if b >= int64(len(events)) {
		last := "none"
		if len(events) > 0 {
			last = strconv.Itoa(len(events) - 1)
		}
		return nil, invalid(fmt.Sprintf("fork boundary %d does not exist in session %s (last seq: %s)", b, jsQuote(id), last))
	}
	if events[b].Seq != b {
		return nil, invalid(fmt.Sprintf("fork boundary %d does not match a contiguous event seq in session %s", b, jsQuote(id)))
	}
	for i := b; i >= 0; i-- {
		switch events[i].Type {
		case "turn/end":
			return events[:b+1], nil
		case "turn/start":
			turn := "undefined"
			if raw, ok := event.Lookup(events[i].Raw, "data", "turn"); ok {
				turn = string(raw)
			}
			return nil, cmdErr(Invalid, CodeOpenTurn, fmt.Sprintf("fork boundary %d in session %s ends inside open turn %s", b, jsQuote(id), turn))
		}
	}
	return events[:b+1], nil
}

// InvalidBoundary is the harness's refusal of a fork boundary that is not a non-negative safe integer;
// got is the boundary as the user wrote it (a ctl word or a CLI argument that may not parse at all).
func InvalidBoundary(id, got string) *CommandError {
	return cmdErr(Invalid, CodeInvalidBoundary, "fork boundary for session "+jsQuote(id)+" must be a non-negative safe integer, got "+got)
}

// NewSessionID is a random RFC 4122 version 4 UUID, the harness's default child id (crypto.randomUUID).
func NewSessionID() string { return NewUUID() }

// NewUUID is a random RFC 4122 version 4 UUID in crypto.randomUUID's form: session ids, and the store and
// incarnation ids the database backends keep. crypto/rand.Read does not fail (it ends the program
// instead), so there is no error to return.
func NewUUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// forkV4 is the child of a v4 parent with header h: a v4 session (docs/formats.md#v4) whose header says it
// is seeded from its parent, holding the seed and then the `session/end-seed {"inherited":true}` that
// marks the inherited cut (a v4 header has no seedLength). The fork boundary rules leave no tool call open
// in the seed, so no fork result is needed. The child is checked by the v4 reader's rules before anything
// is written.
func forkV4(h event.Header, parent, child string, seed []event.Event, now int64) (event.Header, []event.Event, error) {
	gh := generation.Header{Version: 4, ID: child, CreatedAt: now, ParentSession: &parent, IsSeeded: true}
	if h.Cwd != nil && h.Cwd.Kind == event.KindString {
		cwd := h.Cwd.Str
		gh.Cwd = &cwd
	}
	gh = gh.Encoded()
	cut := int64(len(seed))
	batch := append(append([]event.Event(nil), seed...), event.NewEventFrom("session/end-seed", cut, now, []byte(`{"inherited":true}`)))
	if _, err := generation.CheckV4Append(gh, cut, nil, batch); err != nil {
		return event.Header{}, nil, cmdErr(Invalid, CodeBadInput, fmt.Sprintf("the fork of session %s would not be a v4 log the harness reads: %v; nothing was written", jsQuote(parent), err))
	}
	p := event.String(parent)
	return event.Header{Version: 4, ID: child, CreatedAt: now, Cwd: h.Cwd, ParentSession: &p, Logical: gh.Raw}, batch, nil
}
