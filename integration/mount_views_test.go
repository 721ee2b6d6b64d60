package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/internal/fixtures"
	"github.com/dshfs/dshfs/mount"
	"github.com/dshfs/dshfs/spill"
)

// sessionStatusKeys is the session status.json schema, in order (docs/tree.md, with custody last).
var sessionStatusKeys = []string{"id", "state", "backend", "location", "formatVersion", "revision", "events",
	"nextSeq", "durableSeq", "pending", "balanced", "openTurn", "repairNeeded", "repairPreview", "tornBytes",
	"unknownOutcomes", "activeCompaction", "refusal", "lastError", "lastCommand", "custody"}

// storeStatusKeys is the root status.json schema, in order (docs/tree.md).
var storeStatusKeys = []string{"backend", "root", "formatVersion", "schemaVersion", "sessions", "refused", "live", "pending",
	"rootErrors", "lastError", "quiescedUntil", "lastQuiesce"}

// storeStatsKeys is the root stats.json: the mount's cache counters, its pid and how it hears of changes, in order.
var storeStatsKeys = []string{"decodes", "indexHits", "readahead", "evicted", "primed", "renderedBytes", "extendedBytes",
	"liveResident", "liveBytes", "liveReleased", "liveReloaded", "pid", "watch"}

// sessionEntries is what a readable session directory holds besides the optional parent link.
var sessionEntries = []string{"compactions/", "events/", "events.jsonl", "forks/", "header.json", "messages.jsonl",
	"raw.jsonl", "shadowed/", "shadowed.jsonl", "spill/", "status.json", "surface/", "surface.jsonl", "trace/",
	"transcript.html", "transcript.md", "turns/", "usage.jsonl", "usage.svg"}

