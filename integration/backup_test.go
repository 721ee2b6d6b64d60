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
