package backup

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dshfs/dshfs/eventstore/event"
)

// Manifest is MANIFEST.json: what a backup holds.
type Manifest struct {
	DshfsVersion   string         `json:"dshfsVersion"`
	HarnessRelease string         `json:"harnessRelease"`
	Backend        string         `json:"backend"`
	FormatVersion  int            `json:"formatVersion"`
	CreatedAt      time.Time      `json:"createdAt"`
	Source         string         `json:"source"`
	Expected       *Expected      `json:"expected"` // nil in a manifest of an older dshfs
	Sessions       []SessionEntry `json:"sessions"`
	// Skipped are the sessions of the store the backup could not hold as stored (a session the source
	// refuses, one the copy's format cannot represent), each with why: the backup holds the others.
	Skipped []Skipped `json:"skipped,omitempty"`
}

// Skipped is a session a backup left out, and why.
type Skipped struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// Expected is what a backup holds as a whole, counted when it was taken: the sessions (as ls lists them,
// refused ones included), their events (as check reads them) and the files (artifacts, spill copies).
// The per-session entries alone cannot show a session dropped from both the copy and the manifest, nor
// a backup that copied nothing; verify checks the copy against these totals.
type Expected struct {
	Sessions int64 `json:"sessions"`
	Events   int64 `json:"events"`
	Files    int64 `json:"files"`
}

// expected is the totals of the manifest's entries.
func (m *Manifest) expected() Expected {
	var e Expected
	paths := map[string]bool{} // a SQLite backup lists every session in one file
	for _, s := range m.Sessions {
		e.Sessions++
		e.Events += s.Events
		if !paths[s.Path] {
			paths[s.Path] = true
			e.Files++
		}
		for _, f := range s.Beside {
			if !paths[f.Path] {
				paths[f.Path] = true
				e.Files++
			}
		}
		for _, l := range s.Spill {
			if l.File != "" && !paths[l.File] {
				paths[l.File] = true
				e.Files++
			}
		}
	}
	return e
}

// SessionEntry is one session of a backup: its artifact (path relative to the backup, size, SHA-256) and
// the events it held (DurableSeq = Events-1: every copied event is durable) — or, for a session the store
// refused, the refusal, its artifact copied as it was.
type SessionEntry struct {
	ID         string    `json:"id"`
	Path       string    `json:"path"`
	Bytes      int64     `json:"bytes"`
	SHA256     string    `json:"sha256"`
	Events     int64     `json:"events"`
	DurableSeq int64     `json:"durableSeq"`
	Refusal    string    `json:"refusal,omitempty"`
	Spill      []Locator `json:"spill"`
	// Beside are the session's other generation files beside its artifact (older generations an upgraded
	// harness leaves untouched, files in the other encoding), copied whole; nil in a manifest of an older
	// dshfs.
	Beside []FileEntry `json:"beside"`
}

// FileEntry is one file of a backup beside a session's artifact: its path relative to the backup, size
// and SHA-256.
type FileEntry struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Locator is one spill locator a session cites, with its status when the backup was taken.
type Locator struct {
	Seq      int64  `json:"seq"`
	CallID   string `json:"callId"`
	Locator  string `json:"locator"`
	Status   string `json:"status"` // present, missing or outside-roots
	Bytes    int64  `json:"bytes"`  // the target's size when present, else -1 (null in the files)
	Shadowed bool   `json:"shadowed"`
	File     string `json:"file"` // the copy in the backup (--with-spill), relative to it; "" when none
}

func nullable(s string) event.Value {
	if s == "" {
		return event.Null()
	}
	return event.String(s)
}

