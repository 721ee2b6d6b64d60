package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/dshfs/dshfs/internal/fixtures"
)

// sessionDirs lists the session directory names of a mount.
func sessionDirs(t *testing.T, mnt string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(mnt, "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestCanary12BackendParity converts fixture stores JSONL → SQLite → JSONL, mounts all three and compares
// events.jsonl, surface.jsonl and messages.jsonl of every session with cat; check passes on each store.
func TestCanary12BackendParity(t *testing.T) {
	for _, set := range []struct {
		name string
		src  string
	}{
		{"generated-raw", fixtures.Path(t, "generated", "raw")},
		{"generated-zstd", fixtures.Path(t, "generated", "zstd")},
		{"upstream-raw", fixtures.Path(t, "upstream", "raw")},
	} {
		t.Run(set.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			os.Chmod(dir, 0o700)
			src := copyTree(t, set.src, filepath.Join(dir, "src"))
			db := filepath.Join(dir, "sessions.db")
			back := filepath.Join(dir, "back")
			out := cli(t, 0, "convert", "--verify", src, db)
			if set.name != "upstream-raw" && !bytes.Contains(out, []byte("a torn tail of")) {
				t.Errorf("the crash-torn session's torn tail was not reported:\n%s", out)
			}
			cli(t, 0, "convert", "--verify", "sqlite:"+db, "jsonl+raw:"+back)
			// a second run finds everything identical and writes nothing
			again := cli(t, 0, "convert", src, db)
			for _, line := range textLines(again) {
				if !strings.HasPrefix(line, "identical\t") {
					t.Errorf("rerun: %s", line)
				}
			}
			for _, store := range []string{src, db, back} {
				cli(t, 0, "check", store)
			}
			mnts := []string{mountStore(t, src, "--read-only"), mountStore(t, db, "--read-only"), mountStore(t, back, "--read-only")}
			names := sessionDirs(t, mnts[0])
			for _, m := range mnts[1:] {
				if got := sessionDirs(t, m); strings.Join(got, " ") != strings.Join(names, " ") {
					t.Fatalf("sessions differ: %v vs %v", got, names)
				}
			}
			for _, name := range names {
				for _, file := range []string{"events.jsonl", "surface.jsonl", "messages.jsonl"} {
					want := mustRun(t, "cat", filepath.Join(mnts[0], "sessions", name, file))
					for _, m := range mnts[1:] {
						if got := mustRun(t, "cat", filepath.Join(m, "sessions", name, file)); !bytes.Equal(got, want) {
							t.Errorf("%s/%s differs between %s and %s", name, file, mnts[0], m)
						}
					}
				}
			}
			// a SQLite mount has no raw transcripts and no projects; its status names the schema
			if _, err := os.Stat(filepath.Join(mnts[1], "by-project")); !os.IsNotExist(err) {
				t.Errorf("by-project on a SQLite mount: %v", err)
			}
			if _, err := os.Stat(filepath.Join(mnts[1], "sessions", names[0], "raw.jsonl")); !os.IsNotExist(err) {
				t.Errorf("raw.jsonl on a SQLite mount: %v", err)
			}
			status := mustRun(t, "jq", "-c", "[.backend, .schemaVersion]", filepath.Join(mnts[1], "status.json"))
			if strings.TrimSpace(string(status)) != `["sqlite",17]` {
				t.Errorf("status.json: %s", status)
			}
		})
	}
}

// TestConvertSkipsWhatCannotBeStored: a session the source refuses and one holding an event the SQLite
// schema cannot hold as written are reported by name and reason and skipped (exit 1); the rest converts.
func TestConvertSkipsWhatCannotBeStored(t *testing.T) {
	store, cfg := emptyStore(t, "none")
	cli(t, 0, "create", "--config", cfg, store, "fine")
	cli(t, 0, "create", "--config", cfg, store, "reordered")
	r := run(t, "", "sh", "-c", `printf '%s\n' '{"type":"plugin/x","data":{"n":1},"ignorable":true}' | "$1" append "$2" fine`, "sh", dshfsBin(t), store)
	if r.code != 0 {
		t.Fatalf("append: %d %s", r.code, r.stderr)
	}
	// an event the harness accepts whose envelope keys are in another order: a row would give it back
	// reordered, so SQLite cannot hold it as written
	paths, _ := filepath.Glob(filepath.Join(store, "*", "reordered", "session.jsonl"))
	if len(paths) != 1 {
		t.Fatalf("transcript of reordered: %v", paths)
	}
	f, err := os.OpenFile(paths[0], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"seq":0,"type":"turn/start","time":1,"data":{"turn":1}}` + "\n")
	f.Close()
	cli(t, 0, "check", store)
	refused := copyTree(t, fixtures.Path(t, "upstream", "refused-root"), filepath.Join(t.TempDir(), "refused"))
	dir := t.TempDir()
	os.Chmod(dir, 0o700)
	db := filepath.Join(dir, "s.db")
	out := string(cli(t, 1, "convert", store, db))
	if !strings.Contains(out, "converted\tfine\t1") || !strings.Contains(out, "skipped\treordered\t1\tnot representable in the destination: event seq 0 (turn/start) cannot be stored there: its envelope does not start with type, seq, time, data") {
		t.Errorf("convert output:\n%s", out)
	}
	out = string(cli(t, 1, "convert", refused, db))
	if strings.Count(out, "\trefused by the source: corrupt session log: first line is not a session header") != 2 {
		t.Errorf("convert output:\n%s", out)
	}
	// a session of the same id that differs is refused and left alone
	other := filepath.Join(t.TempDir(), "other")
	cli(t, 0, "create", "jsonl+raw:"+other, "fine")
	out = string(cli(t, 1, "convert", other, db))
	if !strings.HasPrefix(out, "differs\tfine\t0\t") {
		t.Errorf("convert into a different session:\n%s", out)
	}
	if got := cli(t, 0, "cat", db, "fine"); bytes.Count(got, []byte("\n")) != 1 {
		t.Errorf("the differing session was changed: %s", got)
	}
}

// TestSQLiteMountWrites drives a writable SQLite mount with the shell: create, append, resume of a crashed
// session, an append by another process followed with tail -f, and a second mount refused as a writer of
// a session the first holds.
func TestSQLiteMountWrites(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o700)
	db := filepath.Join(dir, "sessions.db")
	cli(t, 0, "convert", fixtures.Path(t, "generated", "raw"), db)
	m := startMount(t, db)
	mnt := m.dir
	mustCtl(t, filepath.Join(mnt, "ctl"), "create s1")
	sess := filepath.Join(mnt, "sessions", "s1")
	mustAppend(t, sess, turnLines(1, 0, false))
	events := readFile(t, filepath.Join(sess, "events.jsonl"))
	if n := bytes.Count(events, []byte("\n")); n != len(turnLines(1, 0, false)) {
		t.Fatalf("%d events after the append:\n%s", n, events)
	}
	// the crashed session: resume commits the closers as rows
	crash := filepath.Join(mnt, "sessions", "main-session-30628611-e45f-4f98-9688-010e1428e585")
	mustCtl(t, filepath.Join(crash, "ctl"), "resume")
	stored := cli(t, 0, "cat", "--view", "events", "sqlite:"+db, "main-session-30628611-e45f-4f98-9688-010e1428e585")
	if !bytes.Contains(stored, []byte(`"reason":{"kind":"interrupted"}`)) {
		t.Errorf("the resume's closers are not stored:\n%s", stored)
	}
	// another process appends to a session nobody holds; a reader following the mount sees it
	follow := filepath.Join(mnt, "sessions", "main-session-fa821f4b-98fd-46aa-86bc-0955a88ef4b8", "events.jsonl")
	tail := startTail(t, follow)
	r := run(t, "", "sh", "-c", `printf '%s\n' '{"type":"plugin/x","data":{"from":"elsewhere"},"ignorable":true}' | "$1" append "$2" main-session-fa821f4b-98fd-46aa-86bc-0955a88ef4b8`, "sh", dshfsBin(t), db)
	if r.code != 0 {
		t.Fatalf("external append: %s", r.stderr)
	}
	tail.waitFor(t, `"from":"elsewhere"`)
	// a second mount of the same database cannot write the session the first mount holds live
	mustAppend(t, sess, []string{`{"type":"turn/start","data":{"turn":2}}`})
	m2 := startMount(t, db)
	r = writeAppend(t, filepath.Join(m2.dir, "sessions", "s1"), []string{`{"type":"plugin/x","data":{},"ignorable":true}`})
	wantErrno(t, "a second writer of s1", r, syscall.EBUSY)
}

// tailProc is a `tail -f` following a file of the mount.
type tailProc struct {
	out  syncBuffer
	err  syncBuffer
	stop func() // ends tail (a mount cannot be unmounted while it holds a file open)
}

// startTail starts `tail -n 0 -s 0.1 -f file` (GNU tail polls a FUSE file; 0.1 s keeps the test short)
// and waits until it has the file open.
func startTail(t *testing.T, file string) *tailProc {
	t.Helper()
	tp := &tailProc{}
	cmd := exec.Command("tail", "-n", "0", "-s", "0.1", "-f", file)
	cmd.Stdout, cmd.Stderr = &tp.out, &tp.err
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tp.stop = sync.OnceFunc(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	t.Cleanup(tp.stop)
	waitFor(t, "tail to open "+file, func() (bool, string) { return openedBy(cmd.Process.Pid, file), tp.err.String() })
	return tp
}

// waitFor waits until tail has printed s.
func (tp *tailProc) waitFor(t *testing.T, s string) {
	t.Helper()
	waitFor(t, "tail -f to print "+s, func() (bool, string) {
		return strings.Contains(tp.out.String(), s), tp.out.String() + tp.err.String()
	})
}

// TestSQLiteBackup: backups of a SQLite store — through its writable mount (quiesced; the mount's
// store/sessions.db is one consistent copy made with the online backup API), by rsync of store/, and
// without a mount — verify, restore and read back as the live store does.
func TestSQLiteBackup(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o700)
	db := filepath.Join(dir, "sessions.db")
	cli(t, 0, "convert", fixtures.Path(t, "generated", "raw"), db)
	plain := filepath.Join(dir, "plain.db")
	cli(t, 0, "convert", fixtures.Path(t, "generated", "raw"), plain)
	m := startMount(t, db)
	mustCtl(t, filepath.Join(m.dir, "ctl"), "create live")
	live := filepath.Join(m.dir, "sessions", "live")
	mustAppend(t, live, turnLines(1, 0, false))

	dest := filepath.Join(t.TempDir(), "backup")
	r := run(t, "", dshfsBin(t), "backup", db, dest)
	if r.code != 0 || !strings.Contains(string(r.stderr), "backing up through the mount at "+m.dir) {
		t.Fatalf("backup: exit %d\n%s", r.code, r.stderr)
	}
	names, _ := os.ReadDir(dest)
	var files []string
	for _, n := range names {
		files = append(files, n.Name())
	}
	if strings.Join(files, " ") != "MANIFEST.json sessions.db spill-index.jsonl" {
		t.Fatalf("backup holds %v", files)
	}
	if got := strings.TrimSpace(string(mustRun(t, "sqlite3", "-readonly", filepath.Join(dest, "sessions.db"), "PRAGMA integrity_check"))); got != "ok" {
		t.Fatalf("integrity_check: %s", got)
	}
	cli(t, 0, "verify", dest)
	restored := filepath.Join(t.TempDir(), "restored")
	cli(t, 0, "restore", dest, restored)
	cli(t, 0, "check", restored)
	rm := mountStore(t, restored, "--read-only")
	for _, name := range sessionDirs(t, m.dir) {
		for _, file := range []string{"events.jsonl", "messages.jsonl"} {
			if got, want := mustRun(t, "cat", filepath.Join(rm, "sessions", name, file)), mustRun(t, "cat", filepath.Join(m.dir, "sessions", name, file)); !bytes.Equal(got, want) {
				t.Errorf("restored %s/%s differs from the live mount's", name, file)
			}
		}
	}
	// the backup is only read by verify and restore
	if after, _ := os.ReadDir(dest); len(after) != 3 {
		t.Errorf("verify or restore changed the backup: %d files", len(after))
	}

	// rsync of the mount's store/ while it runs: one consistent database
	copyDir := filepath.Join(t.TempDir(), "rsynced")
	mustRun(t, "rsync", "-a", m.dir+"/store/", copyDir+"/")
	cli(t, 0, "check", copyDir)
	if got := cli(t, 0, "cat", copyDir, "live"); !bytes.Equal(got, readFile(t, filepath.Join(live, "events.jsonl"))) {
		t.Errorf("store/sessions.db does not hold the live session's flushed events")
	}
	// a second rsync copies nothing: the copy is remade only when the database changed
	out := mustRun(t, "rsync", "-a", "--itemize-changes", m.dir+"/store/", copyDir+"/")
	if strings.TrimSpace(string(out)) != "" {
		t.Errorf("a repeated rsync of an unchanged store/ copied:\n%s", out)
	}

	// without a mount: one consistent copy as well
	dest2 := filepath.Join(t.TempDir(), "backup2")
	cli(t, 0, "backup", plain, dest2)
	cli(t, 0, "verify", dest2)
}