// TestMountViews mounts every fixture root once and checks each file of the tree against the CLI's output
// of the same view, with the tools a user reads it with (cat, stat, jq, rsync, diff).
func TestMountViews(t *testing.T) {
	sets := []string{"upstream/raw", "upstream/zstd", "generated/raw", "generated/zstd"}
	colliders, err := os.ReadDir(fixtures.Path(t, "upstream", "colliders"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range colliders {
		if c.IsDir() {
			sets = append(sets, "upstream/colliders/"+c.Name())
		}
	}
	if len(sets) < 4+43 {
		t.Fatalf("expected 43 collider roots, found %d", len(sets)-4)
	}
	for _, set := range sets {
		t.Run(set, func(t *testing.T) {
			t.Parallel()
			checkMountedRoot(t, fixtures.Path(t, filepath.FromSlash(set)))
		})
	}
}

// lsEntry is one line of `dshfs ls --json`.
type lsEntry struct {
	ID         string          `json:"id"`
	ProjectDir string          `json:"projectDir"`
	Refusal    json.RawMessage `json:"refusal"`
	Header     struct {
		ParentSession *string `json:"parentSession"`
	} `json:"header"`
}

func listStore(t testing.TB, store string) []lsEntry {
	t.Helper()
	var out []lsEntry
	for _, l := range lines(cli(t, 0, "ls", "--json", store)) {
		var e lsEntry
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatalf("ls --json line %q: %v", l, err)
		}
		out = append(out, e)
	}
	return out
}

// rootInfo is what the session checks need to know about the whole mounted root.
type rootInfo struct {
	store, mnt string
	nameOf     map[string]string // id -> mounted name
	byName     map[string]lsEntry
}

func checkMountedRoot(t *testing.T, src string) {
	store := fixtures.CopyTree(t, src)
	before := storeSum(t, store)
	// read-only: this test walks every file of the read side (the write side's ctl and append files are
	// checked by the write tests)
	mnt := mountStore(t, store, "--read-only")

	// the mounted names are the harness's own directory names (upstream encodeSegment of the id)
	want := map[string]bool{}
	for _, s := range fixtures.Sessions(t, store) {
		want[s.EncodedID] = true
	}
	ls := listStore(t, store)
	var got []string
	for _, l := range lines(mustRun(t, "ls", "-1", filepath.Join(mnt, "sessions"))) {
		got = append(got, strings.TrimSuffix(string(l), "\n"))
	}
	if len(got) != len(want) || len(ls) != len(want) {
		t.Fatalf("mount lists %d sessions, the store holds %d, dshfs ls shows %d: %q", len(got), len(want), len(ls), got)
	}
	for _, n := range got {
		if !want[n] {
			t.Errorf("mounted name %q is not a session directory of the store", n)
		}
	}
	info := rootInfo{store: store, mnt: mnt, nameOf: map[string]string{}, byName: map[string]lsEntry{}}
	// header.json names the id behind each mounted name (one jq over all of them)
	var headers []string
	for _, n := range got {
		headers = append(headers, filepath.Join(mnt, "sessions", n, "header.json"))
	}
	idOf := map[string]string{}
	for _, l := range lines(mustRun(t, "jq", append([]string{"-c", "[input_filename, .id]"}, headers...)...)) {
		var pair [2]string
		if err := json.Unmarshal(l, &pair); err != nil {
			t.Fatalf("jq output %q: %v", l, err)
		}
		idOf[filepath.Base(filepath.Dir(pair[0]))] = pair[1]
	}
	byID := map[string]lsEntry{}
	for _, e := range ls {
		if string(e.Refusal) != "null" {
			t.Fatalf("fixture session %q is refused: %s", e.ID, e.Refusal)
		}
		byID[e.ID] = e
	}
	for _, n := range got {
		id, ok := idOf[n]
		e, listed := byID[id]
		if !ok || !listed {
			t.Fatalf("mounted %q: header.json id %q is not listed by dshfs ls", n, id)
		}
		info.nameOf[id] = n
		info.byName[n] = e
	}

	checkRootFiles(t, info)
	t.Run("sessions", func(t *testing.T) {
		for _, n := range got {
			t.Run(n, func(t *testing.T) {
				t.Parallel()
				checkSession(t, info, n)
			})
		}
	})
	if t.Failed() {
		return
	}

	// rsync -a copies every file and symlink exactly (but stats.json, whose counters move with the reads
	// of the copy and of diff itself)
	dest := filepath.Join(t.TempDir(), "copy")
	mustRun(t, "rsync", "-a", mnt+"/", dest+"/")
	if r := run(t, "", "diff", "-r", "--no-dereference", "-x", "stats.json", mnt, dest); r.code != 0 {
		t.Fatalf("rsync -a copy differs from the mount (exit %d):\n%s%s", r.code, r.stdout, r.stderr)
	}
	sameSums(t, before, storeSum(t, store))
}

// checkRootFiles checks README, the store status and by-project/.
func checkRootFiles(t *testing.T, info rootInfo) {
	readme := mustRun(t, "cat", filepath.Join(info.mnt, "README"))
	if string(readme) != mount.Readme+mount.ReadmeReadOnly {
		t.Errorf("README differs from mount.Readme:\n%s", readme)
	}
	status := mustRun(t, "cat", filepath.Join(info.mnt, "status.json"))
	checkKeys(t, "status.json", status, storeStatusKeys)
	checkKeys(t, "stats.json", mustRun(t, "cat", filepath.Join(info.mnt, "stats.json")), storeStatsKeys)
	var st struct {
		Sessions, Refused int
	}
	if err := json.Unmarshal(status, &st); err != nil {
		t.Fatal(err)
	}
	if st.Sessions != len(info.byName) || st.Refused != 0 {
		t.Errorf("store status.json: sessions %d refused %d, want %d and 0: %s", st.Sessions, st.Refused, len(info.byName), status)
	}
	// by-project/<project>/<name> -> ../../sessions/<name>, for every session with a project directory
	links := map[string]string{}
	for _, rec := range findEntries(t, filepath.Join(info.mnt, "by-project")) {
		if rec.kind == 'l' {
			links[rec.path] = rec.target
		}
	}
	for name, e := range info.byName {
		if e.ProjectDir == "" {
			continue
		}
		p := spill.NameSegment(e.ProjectDir) + "/" + name
		if target, ok := links[p]; !ok || target != "../../sessions/"+name {
			t.Errorf("by-project/%s: link %q (present %v), want ../../sessions/%s", p, target, ok, name)
		}
		delete(links, p)
	}
	for p, target := range links {
		t.Errorf("by-project/%s -> %s: not a listed session", p, target)
	}
}

// entry is one line of find's output.
type entry struct {
	kind         byte // find's %y: f, d, l
	path, target string
}

// findEntries lists a tree with one find run (NUL-separated: names are data).
func findEntries(t testing.TB, dir string) []entry {
	t.Helper()
	out := mustRun(t, "find", dir, "-mindepth", "1", "-printf", `%y\0%P\0%l\0`)
	parts := bytes.Split(out, []byte{0})
	var ents []entry
	for i := 0; i+2 < len(parts); i += 3 {
		ents = append(ents, entry{kind: parts[i][0], path: string(parts[i+1]), target: string(parts[i+2])})
	}
	return ents
}

// wantFile is one mounted file and the bytes the CLI says it holds.
type wantFile struct {
	rel  string
	want []byte
	json bool // jq must parse it
}

func checkSession(t *testing.T, info rootInfo, name string) {
	e := info.byName[name]
	id := e.ID
	dir := filepath.Join(info.mnt, "sessions", name)
	view := func(v string) []byte { return cli(t, 0, "cat", "--view", v, info.store, id) }

	events := view("events")
	evLines := lines(events)
	var files []wantFile
	add := func(rel string, want []byte, isJSON bool) { files = append(files, wantFile{rel, want, isJSON}) }
	status := view("status")
	var st struct{ TornBytes int64 }
	if err := json.Unmarshal(status, &st); err != nil {
		t.Fatal(err)
	}
	add("header.json", view("header"), true)
	add("status.json", status, true)
	add("raw.jsonl", view("raw"), st.TornBytes == 0) // a torn tail is not JSON, by definition
	add("events.jsonl", events, true)
	surfaceView, shadowedView := view("surface"), view("shadowed")
	add("surface.jsonl", surfaceView, true)
	add("messages.jsonl", view("messages"), true)
	add("shadowed.jsonl", shadowedView, true)
	add("transcript.md", view("transcript"), false)
	add("transcript.html", view("transcript-html"), false)
	add("usage.jsonl", view("usage"), true)
	add("usage.svg", view("usage-svg"), false)
	add("compactions/prunes.jsonl", view("prunes"), true)
	add("spill/index.json", view("spill"), true)
	compLines := map[string][]byte{}
	for _, l := range lines(view("compactions")) {
		var rec struct{ CompactionID string }
		if err := json.Unmarshal(l, &rec); err != nil {
			t.Fatalf("compactions line %q: %v", l, err)
		}
		compLines[spill.NameSegment(rec.CompactionID)+".json"] = l
	}

	top := map[string]bool{}
	var surface, shadowed []wantFile
	traceListed := false
	for _, ent := range findEntries(t, dir) {
		parent, base := filepath.Split(ent.path)
		parent = strings.TrimSuffix(parent, "/")
		if parent == "" {
			if ent.kind == 'd' {
				top[base+"/"] = true
			} else {
				top[base] = true
			}
		}
		switch {
		case parent == "" && base == "parent":
			// a one-line file naming the parent id (a link would loop with the parent's forks/ link)
			p := e.Header.ParentSession
			if p == nil || ent.kind != 'f' {
				t.Errorf("parent (%c), but the header's parentSession is %v", ent.kind, p)
				break
			}
			if got := string(readFile(t, filepath.Join(dir, "parent"))); got != *p+"\n" {
				t.Errorf("parent holds %q, want the parent id %q", got, *p)
			}
		case parent == "forks":
			child, ok := info.byName[base]
			if ent.kind != 'l' || ent.target != "../../"+base || !ok || child.Header.ParentSession == nil || *child.Header.ParentSession != id {
				t.Errorf("forks/%s (%c -> %q): not a child of %q", base, ent.kind, ent.target, id)
			}
		case parent == "" || ent.kind == 'd':
		case ent.kind != 'f':
			t.Errorf("%s: unexpected %c", ent.path, ent.kind)
		case parent == "events":
			// events/<seq>.<type>.json is event:SEQ, which is line SEQ of the events view (both render the
			// same snapshot's event list, one JSON.stringify line each), so it is compared with that line
			// instead of one CLI run per event.
			seq, line := eventLine(t, ent.path, base, evLines)
			if line == nil {
				continue
			}
			if want := eventFileName(t, seq, line); base != want {
				t.Errorf("%s: want name %s", ent.path, want)
			}
			add(ent.path, line, true)
		case parent == "surface":
			pos, err := strconv.Atoi(strings.SplitN(base, "-", 2)[0])
			if err != nil || len(base) < 12 || base[10] != '-' {
				t.Errorf("%s: not <pos>-<seq>.<type>.json", ent.path)
				continue
			}
			seq, line := eventLine(t, ent.path, base[11:], evLines)
			if line == nil {
				continue
			}
			if want := fmt.Sprintf("%010d-%s", pos, eventFileName(t, seq, line)); base != want {
				t.Errorf("%s: want name %s", ent.path, want)
			}
			surface = append(surface, wantFile{base, line, true})
			add(ent.path, line, true)
		case parent == "shadowed":
			seq, line := eventLine(t, ent.path, base, evLines)
			if line == nil {
				continue
			}
			if want := eventFileName(t, seq, line); base != want {
				t.Errorf("%s: want name %s", ent.path, want)
			}
			shadowed = append(shadowed, wantFile{base, line, true})
			add(ent.path, line, true)
		case parent == "trace":
			seq, ok := seqName(base, ".json")
			if !ok {
				t.Errorf("%s: not <seq>.json", ent.path)
				continue
			}
			traceListed = traceListed || seq == 0
			add(ent.path, view("trace:"+strconv.FormatInt(seq, 10)), true)
		case parent == "turns":
			n, ok := seqName(base, ".jsonl")
			if !ok {
				t.Errorf("%s: not <n>.jsonl", ent.path)
				continue
			}
			add(ent.path, view("turn:"+strconv.FormatInt(n, 10)), true)
		case parent == "compactions" && base == "prunes.jsonl", parent == "spill" && base == "index.json":
		case parent == "compactions":
			line, ok := compLines[base]
			if !ok {
				t.Errorf("%s: no such record in --view compactions", ent.path)
				continue
			}
			delete(compLines, base)
			add(ent.path, line, true)
		default:
			t.Errorf("%s: unexpected file", ent.path)
		}
	}
	for n := range compLines {
		t.Errorf("compactions/%s: in --view compactions but not in the mount", n)
	}
	for _, n := range sessionEntries {
		if !top[n] {
			t.Errorf("session directory lacks %s", n)
		}
		delete(top, n)
	}
	if e.Header.ParentSession != nil {
		delete(top, "parent")
	}
	if len(top) > 0 {
		t.Errorf("session directory has unexpected entries %v", top)
	}
	// trace/ lists only seqs that take part in a replacement, but any seq can be looked up
	if len(evLines) > 0 && !traceListed {
		add("trace/0000000000.json", view("trace:0"), true)
	}
	// the equivalence the per-event comparison relies on, spot-checked on the last event
	if n := len(evLines); n > 0 {
		if got := view("event:" + strconv.Itoa(n-1)); !bytes.Equal(got, evLines[n-1]) {
			t.Errorf("--view event:%d is not line %d of --view events:\n%s\n%s", n-1, n-1, got, evLines[n-1])
		}
	}
	if got := countPrefix(files, "events/"); got != len(evLines) {
		t.Errorf("events/ holds %d files, the log %d events", got, len(evLines))
	}
	// surface/ in position order and shadowed/ in seq order are the per-event split of the .jsonl views
	checkConcat(t, "surface/", surface, surfaceView)
	checkConcat(t, "shadowed/", shadowed, shadowedView)

	checkKeys(t, "status.json", status, sessionStatusKeys)
	checkFiles(t, dir, files)
	t.Logf("%d files match their CLI views (%d events)", len(files), len(evLines))
}

// eventLine parses the leading seq of an events/ or shadowed/ name and returns line SEQ of the log.
func eventLine(t *testing.T, path, name string, evLines [][]byte) (int64, []byte) {
	t.Helper()
	seq, err := strconv.ParseInt(strings.SplitN(name, ".", 2)[0], 10, 64)
	if err != nil || seq < 0 || seq >= int64(len(evLines)) {
		t.Errorf("%s: seq %q is not in the log (%d events)", path, name, len(evLines))
		return 0, nil
	}
	return seq, evLines[seq]
}

// eventFileName is the docs/tree.md name of one event file: <seq10>.<encodeSegment(type)>.json.
func eventFileName(t *testing.T, seq int64, line []byte) string {
	t.Helper()
	var ev struct{ Type string }
	if err := json.Unmarshal(line, &ev); err != nil {
		t.Fatalf("event line %q: %v", line, err)
	}
	return fmt.Sprintf("%010d.%s.json", seq, spill.NameSegment(ev.Type))
}

// seqName parses a 10-digit zero-padded number followed by suffix.
func seqName(name, suffix string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, suffix)
	if !ok || len(digits) != 10 {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil && fmt.Sprintf("%010d", n) == digits
}

func countPrefix(files []wantFile, prefix string) int {
	n := 0
	for _, f := range files {
		if strings.HasPrefix(f.rel, prefix) {
			n++
		}
	}
	return n
}

func checkConcat(t *testing.T, what string, parts []wantFile, whole []byte) {
	t.Helper()
	sort.Slice(parts, func(i, j int) bool { return parts[i].rel < parts[j].rel })
	var b []byte
	for _, p := range parts {
		b = append(b, p.want...)
	}
	if !bytes.Equal(b, whole) {
		t.Errorf("%s files in name order do not concatenate to the whole view:\n%s\nvs\n%s", what, b, whole)
	}
}

// checkKeys requires a JSON object whose keys are exactly want, in order.
func checkKeys(t *testing.T, what string, data []byte, want []string) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Errorf("%s: not a JSON object: %s", what, data)
		return
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Errorf("%s: %v", what, err)
			return
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Errorf("%s: %v", what, err)
			return
		}
	}
	if strings.Join(keys, ",") != strings.Join(want, ",") {
		t.Errorf("%s keys:\n got %v\nwant %v", what, keys, want)
	}
	if !bytes.HasSuffix(data, []byte("}\n")) || bytes.Count(data, []byte("\n")) != 1 {
		t.Errorf("%s is not one compact line + LF: %q", what, data)
	}
}

