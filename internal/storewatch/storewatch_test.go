package storewatch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// layout is the JSONL layout as far as the watcher needs it (the backend passes its own).
var layout = Layout{
	Transcript: func(name string) bool { return name == "session.jsonl" || name == "session.jsonl.zstd" },
	Quiet:      "session.lock",
}

// start runs w, whose reports arrive on the channel: a session's id, or "" for a structural change.
func start(t *testing.T, w *Watcher) <-chan string {
	t.Helper()
	ch := make(chan string, 256)
	go w.Run(func(id string) { ch <- id }, func() { ch <- "" })
	t.Cleanup(func() { w.Close() })
	return ch
}

// expect waits for want among the reports (others are skipped: a write raises IN_MODIFY and
// IN_CLOSE_WRITE, a created file IN_CREATE first) and fails after a generous deadline.
func expect(t *testing.T, ch <-chan string, want string, what string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got := <-ch:
			if got == want {
				return
			}
		case <-deadline:
			t.Fatalf("%s: no report %q", what, want)
		}
	}
}

// quiet checks that nothing is reported while fn runs and a sentinel change after it is seen first.
func quiet(t *testing.T, ch <-chan string, fn func(), sentinel func(), sentinelID, what string) {
	t.Helper()
	drain(ch)
	fn()
	sentinel()
	select {
	case got := <-ch:
		if got != sentinelID {
			t.Errorf("%s: reported %q before the sentinel", what, got)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the sentinel was not reported", what)
	}
}

func drain(ch <-chan string) {
	for {
		select {
		case <-ch:
		case <-time.After(200 * time.Millisecond):
			return
		}
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(text)
	f.Close()
}

func TestSessionsTree(t *testing.T) {
	root := t.TempDir()
	sess := filepath.Join(root, "proj", "s1")
	empty := filepath.Join(root, "empty-project")
	for _, d := range []string{sess, empty} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	transcript := filepath.Join(sess, "session.jsonl")
	write(t, transcript, "{}\n")
	w, err := New(layout)
	if err != nil {
		t.Fatal(err)
	}
	w.Sessions(root, map[string]string{transcript: "s1"})
	for _, d := range []string{root, filepath.Dir(sess), sess, empty} {
		if !w.Watching(d) {
			t.Errorf("%s is not watched", d)
		}
	}
	if !w.Complete() || w.OfFiles() {
		t.Fatalf("complete %v, of files %v", w.Complete(), w.OfFiles())
	}
	ch := start(t, w)

	write(t, transcript, "{}\n")
	expect(t, ch, "s1", "the transcript written")

	// the harness's lease and a sidecar beside the transcript are not the session's content
	quiet(t, ch, func() {
		write(t, filepath.Join(sess, layout.Quiet), "")
		write(t, filepath.Join(sess, layout.Quiet), "x")
	}, func() { write(t, transcript, "{}\n") }, "s1", "the lease")

	// a session made in a project that held none: watched as it appears, its transcript reported by id
	s2 := filepath.Join(empty, "s2")
	if err := os.Mkdir(s2, 0o700); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, "", "a session directory created")
	write(t, filepath.Join(s2, "session.jsonl.zstd"), "x")
	expect(t, ch, "", "a transcript created") // IN_CREATE: structural
	write(t, filepath.Join(s2, "session.jsonl.zstd"), "y")
	expect(t, ch, "s2", "the new session's transcript written")

	// a new project with a session already in it (made before the watch could be added)
	p3 := filepath.Join(root, "p3")
	if err := os.MkdirAll(filepath.Join(p3, "s3"), 0o700); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, "", "a project created")
	deadline := time.Now().Add(10 * time.Second)
	for !w.Watching(filepath.Join(p3, "s3")) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // the watch is added by Run, on the event of p3's creation
	}
	write(t, filepath.Join(p3, "s3", "session.jsonl"), "z")
	expect(t, ch, "s3", "a session of a new project written")

	// a chmod changes who may read the session: structural
	if err := os.Chmod(transcript, 0o640); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, "", "a transcript chmod'ed")
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "sessions.db")
	w, err := New(Layout{})
	if err != nil {
		t.Fatal(err)
	}
	w.Files([]string{db, db + "-wal"})
	if !w.OfFiles() || !w.Complete() || !w.Watching(dir) {
		t.Fatalf("of files %v, complete %v, watching %v", w.OfFiles(), w.Complete(), w.Watching(dir))
	}
	ch := start(t, w)
	write(t, db+"-wal", "x")
	expect(t, ch, "", "the WAL written")
	drain(ch)
	write(t, filepath.Join(dir, "other"), "x")
	// every report here is structural (""), so no sentinel can tell: inotify queues an event during the
	// write itself, and Run reads it at once, so a report would arrive within the drain's window
	select {
	case <-ch:
		t.Error("a file of no interest was reported")
	case <-time.After(500 * time.Millisecond):
	}
	write(t, db, "x")
	expect(t, ch, "", "the database written")
}

// TestIncomplete: a directory that cannot be watched makes the watcher incomplete for good, and its gap
// names the first such directory.
func TestIncomplete(t *testing.T) {
	w, err := New(Layout{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	missing := filepath.Join(t.TempDir(), "missing")
	w.Files([]string{filepath.Join(missing, "a"), filepath.Join(missing+"2", "b")})
	if gap := w.Gap(); w.Complete() || gap == nil || !strings.Contains(gap.Error(), missing+":") {
		t.Errorf("complete %v, gap %v", w.Complete(), gap)
	}
}

// TestTree: a tree watched as it is now — root, projects, sessions — reports a session's transcript
// written by the id its directory's name encodes, before any listing.
func TestTree(t *testing.T) {
	root := t.TempDir()
	sess := filepath.Join(root, "--proj--", "a~002Fb")
	empty := filepath.Join(root, "--empty--")
	for _, d := range []string{sess, empty} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	w, err := New(layout)
	if err != nil {
		t.Fatal(err)
	}
	w.Tree(root)
	for _, d := range []string{root, filepath.Dir(sess), sess, empty} {
		if !w.Watching(d) {
			t.Errorf("%s is not watched", d)
		}
	}
	if gap := w.Gap(); gap != nil {
		t.Fatal(gap)
	}
	ch := start(t, w)
	write(t, filepath.Join(sess, "session.jsonl"), "{}\n")
	expect(t, ch, "", "a transcript created")
	write(t, filepath.Join(sess, "session.jsonl"), "{}\n")
	expect(t, ch, "a/b", "the transcript written")
}

// TestNoInotify: DSHFS_NO_INOTIFY refuses a watcher, so the polling path can be tested.
func TestNoInotify(t *testing.T) {
	t.Setenv("DSHFS_NO_INOTIFY", "1")
	if w, err := New(layout); err == nil || !strings.Contains(err.Error(), "DSHFS_NO_INOTIFY") {
		if w != nil {
			w.Close()
		}
		t.Fatalf("a watcher despite DSHFS_NO_INOTIFY: %v", err)
	}
}
