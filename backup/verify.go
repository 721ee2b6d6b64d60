package backup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/views"
)

// Problem is one finding of Verify: the session it concerns ("" for the backup as a whole), a kind and
// what is wrong.
type Problem struct {
	ID      string
	Kind    string // manifest, missing, extra, checksum, size, events, header, surface, messages, or check's kinds
	Message string
}

// Verify checks a backup as `dshfs check` checks a store, and more: the manifest is there and whole; every
// session it lists is there, with the same size and SHA-256, holding the same number of events, seqs
// contiguous from 0, its header naming its id; its surface and messages can be derived; no artifact is
// there that the manifest does not list. A refused session is a problem, as for check, even when the backup
// recorded the refusal (it copied the artifact as it was). io is true when something could not be read at
// all.
func Verify(ctx context.Context, dir string, opts Options) (problems []Problem, io bool) {
	add := func(id, kind, format string, a ...any) {
		problems = append(problems, Problem{ID: id, Kind: kind, Message: fmt.Sprintf(format, a...)})
	}
	m, err := ReadManifest(dir)
	if err != nil {
		add("", "manifest", "%v", err)
		return problems, errors.Is(err, fs.ErrNotExist) && !exists(dir)
	}
	st, err := opts.Open(dir)
	if err != nil {
		add("", "manifest", "the backup is not a store: %v", err)
		return problems, true
	}
	l, err := st.List(ctx)
	if err != nil {
		add("", "manifest", "listing the backup: %v", err)
		return problems, true
	}
	for _, r := range l.RootErrors {
		add("", "root", "%s", r.Message)
	}
	// Sessions are keyed by artifact and id: in a SQLite backup every session is in one file.
	type key struct{ path, id string }
	byKey := map[key]eventstore.Entry{}
	for _, e := range l.Entries {
		if rel, err := filepath.Rel(dir, e.Path); err == nil {
			byKey[key{filepath.ToSlash(rel), e.ID}] = e
		}
	}
	listed := map[key]bool{}
	type hashed struct {
		sum  string
		size int64
		err  error
	}
	hashes := map[string]hashed{}
	for _, s := range m.Sessions {
		listed[key{s.Path, s.ID}] = true
		h, ok := hashes[s.Path]
		if !ok {
			h.sum, h.size, h.err = hashFile(filepath.Join(dir, filepath.FromSlash(s.Path)))
			hashes[s.Path] = h
		}
		sum, size, err := h.sum, h.size, h.err
		if err != nil {
			add(s.ID, "missing", "%s: %v", s.Path, err)
			continue
		}
		if size != s.Bytes {
			add(s.ID, "size", "%s is %d bytes, the manifest says %d", s.Path, size, s.Bytes)
		} else if sum != s.SHA256 {
			add(s.ID, "checksum", "%s has SHA-256 %s, the manifest says %s", s.Path, sum, s.SHA256)
		}
		e, ok := byKey[key{s.Path, s.ID}]
		if !ok {
			other := ""
			for k := range byKey {
				if k.path == s.Path {
					other = k.id
				}
			}
			if other != "" && m.Backend != "sqlite" {
				listed[key{s.Path, other}] = true // reported here, not again as an extra
				add(s.ID, "header", "%s holds session %q, the manifest says %q", s.Path, other, s.ID)
			} else {
				add(s.ID, "missing", "%s holds no session %q the backup's store lists", s.Path, s.ID)
			}
			continue
		}
		verifySession(ctx, st, e, s, add)
	}
	for k, e := range byKey {
		if !listed[k] {
			add(e.ID, "extra", "%s (session %q) is not in the manifest", k.path, e.ID)
		}
	}
	return problems, false
}

// verifySession checks one session's continuity and derivations against its manifest entry.
func verifySession(ctx context.Context, st *eventstore.Store, e eventstore.Entry, s SessionEntry, add func(id, kind, format string, a ...any)) {
	refusal := e.Refusal
	var sess *views.Session
	if refusal == nil {
		var err error
		if sess, err = views.Load(ctx, st, e.ID, views.Options{Entry: &e}); err != nil {
			add(s.ID, string(eventstore.KindIO), "%v", err)
			return
		}
		refusal = sess.Refusal
	}
	if refusal != nil {
		// reported even when the backup recorded it (check reports it too): a refused session is not a
		// session a restore brings back in working order
		add(s.ID, string(eventstore.Classify(refusal)), "%v", refusal)
		return
	}
	if s.Refusal != "" {
		add(s.ID, "events", "the backup recorded the session as refused (%s), but it reads", s.Refusal)
	}
	if int64(len(sess.Events)) != s.Events {
		add(s.ID, "events", "holds %d events, the manifest says %d", len(sess.Events), s.Events)
	}
	for i, ev := range sess.Events {
		if ev.Seq != int64(i) {
			add(s.ID, "events", "event %d has seq %s: seqs are not contiguous from 0", i, ev.SeqText())
			break
		}
	}
	if sess.Header == nil || sess.Header.ID != s.ID {
		add(s.ID, "header", "the header does not name session %q", s.ID)
	}
	for _, v := range []views.View{views.Surface, views.Messages} {
		if _, err := sess.Render(ctx, v); err != nil {
			add(s.ID, string(v.Kind), "%s cannot be derived: %v", v, err)
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Restore copies a verified backup into dest, a new or empty directory, as a store of the harness's own
// layout: the artifacts only (not the manifest, the spill index or spill copies), each checked against the
// manifest's SHA-256 after the copy. The backup is only read. It returns the manifest it restored.
func Restore(ctx context.Context, backupDir, dest string, opts Options) (*Manifest, error) {
	if problems, _ := Verify(ctx, backupDir, opts); len(problems) > 0 {
		var lines []string
		for _, p := range problems {
			lines = append(lines, p.ID+": "+p.Kind+": "+p.Message)
		}
		return nil, fmt.Errorf("the backup does not verify; nothing was restored:\n%s", strings.Join(lines, "\n"))
	}
	m, err := ReadManifest(backupDir)
	if err != nil {
		return nil, err
	}
	if err := emptyDir(dest); err != nil {
		return nil, err
	}
	done := map[string]bool{} // a SQLite backup lists every session in one file
	for i, s := range m.Sessions {
		if opts.Progress != nil {
			opts.Progress(i, len(m.Sessions))
		}
		if done[s.Path] {
			continue
		}
		done[s.Path] = true
		src := filepath.Join(backupDir, filepath.FromSlash(s.Path))
		f, err := os.Open(src)
		if err != nil {
			return nil, err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		sum, err := copyFile(filepath.Join(dest, filepath.FromSlash(s.Path)), f, fi.Size(), fi.ModTime(), fi.Mode())
		f.Close()
		if err != nil {
			return nil, err
		}
		if sum != s.SHA256 {
			return nil, fmt.Errorf("%s: the restored copy has SHA-256 %s, the manifest says %s", s.Path, sum, s.SHA256)
		}
	}
	if opts.Progress != nil {
		opts.Progress(len(m.Sessions), len(m.Sessions))
	}
	return m, nil
}