// checkFiles reads every file with one stat, one cat and one jq run: stat's sizes must equal the CLI's
// byte counts, cat must return the CLI's bytes, and jq must parse every JSON view.
func checkFiles(t *testing.T, dir string, files []wantFile) {
	t.Helper()
	paths := make([]string, len(files))
	var jsonPaths []string
	var all []byte
	for i, f := range files {
		paths[i] = filepath.Join(dir, f.rel)
		all = append(all, f.want...)
		if f.json {
			jsonPaths = append(jsonPaths, paths[i])
		}
	}
	sizes := strings.Fields(string(mustRun(t, "stat", append([]string{"-c", "%s"}, paths...)...)))
	if len(sizes) != len(files) {
		t.Fatalf("stat printed %d sizes for %d files", len(sizes), len(files))
	}
	for i, f := range files {
		if sizes[i] != strconv.Itoa(len(f.want)) {
			t.Errorf("%s: stat size %s, CLI view has %d bytes", f.rel, sizes[i], len(f.want))
		}
	}
	if got := mustRun(t, "cat", paths...); !bytes.Equal(got, all) {
		// find the first file that differs, one cat each
		for i, f := range files {
			if b := mustRun(t, "cat", paths[i]); !bytes.Equal(b, f.want) {
				t.Fatalf("%s differs from the CLI view:\nmount: %q\n  CLI: %q", f.rel, b, f.want)
			}
		}
		t.Fatalf("cat of all files differs from the CLI views, though each file matches alone")
	}
	mustRun(t, "jq", append([]string{"-c", "."}, jsonPaths...)...)
}
