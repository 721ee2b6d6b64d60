package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/fixtures"
)

// The backup side of the mount: store/ copied with rsync while writers append, and quiesce.

// appender appends whole turns to a session through the mount until stopped, flushing now and then.
type appender struct {
	stop chan struct{}
	done chan struct{}
	err  atomic.Value
}

func startAppender(t *testing.T, sess string) *appender {
	t.Helper()
	a := &appender{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		next := int64(0)
		for turn := 1; ; turn++ {
			select {
			case <-a.stop:
				return
			case <-time.After(5 * time.Millisecond): // a steady writer, not a flood: the copies stay small
			}
			lines := turnLines(turn, next, false)
			next += int64(len(lines))
			if err := appendFile(filepath.Join(sess, "append"), strings.Join(lines, "\n")+"\n"); err != nil {
				a.err.Store(err)
				return
			}
			if turn%3 == 0 {
				if err := appendFile(filepath.Join(sess, "ctl"), "flush\n"); err != nil && !errorsIsBusy(err) {
					a.err.Store(err)
					return
				}
			}
		}
	}()
	return a
}

func errorsIsBusy(err error) bool {
	pe, ok := err.(*os.PathError)
	return ok && pe.Err == syscall.EBUSY
}

// halt stops the appender and reports what failed it.
func (a *appender) halt(t *testing.T) {
	t.Helper()
	close(a.stop)
	<-a.done
	if err, _ := a.err.Load().(error); err != nil {
		t.Fatalf("appender: %v", err)
	}
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(text)
	cerr := f.Close()
	if werr != nil {
		return werr
	}
	return cerr
}

// durableSeqs reads each session's durableSeq from its status.json.
func durableSeqs(t *testing.T, mnt string, ids []string) map[string]int64 {
	out := map[string]int64{}
	for _, id := range ids {
		out[id] = statusOf(t, filepath.Join(mnt, "sessions", id)).DurableSeq
	}
	return out
}

// TestStoreMirrorWhileWriting: `rsync -a MNT/store/ DEST/` at random moments while writers append to
// several sessions gives, every time, a store dshfs checks clean and the harness opens, each session's
// artifact a byte prefix of the final one holding at least the events that were durable when the copy
// started.
func TestStoreMirrorWhileWriting(t *testing.T) {
	t.Parallel()
	eachCompression(t, func(t *testing.T, store, cfg string) {
		m := startMount(t, "--config", cfg, store)
		ids := []string{"w1", "w2", "w3"}
		var apps []*appender
		for _, id := range ids {
			apps = append(apps, startAppender(t, newSessionOnMount(t, m.dir, id)))
		}
		type copyRun struct {
			dir    string
			before map[string]int64
		}
		var copies []copyRun
		for i := 0; i < 20; i++ {
			time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond) // a random moment
			before := durableSeqs(t, m.dir, ids)
			dest := filepath.Join(t.TempDir(), "copy")
			mustRun(t, "rsync", "-a", m.dir+"/store/", dest+"/")
			copies = append(copies, copyRun{dest, before})
		}
		for _, a := range apps {
			a.halt(t)
		}
		stopAndVerify(t, m, store)
		final := map[string][]byte{}
		for _, id := range ids {
			final[id] = readFile(t, artifactOf(t, store, id))
		}
		for i, c := range copies {
			if r := run(t, "", dshfsBin(t), "check", c.dir); r.code != 0 {
				t.Fatalf("copy %d: dshfs check exit %d: %s%s", i, r.code, r.stdout, r.stderr)
			}
			for _, id := range ids {
				got := readFile(t, artifactOf(t, c.dir, id))
				if !bytes.HasPrefix(final[id], got) {
					t.Fatalf("copy %d of %s (%d bytes) is not a prefix of the final artifact", i, id, len(got))
				}
				events := textLines(cli(t, 0, "cat", "--view", "events", c.dir, id))
				if int64(len(events)) < c.before[id]+1 {
					t.Errorf("copy %d of %s holds %d events; %d were durable before the copy began", i, id, len(events), c.before[id]+1)
				}
			}
			harnessAgrees(t, c.dir)
		}
	})
}