func (l Locator) value(session string) event.Value {
	bytes := event.Null()
	if l.Bytes >= 0 {
		bytes = event.Int(l.Bytes)
	}
	var m []event.Member
	if session != "" {
		m = append(m, event.Member{Key: "session", Value: event.String(session)})
	}
	return event.Object(append(m,
		event.Member{Key: "seq", Value: event.Int(l.Seq)},
		event.Member{Key: "callId", Value: event.String(l.CallID)},
		event.Member{Key: "locator", Value: event.String(l.Locator)},
		event.Member{Key: "status", Value: event.String(l.Status)},
		event.Member{Key: "bytes", Value: bytes},
		event.Member{Key: "shadowed", Value: event.Bool(l.Shadowed)},
		event.Member{Key: "file", Value: nullable(l.File)},
	)...)
}

// indexLine is the locator's spill-index.jsonl line.
func (l Locator) indexLine(session string) []byte {
	return append(event.Stringify(l.value(session)), '\n')
}

// JSON is the manifest as written: one object, keys in a fixed order, and a line feed.
func (m *Manifest) JSON() []byte {
	sessions := make([]event.Value, len(m.Sessions))
	for i, s := range m.Sessions {
		locs := make([]event.Value, len(s.Spill))
		for j, l := range s.Spill {
			locs[j] = l.value("")
		}
		preds := make([]event.Value, len(s.Beside))
		for j, f := range s.Beside {
			preds[j] = event.Object(
				event.Member{Key: "path", Value: event.String(f.Path)},
				event.Member{Key: "bytes", Value: event.Int(f.Bytes)},
				event.Member{Key: "sha256", Value: event.String(f.SHA256)},
			)
		}
		durable := event.Int(s.DurableSeq)
		if s.Refusal != "" {
			durable = event.Null()
		}
		sessions[i] = event.Object(
			event.Member{Key: "id", Value: event.String(s.ID)},
			event.Member{Key: "path", Value: event.String(s.Path)},
			event.Member{Key: "bytes", Value: event.Int(s.Bytes)},
			event.Member{Key: "sha256", Value: event.String(s.SHA256)},
			event.Member{Key: "events", Value: event.Int(s.Events)},
			event.Member{Key: "durableSeq", Value: durable},
			event.Member{Key: "refusal", Value: nullable(s.Refusal)},
			event.Member{Key: "spill", Value: event.Array(locs...)},
			event.Member{Key: "beside", Value: event.Array(preds...)},
		)
	}
	expected := event.Null()
	if e := m.Expected; e != nil {
		expected = event.Object(
			event.Member{Key: "sessions", Value: event.Int(e.Sessions)},
			event.Member{Key: "events", Value: event.Int(e.Events)},
			event.Member{Key: "files", Value: event.Int(e.Files)},
		)
	}
	members := []event.Member{
		event.Member{Key: "dshfsVersion", Value: event.String(m.DshfsVersion)},
		event.Member{Key: "harnessRelease", Value: event.String(m.HarnessRelease)},
		event.Member{Key: "backend", Value: event.String(m.Backend)},
		event.Member{Key: "formatVersion", Value: event.Int(int64(m.FormatVersion))},
		event.Member{Key: "createdAt", Value: event.String(m.CreatedAt.Format(time.RFC3339Nano))},
		event.Member{Key: "source", Value: event.String(m.Source)},
		event.Member{Key: "expected", Value: expected},
		event.Member{Key: "sessions", Value: event.Array(sessions...)},
	}
	if len(m.Skipped) > 0 {
		skipped := make([]event.Value, len(m.Skipped))
		for i, k := range m.Skipped {
			skipped[i] = event.Object(
				event.Member{Key: "id", Value: event.String(k.ID)},
				event.Member{Key: "reason", Value: event.String(k.Reason)},
			)
		}
		members = append(members, event.Member{Key: "skipped", Value: event.Array(skipped...)})
	}
	return append(event.Stringify(event.Object(members...)), '\n')
}

// ReadManifest reads dir's MANIFEST.json.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", ManifestFile, err)
	}
	for i, s := range m.Sessions {
		if s.DurableSeq == 0 && s.Refusal != "" {
			m.Sessions[i].DurableSeq = -1 // null
		}
		for j, l := range s.Spill {
			if l.Status != "present" {
				m.Sessions[i].Spill[j].Bytes = -1
			}
		}
	}
	return &m, nil
}
