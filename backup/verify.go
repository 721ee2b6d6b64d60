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
	"github.com/dshfs/dshfs/eventstore/generation"
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
// all. The counts are what the copy holds (sessions in the manifest found there, the events they read
// back, the files present); they are checked against the manifest's expected totals.
func Verify(ctx context.Context, dir string, opts Options) (counts Expected, problems []Problem, io bool) {
	add := func(id, kind, format string, a ...any) {
		problems = append(problems, Problem{ID: id, Kind: kind, Message: fmt.Sprintf(format, a...)})
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs // the backup's listing names absolute paths, made relative to dir
	}
	m, err := ReadManifest(dir)
	if err != nil {
		add("", "manifest", "%v", err)
		return counts, problems, errors.Is(err, fs.ErrNotExist) && !exists(dir)
	}
	st, err := opts.Open(dir)
	if err != nil {
		add("", "manifest", "the backup is not a store: %v", err)
		return counts, problems, true
	}
	l, err := st.List(ctx)
	if err != nil {
		add("", "manifest", "listing the backup: %v", err)
		return counts, problems, true
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
		if !ok {
			counts.Files++
		}
		for _, loc := range s.Spill {
			if loc.File == "" || hashes[loc.File].sum != "" {
				continue
			}
			sum, _, err := hashFile(filepath.Join(dir, filepath.FromSlash(loc.File)))
			if err != nil {
				add(s.ID, "missing", "spill copy %s: %v", loc.File, err)
				continue
			}
			hashes[loc.File] = hashed{sum: sum}
			counts.Files++
		}
		for _, f := range s.Beside {
			if _, done := hashes[f.Path]; done {
				continue
			}
			psum, psize, err := hashFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
			hashes[f.Path] = hashed{sum: psum, size: psize, err: err}
			switch {
			case err != nil:
				add(s.ID, "missing", "generation file %s beside the artifact: %v", f.Path, err)
				continue
			case psize != f.Bytes:
				add(s.ID, "size", "generation file %s beside the artifact is %d bytes, the manifest says %d", f.Path, psize, f.Bytes)
			case psum != f.SHA256:
				add(s.ID, "checksum", "generation file %s beside the artifact has SHA-256 %s, the manifest says %s", f.Path, psum, f.SHA256)
			}
			counts.Files++
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
		counts.Sessions++
		counts.Events += verifySession(ctx, st, e, s, add)
	}
	for k, e := range byKey {
		if !listed[k] {
			add(e.ID, "extra", "%s (session %q) is not in the manifest", k.path, e.ID)
		}
		for _, p := range e.Beside {
			if rel, err := filepath.Rel(dir, p); err == nil {
				if _, ok := hashes[filepath.ToSlash(rel)]; !ok {
					add(e.ID, "extra", "%s (a generation file beside session %q's artifact) is not in the manifest", filepath.ToSlash(rel), e.ID)
				}
			}
		}
	}
	checkExpected(m, counts, add)
	return counts, problems, false
}

// checkExpected compares the counts of the copy with the totals the manifest recorded when the backup
// was taken.
func checkExpected(m *Manifest, counts Expected, add func(id, kind, format string, a ...any)) {
	want := m.Expected
	if want == nil {
		add("", "manifest", "%s records no expected totals (a backup of an older dshfs): what it should hold cannot be checked; take a new backup", ManifestFile)
		return
	}
	if got := m.expected(); got != *want {
		add("", "manifest", "the manifest lists %d sessions, %d events, %d files, but recorded %d sessions, %d events, %d files when the backup was taken",
			got.Sessions, got.Events, got.Files, want.Sessions, want.Events, want.Files)
	}
	if counts != *want {
		add("", "expected", "the copy holds %d sessions, %d events, %d files; the backup recorded %d sessions, %d events, %d files",
			counts.Sessions, counts.Events, counts.Files, want.Sessions, want.Events, want.Files)
	}
}

// verifySession checks one session's continuity and derivations against its manifest entry.
// It returns the events the session reads back (0 when it is refused).
func verifySession(ctx context.Context, st *eventstore.Store, e eventstore.Entry, s SessionEntry, add func(id, kind, format string, a ...any)) int64 {
	refusal := e.Refusal
	var sess *views.Session
	if refusal == nil {
		var err error
		if sess, err = views.Load(ctx, st, e.ID, views.Options{Entry: &e}); err != nil {
			add(s.ID, string(eventstore.KindIO), "%v", err)
			return 0
		}
		refusal = sess.Refusal
	}
	if refusal != nil {
		// reported even when the backup recorded it (check reports it too): a refused session is not a
		// session a restore brings back in working order
		add(s.ID, string(eventstore.Classify(refusal)), "%v", refusal)
		return 0
	}
	if s.Refusal != "" {
		add(s.ID, "events", "the backup recorded the session as refused (%s), but it reads", s.Refusal)
	}
	if int64(sess.EventCount()) != s.Events {
		add(s.ID, "events", "holds %d events, the manifest says %d", sess.EventCount(), s.Events)
	}
	for i, ev := range sess.Events() {
		if ev.Seq != int64(i) {
			add(s.ID, "events", "event %d has seq %s: seqs are not contiguous from 0", i, ev.SeqText())
			break
		}
	}
	if sess.Header == nil || sess.Header.ID != s.ID {
		add(s.ID, "header", "the header does not name session %q", s.ID)
	}
	for _, v := range []views.View{views.Surface, views.Messages} {
		if _, err := sess.Render(ctx, v); err != nil && !errors.Is(err, generation.ErrMessagesUndecided) {
			// (a v3 session has no messages view by design: that is no defect of the copy)
			add(s.ID, string(v.Kind), "%s cannot be derived: %v", v, err)
		}
	}
	return int64(sess.EventCount())
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Restore copies a verified backup into dest, a new or empty directory, as a store of the harness's own
// layout: the artifacts only (not the manifest, the spill index or spill copies), each checked against the
// manifest's SHA-256 after the copy. The backup is only read. It returns the manifest it restored.
//
// A backup that does not verify is refused unless opts.Force (each problem then goes to opts.Warn, and a
// copy whose checksum differs is kept and warned about); a backup of no sessions is refused unless
// opts.AllowEmpty: restoring it would give an empty store where one was expected.
func Restore(ctx context.Context, backupDir, dest string, opts Options) (*Manifest, error) {
	warn := opts.Warn
	if warn == nil {
		warn = func(string, ...any) {}
	}
	if _, problems, _ := Verify(ctx, backupDir, opts); len(problems) > 0 {
		var lines []string
		for _, p := range problems {
			lines = append(lines, p.ID+": "+p.Kind+": "+p.Message)
		}
		if !opts.Force {
			return nil, fmt.Errorf("the backup does not verify; nothing was restored (dshfs verify %s lists the problems; --force restores it anyway):\n%s", backupDir, strings.Join(lines, "\n"))
		}
		for _, l := range lines {
			warn("restoring despite: %s", l)
		}
	}
	m, err := ReadManifest(backupDir)
	if err != nil {
		return nil, err
	}
	if len(m.Sessions) == 0 {
		if !opts.AllowEmpty {
			return nil, fmt.Errorf("the backup %s holds no sessions; nothing was restored (--allow-empty restores it as an empty store)", backupDir)
		}
		warn("the backup %s holds no sessions: restoring an empty store", backupDir)
	}
	if err := emptyDir(dest); err != nil {
		return nil, err
	}
	done := map[string]bool{} // a SQLite backup lists every session in one file
	for i, s := range m.Sessions {
		if opts.Progress != nil {
			opts.Progress(i, len(m.Sessions))
		}
		files := append([]FileEntry{{Path: s.Path, Bytes: s.Bytes, SHA256: s.SHA256}}, s.Beside...)
		for _, c := range files {
			if done[c.Path] {
				continue
			}
			done[c.Path] = true
			if err := restoreFile(backupDir, dest, c, opts.Force, warn); err != nil {
				return nil, err
			}
		}
	}
	if opts.Progress != nil {
		opts.Progress(len(m.Sessions), len(m.Sessions))
	}
	return m, nil
}

// restoreFile copies one file of a backup into dest and checks it against the manifest's SHA-256 (a
// mismatch is kept, with a warning, under force).
func restoreFile(backupDir, dest string, c FileEntry, force bool, warn func(string, ...any)) error {
	f, err := os.Open(filepath.Join(backupDir, filepath.FromSlash(c.Path)))
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	sum, err := copyFile(filepath.Join(dest, filepath.FromSlash(c.Path)), f, fi.Size(), fi.ModTime(), fi.Mode())
	if err != nil {
		return err
	}
	if sum != c.SHA256 && force {
		warn("%s: the restored copy has SHA-256 %s, the manifest says %s (kept: --force)", c.Path, sum, c.SHA256)
	} else if sum != c.SHA256 {
		return fmt.Errorf("%s: the restored copy has SHA-256 %s, the manifest says %s", c.Path, sum, c.SHA256)
	}
	return nil
}