// TestQuiesceOnMount: after quiesce the artifacts do not change while appends go on, store/ holds what
// was durable at the quiesce, flush is refused, a second rsync transfers nothing; resume-writes lets the
// held batch through; a quiesce that times out ends by itself and says so.
func TestQuiesceOnMount(t *testing.T) {
	t.Parallel()
	store, cfg := emptyStore(t, "zstd")
	m := startMount(t, "--config", cfg, store)
	s := newSessionOnMount(t, m.dir, "q1")
	mustAppend(t, s, turnLines(1, 0, false))
	ctlPath := filepath.Join(m.dir, "ctl")
	mustCtl(t, ctlPath, "quiesce 600")
	var root struct {
		QuiescedUntil *string
		LastQuiesce   *struct{ Reason string }
	}
	readRoot := func() {
		t.Helper()
		root.QuiescedUntil, root.LastQuiesce = nil, nil
		if err := json.Unmarshal(readFile(t, filepath.Join(m.dir, "status.json")), &root); err != nil {
			t.Fatal(err)
		}
	}
	readRoot()
	if root.QuiescedUntil == nil {
		t.Fatal("status.json quiescedUntil is null after quiesce")
	}
	st := statusOf(t, s)
	if st.Pending != 0 {
		t.Fatalf("quiesce left %d events pending", st.Pending)
	}
	durable := st.DurableSeq
	artifact := artifactOf(t, store, "q1")
	before, err := os.Stat(artifact)
	if err != nil {
		t.Fatal(err)
	}
	turn2 := turnLines(2, durable+1, false)
	mustAppend(t, s, turn2)
	waitFor(t, "the batch window to pass", func() (bool, string) {
		st := statusOf(t, s)
		return st.Pending == int64(len(turn2)), fmt.Sprintf("%d pending", st.Pending)
	})
	wantErrno(t, "flush while quiesced", ctl(t, filepath.Join(s, "ctl"), "flush"), syscall.EBUSY)
	if msg := statusOf(t, s).LastError.Message; !strings.Contains(msg, "quiesced until") {
		t.Errorf("lastError %q", msg)
	}
	after, err := os.Stat(artifact)
	if err != nil {
		t.Fatal(err)
	}
	if after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("the artifact changed while quiesced: %d → %d bytes", before.Size(), after.Size())
	}
	dest := filepath.Join(t.TempDir(), "copy")
	mustRun(t, "rsync", "-a", m.dir+"/store/", dest+"/")
	if n := len(textLines(cli(t, 0, "cat", "--view", "events", dest, "q1"))); int64(n) != durable+1 {
		t.Errorf("store/ holds %d events, %d were durable at the quiesce", n, durable+1)
	}
	if out := mustRun(t, "rsync", "-ai", m.dir+"/store/", dest+"/"); len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("a second rsync transferred:\n%s", out)
	}
	mustCtl(t, ctlPath, "resume-writes")
	waitFor(t, "the held batch to be written", func() (bool, string) {
		st := statusOf(t, s)
		return st.Pending == 0, fmt.Sprintf("%d pending", st.Pending)
	})
	readRoot()
	if root.QuiescedUntil != nil || root.LastQuiesce == nil || root.LastQuiesce.Reason != "resume-writes" {
		t.Fatalf("after resume-writes: %+v", root)
	}
	// rsync now brings the new batch, and the copy is whole
	mustRun(t, "rsync", "-a", m.dir+"/store/", dest+"/")
	if n := len(textLines(cli(t, 0, "cat", "--view", "events", dest, "q1"))); int64(n) != durable+1+int64(len(turn2)) {
		t.Errorf("after resume-writes store/ holds %d events", n)
	}
	// a quiesce that times out ends by itself
	mustCtl(t, ctlPath, "quiesce 0.2")
	waitFor(t, "the quiesce to time out", func() (bool, string) {
		readRoot()
		return root.QuiescedUntil == nil, fmt.Sprintf("%+v", root)
	})
	if root.LastQuiesce == nil || root.LastQuiesce.Reason != "timeout" {
		t.Fatalf("lastQuiesce after a timeout: %+v", root.LastQuiesce)
	}
	wantErrno(t, "quiesce of nonsense", ctl(t, ctlPath, "quiesce soon"), syscall.EINVAL)
	stopAndVerify(t, m, store)
}

// viewsOf reads the three projections of every session of a mount.
func viewsOf(t *testing.T, mnt string, ids []string) map[string]string {
	out := map[string]string{}
	for _, id := range ids {
		for _, f := range []string{"events.jsonl", "surface.jsonl", "messages.jsonl"} {
			out[id+"/"+f] = string(readFile(t, filepath.Join(mnt, "sessions", id, f)))
		}
	}
	return out
}

