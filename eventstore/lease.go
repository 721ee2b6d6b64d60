package eventstore

import (
	"context"
	"time"
)

// Leaser is implemented by backends whose sessions the harness guards with a cross-process write lease
// (JSONL, harness 0.1.5 and later: flock on `<session dir>/session.lock`). dshfs takes the same lease
// before any write, so that such a harness and dshfs exclude each other.
type Leaser interface {
	// Lease takes session id's write lease without waiting and holds it until Release; a *CommandError
	// (Busy, CodeOwned) when another process holds it. Readers never take it.
	Lease(ctx context.Context, id string) (WriterLock, error)
}

// LiveCheck is one question to a LiveProber: is session ID being written by a writer that takes no lease?
type LiveCheck struct {
	ID   string
	Path string // the artifact, where known ("": the backend finds it)
	// Expect is the artifact as this writer last wrote or read it; zero when it holds none. A change since
	// Expect is foreign; with no Expect, a change within Quiet that no dshfs writer made or acknowledged is.
	Expect Artifact
	Quiet  time.Duration
	// Scan also looks for other processes holding the artifact open for writing (it reads /proc: once
	// per batch, right before it is accepted or written).
	Scan bool
}

// LiveProber is implemented by backends whose artifacts a harness without the lease (rc.8) writes in
// place: it reports the signs of such a writer, and records a user's acknowledgement of them.
type LiveProber interface {
	// LiveElsewhere returns nil when c's session shows no sign of another writer, else a *CommandError
	// (Busy, CodeLiveElsewhere) saying what was seen and how to override it.
	LiveElsewhere(ctx context.Context, c LiveCheck) error
	// Acknowledge accepts every change of session id made so far, as if this process had written it: the
	// user made sure no harness runs the session. It never overrides a lease or an open descriptor.
	Acknowledge(ctx context.Context, id string) error
}

// WriteLock takes everything a write of session id needs: the harness's write lease where the backend
// has one (Leaser), then the backend's own writer lock, which still guards what the lease does not (a
// dshfs that predates the lease; the SQLite backend, which has no lease).
func WriteLock(ctx context.Context, b Backend, id string) (WriterLock, error) {
	lb, ok := b.(Leaser)
	if !ok {
		return b.Lock(ctx, id)
	}
	lease, err := lb.Lease(ctx, id)
	if err != nil {
		return nil, err
	}
	own, err := b.Lock(ctx, id)
	if err != nil {
		lease.Release()
		return nil, err
	}
	return bothLocks{lease: lease, own: own}, nil
}

// bothLocks is a lease and the backend's own lock, released in the reverse order of taking.
type bothLocks struct{ lease, own WriterLock }

func (l bothLocks) Release() error {
	err := l.own.Release()
	if lerr := l.lease.Release(); err == nil {
		err = lerr
	}
	return err
}

// writeLock is WriteLock, followed by the live-writer probe when probe is set: a session that a writer
// without the lease is writing is refused before it is read, and the lock given back.
func (s *Store) writeLock(ctx context.Context, id string, probe bool) (WriterLock, error) {
	l, err := WriteLock(ctx, s.b, id)
	if err != nil || !probe {
		return l, err
	}
	if err := s.probe(ctx, LiveCheck{ID: id, Quiet: s.ForeignQuiet, Scan: true}); err != nil {
		l.Release()
		return nil, err
	}
	return l, nil
}

// probe asks the backend whether the session is live elsewhere, and remembers a session that is, so a
// rescan can acknowledge it.
func (s *Store) probe(ctx context.Context, c LiveCheck) error {
	p, ok := s.b.(LiveProber)
	if !ok {
		return nil
	}
	err := p.LiveElsewhere(ctx, c)
	if ce := AsCommandError(err); ce != nil && ce.Code == CodeLiveElsewhere {
		s.mu.Lock()
		s.foreign[c.ID] = true
		s.mu.Unlock()
	}
	return err
}

// Acknowledge accepts the foreign changes of session id made so far (the CLI's --force): the user made sure
// no harness runs it. A backend without live probing has nothing to acknowledge.
func (s *Store) Acknowledge(ctx context.Context, id string) error {
	p, ok := s.b.(LiveProber)
	if !ok {
		return nil
	}
	if err := p.Acknowledge(ctx, id); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.foreign, id)
	s.mu.Unlock()
	return nil
}

// AcknowledgeForeign acknowledges every session this Store refused as live elsewhere (the store's
// rescan), and returns how many.
func (s *Store) AcknowledgeForeign(ctx context.Context) (int, error) {
	s.mu.Lock()
	ids := make([]string, 0, len(s.foreign))
	for id := range s.foreign {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	n := 0
	for _, id := range ids {
		if err := s.Acknowledge(ctx, id); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// checkElsewhere is the engine's check right before it accepts events: the artifact must still be what
// it last wrote or read, and — once per batch, when nothing is pending — no other process may hold it
// open for writing. A foreign change with nothing pending stops the engine until a rescan; with events
// pending, their flush meets the same change and keeps them in a sidecar.
func (w *Session) checkElsewhere() error {
	w.mu.Lock()
	if w.closed || w.conflict != nil {
		w.mu.Unlock()
		return nil // writableLocked refuses
	}
	idle := w.durable == w.lenLocked()
	c := LiveCheck{ID: w.id, Path: w.path, Expect: w.art, Quiet: w.st.ForeignQuiet, Scan: idle && w.scanDueLocked()}
	w.mu.Unlock()
	err := w.st.probe(context.Background(), c)
	if err == nil {
		return nil
	}
	if ce := AsCommandError(err); ce.Code == CodeLiveElsewhere {
		// A batch of this engine may have been written between the look at w.art and the probe: once no
		// batch is being written (wmu), the artifact must be what this engine last wrote.
		w.wmu.Lock()
		w.mu.Lock()
		expect := w.art
		w.mu.Unlock()
		if expect.Token != c.Expect.Token {
			c.Expect = expect
			err = w.st.probe(context.Background(), c)
		}
		w.wmu.Unlock()
		if err == nil {
			return nil
		}
	}
	ce := AsCommandError(err)
	if ce.Code == CodeLiveElsewhere && idle {
		w.mu.Lock()
		if w.durable == w.lenLocked() && w.art.Token == c.Expect.Token && w.conflict == nil {
			if cur, serr := w.st.b.Stat(context.Background(), w.id, w.path); serr == nil && cur.Token != c.Expect.Token {
				w.conflict = ce // the artifact changed: this engine's log is stale until a rescan
			}
		}
		w.mu.Unlock()
	}
	return ce
}

// scanEvery is how often a live engine reads /proc for other writers of its artifact: the scan costs a few
// milliseconds (every visible process's descriptors), and a harness's batches are hundreds of
// milliseconds apart, while the revision check before every write costs one stat and catches every write
// that has landed.
const scanEvery = 100 * time.Millisecond

// scanDueLocked reports whether the next check should scan /proc, and if so counts it as done (mu held).
func (w *Session) scanDueLocked() bool {
	now := time.Now()
	if now.Sub(w.scanned) < scanEvery {
		return false
	}
	w.scanned = now
	return true
}
