package eventstore

import (
	"context"
	"os"
	"strconv"
	"time"
)

// Frozen is the frozen prefix of session id's artifact at path (eventstore.Frozen): for a session this
// Store writes, its last flush; otherwise what the backend finds, prev letting it read only what was
// appended. ok is false when the backend keeps no artifact files.
func (s *Store) Frozen(ctx context.Context, id, path string, prev Frozen) (fr Frozen, ok bool, err error) {
	fz, ok := s.b.(Freezer)
	if !ok {
		return Frozen{}, false, nil
	}
	if w := s.Live(id); w != nil && w.path == path {
		return w.frozen(), true, nil
	}
	fr, err = fz.Freeze(ctx, path, prev)
	return fr, true, err
}

// OpenArtifact opens the artifact at path with the backend's safety rules; ok is false when the backend
// keeps no artifact files.
func (s *Store) OpenArtifact(ctx context.Context, path string) (*os.File, Artifact, bool, error) {
	fz, ok := s.b.(Freezer)
	if !ok {
		return nil, Artifact{}, false, nil
	}
	f, art, err := fz.OpenArtifact(ctx, path)
	return f, art, true, err
}

// Database is, for a backend whose whole store is one database file (SQLite), the name a mirror or a backup
// gives its consistent copy and the entry to freeze and open it by; ok is false for a tree of artifacts.
func (s *Store) Database() (name string, e Entry, ok bool) {
	db, ok := s.b.(interface{ MirrorEntry() (string, Entry) })
	if !ok {
		return "", Entry{}, false
	}
	name, e = db.MirrorEntry()
	return name, e, true
}

// Mirrored reports whether the backend keeps artifact files a mirror can show.
func (s *Store) Mirrored() bool {
	_, ok := s.b.(Freezer)
	return ok
}

// frozen is the engine's last flush as a frozen prefix: exactly the bytes of its durable batches.
func (w *Session) frozen() Frozen {
	w.mu.Lock()
	defer w.mu.Unlock()
	fr := Frozen{Token: w.art.Token, Identity: w.art.Identity, Size: w.art.Size, ModTime: time.UnixMilli(w.h.CreatedAt)}
	if sl := w.shed; sl != nil {
		// a shed log is all durable
		if sl.lastTime >= 0 {
			fr.ModTime = time.UnixMilli(sl.lastTime)
		}
		return fr
	}
	if w.durable > 0 {
		if raw, ok := w.events[w.durable-1].Member("time"); ok {
			if ms, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
				fr.ModTime = time.UnixMilli(ms)
			}
		}
	}
	return fr
}