// TestBackupVerifyRestore: dshfs backup through the running mount, verify, restore into a new root and a
// read-only mount of it: every session's events, surface and messages equal the originals'; the backup is
// never modified; the harness opens every restored session.
func TestBackupVerifyRestore(t *testing.T) {
	t.Parallel()
	store, cfg := emptyStore(t, "zstd")
	m := startMount(t, "--config", cfg, store)
	ids := []string{"b1", "b2", "b3"}
	for i, id := range ids {
		s := newSessionOnMount(t, m.dir, id)
		next := int64(0)
		for turn := 1; turn <= i+2; turn++ {
			lines := turnLines(turn, next, false)
			mustAppend(t, s, lines)
			next += int64(len(lines))
		}
	}
	mustAppend(t, filepath.Join(m.dir, "sessions", "b3"), turnLines(5, int64(4*len(turnLines(1, 0, false))), true)) // pending, open turn
	original := viewsOf(t, m.dir, ids)
	dest := filepath.Join(t.TempDir(), "backup")
	r := run(t, "", dshfsBin(t), "backup", "--config", cfg, store, dest)
	if r.code != 0 || !strings.Contains(string(r.stderr), "through the mount") {
		t.Fatalf("backup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var root struct{ QuiescedUntil *string }
	if err := json.Unmarshal(readFile(t, filepath.Join(m.dir, "status.json")), &root); err != nil || root.QuiescedUntil != nil {
		t.Fatalf("the backup left the mount quiesced: %v %v", err, root.QuiescedUntil)
	}
	if r := run(t, "", dshfsBin(t), "verify", dest); r.code != 0 {
		t.Fatalf("verify of a fresh backup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var manifest struct {
		Sessions []struct {
			ID         string
			Events     int64
			DurableSeq int64
			SHA256     string
		}
	}
	if err := json.Unmarshal(readFile(t, filepath.Join(dest, "MANIFEST.json")), &manifest); err != nil || len(manifest.Sessions) != 3 {
		t.Fatalf("manifest: %v %+v", err, manifest)
	}
	for _, s := range manifest.Sessions {
		if s.Events != int64(len(lines([]byte(original[s.ID+"/events.jsonl"])))) || s.DurableSeq != s.Events-1 || len(s.SHA256) != 64 {
			t.Errorf("manifest entry %+v", s)
		}
	}
	before := storeSum(t, dest)
	restored := filepath.Join(t.TempDir(), "restored")
	cli(t, 0, "restore", dest, restored)
	sameSums(t, before, storeSum(t, dest))
	if r := run(t, "", dshfsBin(t), "restore", dest, restored); r.code == 0 || !strings.Contains(string(r.stderr), "not empty") {
		t.Errorf("a restore into a non-empty root: exit %d %s", r.code, r.stderr)
	}
	rm := startMount(t, "--read-only", restored)
	got := viewsOf(t, rm.dir, ids)
	for k, want := range original {
		if got[k] != want {
			t.Errorf("restored %s differs from the original", k)
		}
	}
	rm.stop(t)
	harnessAgrees(t, restored)
	stopAndVerify(t, m, store)
}

// rewriteArtifact changes one backed-up artifact (raw) line by line and, when regenerate is set, updates
// the manifest's size and checksum to match, as a backup made after the damage would have them.
func rewriteArtifact(t *testing.T, backup, id string, regenerate bool, edit func(lines []string) []string) {
	t.Helper()
	path := artifactOf(t, backup, id)
	ls := strings.Split(strings.TrimSuffix(string(readFile(t, path)), "\n"), "\n")
	body := strings.Join(edit(ls), "\n") + "\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if !regenerate {
		return
	}
	var m map[string]any
	if err := json.Unmarshal(readFile(t, filepath.Join(backup, "MANIFEST.json")), &m); err != nil {
		t.Fatal(err)
	}
	sum := strings.Fields(string(mustRun(t, "sha256sum", path)))[0]
	for _, s := range m["sessions"].([]any) {
		s := s.(map[string]any)
		if s["id"] == id {
			s["bytes"], s["sha256"] = len(body), sum
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(backup, "MANIFEST.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyFindsDamage: each kind of damage to a backup is reported by verify with exit 1 — a flipped
// byte, a truncated artifact, a missing session, and (the manifest regenerated so checksums match) a seq
// gap, a header naming another session, an invalid surface replace.
func TestVerifyFindsDamage(t *testing.T) {
	t.Parallel()
	store, cfg := emptyStore(t, "none")
	for _, id := range []string{"d1", "d2"} {
		cli(t, 0, "create", "--config", cfg, "--cwd", "/p", store, id)
		in := filepath.Join(t.TempDir(), "in.jsonl")
		t1 := turnLines(1, 0, false)
		all := append(append([]string{}, t1...), turnLines(2, int64(len(t1)), false)...)
		if err := os.WriteFile(in, []byte(strings.Join(all, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cli(t, 0, "append", store, id, in)
	}
	good := filepath.Join(t.TempDir(), "good")
	cli(t, 0, "backup", store, good)
	cli(t, 0, "verify", good)
	for _, tc := range []struct {
		name, kind string
		damage     func(t *testing.T, b string)
	}{
		{"flipped byte", "checksum", func(t *testing.T, b string) {
			p := artifactOf(t, b, "d1")
			data := readFile(t, p)
			data[len(data)/2] ^= 0x01
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"truncated", "size", func(t *testing.T, b string) {
			p := artifactOf(t, b, "d1")
			if err := os.Truncate(p, 100); err != nil {
				t.Fatal(err)
			}
		}},
		{"missing session", "missing", func(t *testing.T, b string) {
			if err := os.RemoveAll(filepath.Dir(artifactOf(t, b, "d2"))); err != nil {
				t.Fatal(err)
			}
		}},
		{"seq gap", "corrupt", func(t *testing.T, b string) {
			rewriteArtifact(t, b, "d1", true, func(ls []string) []string {
				return append(ls[:3], ls[4:]...) // drop one event: a gap before the later turn/end
			})
		}},
		{"header names another session", "header", func(t *testing.T, b string) {
			rewriteArtifact(t, b, "d2", true, func(ls []string) []string {
				ls[0] = strings.Replace(ls[0], `"id":"d2"`, `"id":"d9"`, 1)
				return ls
			})
		}},
		{"invalid surface replace", "corrupt", func(t *testing.T, b string) {
			next := len(textLines(cli(t, 0, "cat", "--view", "events", b, "d1")))
			rewriteArtifact(t, b, "d1", true, func(ls []string) []string {
				return append(ls, fmt.Sprintf(`{"type":"user/message","seq":%d,"time":1,"data":{"content":[{"type":"text","text":"x"}],"source":{"kind":"user"},"role":"user","id":"x"},"sourceEventSeqs":[9999],"surfaceOp":{"op":"replace","start":9999,"end":9999}}`, next))
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := copyTree(t, good, filepath.Join(t.TempDir(), "b"))
			tc.damage(t, b)
			r := run(t, "", dshfsBin(t), "verify", b)
			if r.code != 1 {
				t.Fatalf("verify: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
			}
			if !strings.Contains(string(r.stdout), "\t"+tc.kind+"\t") && !(tc.kind == "header" && strings.Contains(string(r.stdout), "d2")) {
				t.Errorf("verify did not report %s:\n%s", tc.kind, r.stdout)
			}
			if r := run(t, "", dshfsBin(t), "restore", b, filepath.Join(t.TempDir(), "r")); r.code == 0 {
				t.Errorf("restore of a damaged backup succeeded")
			}
		})
	}
}

// TestBackupWithoutMount: dshfs backup of a store nobody mounts while a dshfs append loop writes to it
// gives a backup verify accepts, each session a prefix of the final artifact; the writer only ever waits
// or gets EBUSY, never a torn artifact.
func TestBackupWithoutMount(t *testing.T) {
	t.Parallel()
	store, _ := emptyStore(t, "zstd")
	ids := []string{"c1", "c2"}
	for _, id := range ids {
		cli(t, 0, "create", "--cwd", "/p", store, id)
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		next := map[string]int64{}
		turns := map[string]int{} // the turns written: a refused append writes none, so its turn comes again
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			for _, id := range ids {
				lines := turnLines(turns[id]+1, next[id], false)
				in := filepath.Join(store, "..", "in-"+id+".jsonl")
				if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
					done <- err
					return
				}
				r := run(t, "", dshfsBin(t), "append", store, id, in)
				switch {
				case r.code == 0:
					next[id] += int64(len(lines))
					turns[id]++
				case strings.Contains(string(r.stderr), "is being written by another"): // the backup holds its lock (its pid named when known)
				default:
					done <- fmt.Errorf("append: exit %d %s", r.code, r.stderr)
					return
				}
			}
		}
	}()
	var backups []string
	for i := 0; i < 3; i++ {
		dest := filepath.Join(t.TempDir(), "backup")
		cli(t, 0, "backup", store, dest)
		backups = append(backups, dest)
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	cli(t, 0, "check", store)
	for _, b := range backups {
		if r := run(t, "", dshfsBin(t), "verify", b); r.code != 0 {
			t.Fatalf("verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		for _, id := range ids {
			if !bytes.HasPrefix(readFile(t, artifactOf(t, store, id)), readFile(t, artifactOf(t, b, id))) {
				t.Errorf("%s in %s is not a prefix of the final artifact", id, b)
			}
		}
	}
}

// TestBackupSpill: the spill index lists a present, a missing and an outside-roots locator with their
// status; --with-spill copies the present file only.
func TestBackupSpill(t *testing.T) {
	t.Parallel()
	base, root, spillRoot := spillDirs(t)
	present := filepath.Join(spillRoot, "present.txt")
	if err := os.WriteFile(present, []byte("the whole output\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(base, "elsewhere.txt")
	if err := os.WriteFile(outside, []byte("not a spill file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeSpillSession(t, root, "sp", []string{
		spillNotice("the", 17, present),
		spillNotice("gone", 10, filepath.Join(spillRoot, "missing.txt")),
		spillNotice("else", 17, outside),
	})
	cfg := writeConfig(t, "[spill]\nroots = [%q]\n", spillRoot)
	dest := filepath.Join(t.TempDir(), "backup")
	cli(t, 0, "backup", "--config", cfg, "--with-spill", root, dest)
	type row struct {
		Session, Locator, Status string
		Bytes                    *int64
		File                     *string
	}
	var rows []row
	for _, l := range lines(readFile(t, filepath.Join(dest, "spill-index.jsonl"))) {
		var r row
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	want := map[string]string{present: "present", filepath.Join(spillRoot, "missing.txt"): "missing", outside: "outside-roots"}
	if len(rows) != 3 {
		t.Fatalf("spill index: %+v", rows)
	}
	for _, r := range rows {
		if r.Session != "sp" || want[r.Locator] != r.Status {
			t.Errorf("row %+v, want status %s", r, want[r.Locator])
		}
		if (r.Status == "present") != (r.File != nil) || (r.Status == "present") != (r.Bytes != nil) {
			t.Errorf("row %+v: only a present target has bytes and a copy", r)
		}
		if r.File != nil {
			if got := readFile(t, filepath.Join(dest, *r.File)); string(got) != "the whole output\n" {
				t.Errorf("the spill copy holds %q", got)
			}
		}
	}
	var copies []string
	filepath.WalkDir(filepath.Join(dest, "spill"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			copies = append(copies, p)
		}
		return nil
	})
	if len(copies) != 1 {
		t.Errorf("--with-spill copied %v, want the present file only", copies)
	}
	if r := run(t, "", dshfsBin(t), "verify", "--config", cfg, dest); r.code != 0 {
		t.Errorf("verify: exit %d %s%s", r.code, r.stdout, r.stderr)
	}
}

// TestStoreMirrorRefused: store/ mirrors refused sessions' artifacts whole, byte for byte, and lists
// nothing it cannot serve (a FIFO, a link out of the root), so rsync -a of it exits 0.
func TestStoreMirrorRefused(t *testing.T) {
	t.Parallel()
	store := fixtures.CopyTree(t, fixtures.Path(t, "upstream", "refused-root"))
	project := filepath.Join(store, "--home-dev-snapshots-goal-wrapup--")
	fifoDir := filepath.Join(project, "a-fifo")
	linkDir := filepath.Join(project, "a-link")
	for _, d := range []string{fifoDir, linkDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(fifoDir, "session.jsonl"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(linkDir, "session.jsonl")); err != nil {
		t.Fatal(err)
	}
	m := startMount(t, "--read-only", store)
	dest := filepath.Join(t.TempDir(), "copy")
	if r := run(t, "", "rsync", "-a", m.dir+"/store/", dest+"/"); r.code != 0 {
		t.Fatalf("rsync -a of store/: exit %d %s", r.code, r.stderr)
	}
	var got []string
	filepath.WalkDir(dest, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dest, p)
			got = append(got, rel)
			if want := readFile(t, filepath.Join(store, rel)); !bytes.Equal(readFile(t, p), want) {
				t.Errorf("%s is not the artifact byte for byte", rel)
			}
		}
		return nil
	})
	if len(got) != 2 {
		t.Errorf("store/ copied %v, want the two refused artifacts only", got)
	}
	m.stop(t)
}
