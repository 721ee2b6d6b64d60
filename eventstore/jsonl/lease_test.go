package jsonl

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/eventtest"
	"github.com/dshfs/dshfs/internal/helperproc"
)

// helperEnv makes this test binary a helper process (init below): another process holding a lease, an
// artifact or a Store, as a harness or a second dshfs would.
const helperEnv = "DSHFS_JSONL_LEASE_HELPER"

func init() {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return
	}
	os.Exit(runHelper(mode, os.Args[len(os.Args)-2:]))
}

// runHelper does what mode asks with args, prints "ready" (or "refused CODE") and holds on until its
// stdin closes.
func runHelper(mode string, args []string) int {
	hold := func() { io.Copy(io.Discard, os.Stdin) }
	switch mode {
	case "flock": // the harness's lease: open 'w', flock(LOCK_EX|LOCK_NB)
		f, err := os.OpenFile(filepath.Join(args[0], LeaseName), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
		if err == nil {
			err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		}
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("ready")
		hold()
	case "open": // a writer without the lease in the middle of its batch: the artifact open for appending
		f, err := os.OpenFile(args[0], os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("ready")
		hold()
		f.Close()
	case "writer": // a second dshfs: a Store holding the session live
		b, err := Open(args[0], None)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		st := eventstore.New(b)
		if _, err := st.Writer(context.Background(), args[1]); err != nil {
			fmt.Println("refused", eventstore.AsCommandError(err).Code, err)
			return 0
		}
		fmt.Println("ready")
		hold()
		st.Close(context.Background())
	}
	return 0
}

// helper starts this binary as a helper process in mode and waits for its first line; it stops when the
// test ends or when the returned func is called.
func helper(t *testing.T, mode string, args ...string) (first string, stop func()) {
	t.Helper()
	first, stop = helperproc.Start(t, helperEnv, mode, args...)
	return strings.TrimSpace(first), stop
}

var bg = context.Background()

// turnSpecs is one complete turn from seq base on (eventtest.Log specs).
func turnLog(t *testing.T, base int) []event.Event {
	specs := make([]string, base)
	n := strconv.Itoa(base/5 + 1) // the turn after those of the base events (whole turns of 5, an end-seed after them)
	specs = append(specs, `turn/start {"turn":`+n+`}`, `step/start {"turn":`+n+`,"step":1}`,
		`user/message {"id":"u`+n+`","role":"user","content":[{"type":"text","text":"q"}],"source":{"kind":"user"}} + "surfaceOp":"append"`,
		`step/end {"turn":`+n+`,"step":1}`, `turn/end {"turn":`+n+`,"reason":{"kind":"completed"}}`)
	return eventtest.Log(t, specs...)[base:]
}

// leaseStore is a raw store at a fresh root holding session "s" with one turn, written and released.
func leaseStore(t *testing.T) (root string, h event.Header) {
	root = t.TempDir()
	b, err := Open(root, None)
	if err != nil {
		t.Fatal(err)
	}
	st := eventstore.New(b)
	cwd := event.String("/srv")
	h = event.Header{ID: "s", CreatedAt: 1, Cwd: &cwd}
	if err := st.Create(bg, h); err != nil {
		t.Fatal(err)
	}
	if err := st.Append(bg, "s", turnLog(t, 0)); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(bg); err != nil {
		t.Fatal(err)
	}
	return root, h
}

func newStore(t *testing.T, root string, quiet time.Duration) *eventstore.Store {
	b, err := Open(root, None)
	if err != nil {
		t.Fatal(err)
	}
	st := eventstore.New(b)
	st.ForeignQuiet = quiet
	t.Cleanup(func() { st.Close(bg) })
	return st
}

// treeSums is every regular file under root with the SHA-256 of its bytes.
func treeSums(t *testing.T, root string) map[string]string {
	sums := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		sums[p] = fmt.Sprintf("%x", sha256.Sum256(b))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

func sameTree(t *testing.T, before, after map[string]string) {
	t.Helper()
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Errorf("the store changed:\nbefore %v\nafter  %v", before, after)
	}
}

func wantCode(t *testing.T, what string, err error, code, text string) {
	t.Helper()
	ce := eventstore.AsCommandError(err)
	if ce == nil || ce.Failure != eventstore.Busy || ce.Code != code || !strings.Contains(ce.Message, text) {
		t.Errorf("%s: got %v, want busy %s saying %q", what, err, code, text)
	}
}

// TestLeaseRefusesEveryWrite: while another process holds the harness's lease (flock on session.lock,
// taken as the harness takes it), every write path refuses with the harness's SessionAlreadyOwnedError
// text and writes nothing; once the holder is gone, writes work again.
func TestLeaseRefusesEveryWrite(t *testing.T) {
	root, h := leaseStore(t)
	st := newStore(t, root, 0)
	path, err := st.Backend().(*Backend).find("s")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(path)
	// a session directory the harness just created, lease taken before its first write
	newDir := filepath.Join(filepath.Dir(dir), "n")
	if err := os.Mkdir(newDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if first, _ := helper(t, "flock", newDir, "-"); first != "ready" {
		t.Fatal(first)
	}
	first, stop := helper(t, "flock", dir, "-")
	if first != "ready" {
		t.Fatal(first)
	}
	before := treeSums(t, root)
	const text = `session "s" is already owned by an active write handle: its write lease is held by another process (session.lock), pid `
	_, err = st.Writer(bg, "s")
	wantCode(t, "writer", err, eventstore.CodeOwned, text)
	wantCode(t, "append", st.Append(bg, "s", turnLog(t, 5)), eventstore.CodeOwned, text)
	_, err = st.Resume(bg, "s")
	wantCode(t, "resume", err, eventstore.CodeOwned, text)
	_, err = st.Load(bg, "s")
	wantCode(t, "load (its crash repair writes)", err, eventstore.CodeOwned, text)
	_, err = st.Fork(bg, "s", nil, "child")
	wantCode(t, "fork", err, eventstore.CodeOwned, text)
	nh := h
	nh.ID = "n"
	wantCode(t, "create", st.Create(bg, nh), eventstore.CodeOwned, `session "n" is already owned`)
	if _, err := st.ReadFrom(bg, "s", 0); err != nil {
		t.Errorf("readers never take the lease: %v", err)
	}
	sameTree(t, before, treeSums(t, root))

	stop()
	if err := st.Append(bg, "s", turnLog(t, 5)); err != nil {
		t.Fatalf("after the holder closed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, LeaseName)); err != nil {
		t.Errorf("the lease file must stay: %v", err)
	}
}

// TestLeaseBetweenDshfsProcesses: two dshfs processes writing one session exclude each other through the
// lease, whichever comes first.
func TestLeaseBetweenDshfsProcesses(t *testing.T) {
	root, _ := leaseStore(t)
	first, stop := helper(t, "writer", root, "s")
	if first != "ready" {
		t.Fatal(first)
	}
	st := newStore(t, root, 0)
	before := treeSums(t, root)
	_, err := st.Writer(bg, "s")
	wantCode(t, "a writer while another dshfs holds the session", err, eventstore.CodeOwned, "held by another process (session.lock)")
	sameTree(t, before, treeSums(t, root))
	stop()
	if _, err := st.Writer(bg, "s"); err != nil {
		t.Fatalf("after the other dshfs closed: %v", err)
	}
	if first, _ := helper(t, "writer", root, "s"); !strings.HasPrefix(first, "refused "+eventstore.CodeOwned+" ") {
		t.Errorf("the other dshfs while this one holds the session: %q", first)
	}
}

// foreignAppend appends a line to the artifact as a harness without the lease does: no lock, no stamp. It
// writes in a later tick of the file-time clock than dshfs's last stamp: file times are coarse (a few ms),
// and a change in the very tick of dshfs's own write cannot be told from it by time.
func foreignAppend(t *testing.T, path string, seq int) {
	t.Helper()
	if stamp, err := os.Stat(filepath.Join(filepath.Dir(path), LeaseName)); err == nil {
		probe := filepath.Join(t.TempDir(), "tick")
		for deadline := time.Now().Add(5 * time.Second); ; {
			if err := os.WriteFile(probe, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(probe); err == nil && fi.ModTime().After(stamp.ModTime()) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the file clock does not pass the lease's stamp")
			}
			runtime.Gosched()
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, `{"type":"plugin/foreign","seq":%d,"time":1,"data":{},"ignorable":true}`+"\n", seq); err != nil {
		t.Fatal(err)
	}
}

// TestLiveElsewhereQuiet: a change another process made within the quiet period is refused as live
// elsewhere, saying when; dshfs's own writes are not (the lease file's stamp); an acknowledgement lets the
// next write through, over the foreign event.
func TestLiveElsewhereQuiet(t *testing.T) {
	root, _ := leaseStore(t)
	st := newStore(t, root, time.Hour)
	if _, err := st.Writer(bg, "s"); err != nil {
		t.Fatalf("dshfs's own last write is no foreign change: %v", err)
	}
	if err := st.Close(bg); err != nil {
		t.Fatal(err)
	}
	path, _ := st.Backend().(*Backend).find("s")
	foreignAppend(t, path, 5)
	before := treeSums(t, root)
	_, err := st.Writer(bg, "s")
	wantCode(t, "writer", err, eventstore.CodeLiveElsewhere, `session "s" is live elsewhere: session.jsonl changed 0.`)
	if ce := eventstore.AsCommandError(err); ce != nil && !strings.Contains(ce.Message, "rescan") {
		t.Errorf("the refusal does not say how to override it: %v", ce)
	}
	_, err = st.Resume(bg, "s")
	wantCode(t, "resume", err, eventstore.CodeLiveElsewhere, "ago by another process")
	_, err = st.Load(bg, "s")
	wantCode(t, "load", err, eventstore.CodeLiveElsewhere, "ago by another process")
	sameTree(t, before, treeSums(t, root))
	if n, err := st.AcknowledgeForeign(bg); n != 1 || err != nil {
		t.Fatalf("acknowledged %d (%v), want the one refused session", n, err)
	}
	w, err := st.Writer(bg, "s")
	if err != nil {
		t.Fatalf("after the acknowledgement: %v", err)
	}
	if err := w.AcceptEvents(turnLog(t, 6)); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(bg); err != nil {
		t.Fatal(err)
	}
	if p, err := st.ReadFrom(bg, "s", 0); err != nil || len(p.Events) != 11 || p.Events[5].Type != "plugin/foreign" {
		t.Fatalf("after the write: %v", err)
	}
}

// TestLiveElsewhereOpenWriter: another process holding the artifact open for writing (a batch of a
// harness without the lease being written) refuses opening the session for writing, and refuses a live
// engine's next events, accepting none of them; the engine goes on once the descriptor is closed.
func TestLiveElsewhereOpenWriter(t *testing.T) {
	root, _ := leaseStore(t)
	st := newStore(t, root, 0)
	w, err := st.Writer(bg, "s")
	if err != nil {
		t.Fatal(err)
	}
	other := newStore(t, root, 0)
	path, _ := st.Backend().(*Backend).find("s")
	first, stop := helper(t, "open", path, "-")
	if first != "ready" {
		t.Fatal(first)
	}
	before := treeSums(t, root)
	wantCode(t, "a live engine's accept", w.AcceptEvents(turnLog(t, 5)), eventstore.CodeLiveElsewhere, "open for writing")
	if n := w.Pending(); n != 0 {
		t.Errorf("%d events accepted while another process writes", n)
	}
	if err := st.Close(bg); err != nil {
		t.Fatal(err)
	}
	_, err = other.Writer(bg, "s")
	wantCode(t, "opening for writing", err, eventstore.CodeLiveElsewhere, ") has session.jsonl open for writing")
	if ce := eventstore.AsCommandError(err); ce != nil && !strings.Contains(ce.Message, "pid ") {
		t.Errorf("the refusal does not name the process: %v", ce)
	}
	sameTree(t, before, treeSums(t, root))
	stop()
	if err := other.Append(bg, "s", turnLog(t, 5)); err != nil {
		t.Fatalf("after the descriptor closed: %v", err)
	}
}

// TestLiveElsewhereUnderEngine: a foreign append between two batches of a live engine refuses the next
// events outright (none is accepted, none kept aside to retry); a rescan releases the engine and its
// acknowledgement lets the next write read the session again.
func TestLiveElsewhereUnderEngine(t *testing.T) {
	root, _ := leaseStore(t)
	st := newStore(t, root, time.Hour)
	w, err := st.Writer(bg, "s")
	if err != nil {
		t.Fatal(err)
	}
	path, _ := st.Backend().(*Backend).find("s")
	foreignAppend(t, path, 5)
	before := treeSums(t, root)
	wantCode(t, "accept after a foreign append", w.AcceptEvents(turnLog(t, 5)), eventstore.CodeLiveElsewhere, "changed under this writer")
	if n := w.Pending(); n != 0 {
		t.Errorf("%d events accepted after a foreign append", n)
	}
	wantCode(t, "a later accept", w.AcceptEvents(turnLog(t, 5)), eventstore.CodeLiveElsewhere, "changed under this writer")
	sameTree(t, before, treeSums(t, root)) // no sidecar: nothing was accepted
	if n := st.Rescan(); n != 1 {
		t.Fatalf("rescan released %d", n)
	}
	if n, err := st.AcknowledgeForeign(bg); n != 1 || err != nil {
		t.Fatalf("acknowledged %d (%v)", n, err)
	}
	if err := st.Append(bg, "s", turnLog(t, 6)); err != nil {
		t.Fatalf("after rescan: %v", err)
	}
}

// TestLeaseFileFresh: a lock
// file the lease creates is a stamp of nothing (the epoch), so it cannot acknowledge a foreign change.
func TestLeaseFileFresh(t *testing.T) {
	root, _ := leaseStore(t)
	st := newStore(t, root, time.Hour)
	path, _ := st.Backend().(*Backend).find("s")
	lock := filepath.Join(filepath.Dir(path), LeaseName)
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	foreignAppend(t, path, 5)
	_, err := st.Writer(bg, "s")
	wantCode(t, "writer over a fresh lease file", err, eventstore.CodeLiveElsewhere, "ago by another process")
	fi, err := os.Stat(lock)
	if err != nil || fi.ModTime().Unix() != 0 {
		t.Errorf("the lease file this writer created: %v %v, want the epoch as its mtime", fi, err)
	}
}
