package jsonl

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/eventtest"
	"github.com/dshfs/dshfs/internal/fixtures"
)

func TestParseGenerationName(t *testing.T) {
	tests := []struct {
		name string
		want GenerationFile
		ok   bool
	}{
		{"session.jsonl", GenerationFile{0, None}, true},
		{"session.jsonl.zstd", GenerationFile{0, Zstd}, true},
		{"session.v2.jsonl", GenerationFile{2, None}, true},
		{"session.v3.jsonl.zstd", GenerationFile{3, Zstd}, true},
		{"session.v12.jsonl", GenerationFile{12, None}, true},
		{"session.v0.jsonl", GenerationFile{}, false},
		{"session.v03.jsonl", GenerationFile{}, false},
		{"Session.v3.jsonl", GenerationFile{}, false},
		{"session.V3.jsonl", GenerationFile{}, false},
		{"session.v3.JSONL", GenerationFile{}, false},
		{"session.v3.jsonl.tmp", GenerationFile{}, false},
		{"session.v3.jsonl.zstd.tmp", GenerationFile{}, false},
		{"session.migration.0123456789abcdef.jsonl.zstd.tmp", GenerationFile{}, false},
		{"session.v.jsonl", GenerationFile{}, false},
		{"session.v3x.jsonl", GenerationFile{}, false},
		{"session.v99999999999999999999.jsonl", GenerationFile{}, false},
		{"session.lock", GenerationFile{}, false},
		{"session.jsonl.zstd.zstd", GenerationFile{}, false},
	}
	for _, tt := range tests {
		got, ok := ParseGenerationName(tt.name)
		if ok != tt.ok || got != tt.want {
			t.Errorf("ParseGenerationName(%q) = %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
		if ok && got.Name() != tt.name {
			t.Errorf("%q: Name() = %q", tt.name, got.Name())
		}
	}
}

// genHeader is a header line of generation v for id under testCwd, in the shape the harness gives it.
func genHeader(id string, v int) string {
	if v == 0 {
		return headerLine(id)
	}
	return fmt.Sprintf(`{"type":"session","version":%d,"id":%s,"createdAt":1000,"cwd":"%s","isSeeded":false,"delegationDepth":0}`, v, jsonString(id), testCwd)
}

// writeGenFiles writes the named files into the directory of session id (testCwd) under root: a generation
// file gets a header of the version its name states (or the one given in hdr), in mode's encoding.
func writeGenFiles(t *testing.T, root string, mode Compression, id string, names []string, hdr map[string]int) string {
	t.Helper()
	b, err := Open(root, mode)
	if err != nil {
		t.Fatal(err)
	}
	cwd := event.String(testCwd)
	v0, err := b.Locate(event.Header{ID: id, Cwd: &cwd})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(v0)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		v := 0
		if g, ok := ParseGenerationName(name); ok {
			v = int(g.Gen)
		}
		if h, ok := hdr[name]; ok {
			v = h
		}
		text := []byte(lines([]string{genHeader(id, v)}, turn(1, 0)))
		if strings.HasSuffix(name, ".zstd") {
			var lines [][]byte
			for _, l := range bytes.SplitAfter(text, []byte("\n")) {
				if len(l) > 0 {
					lines = append(lines, l)
				}
			}
			text = EncodeFrame(EncodeFrame(nil, lines[0]), bytes.Join(lines[1:], nil))
		}
		if err := os.WriteFile(filepath.Join(dir, name), text, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestGenerationDiscovery: the numerically highest valid generation in the root's encoding is the session
// (listed, loaded, located), whatever else the directory holds; names the harness does not match are never
// generation files; a predecessor is never served in the newer one's place.
func TestGenerationDiscovery(t *testing.T) {
	ignored := []string{"session.v0.jsonl", "session.V3.jsonl", "session.v03.jsonl", "Session.jsonl", "session.v4.jsonl.tmp",
		"session.migration.0123456789abcdef.jsonl.tmp", "session.jsonl.1f2e3d.tmp", "session.lock", "session.jsonl.torn-1", "session.v4.backup.jsonl"}
	tests := []struct {
		name    string
		mode    Compression
		files   []string
		current string   // "" : no session at all
		beside  []string // names of the other generation files listed beside the artifact
		refusal string   // a substring of the refusal; "" : the session loads
	}{
		{"v0 only", None, []string{"session.jsonl"}, "session.jsonl", nil, ""},
		{"v0 with ignored names", None, append([]string{"session.jsonl"}, ignored...), "session.jsonl", nil, ""},
		{"only ignored names", None, ignored, "", nil, ""},
		{"v3 only", None, []string{"session.v3.jsonl"}, "session.v3.jsonl", nil, ""},
		{"v3 beside v0", None, []string{"session.jsonl", "session.v3.jsonl"}, "session.v3.jsonl", []string{"session.jsonl"}, ""},
		{"v2 beside v0", Zstd, []string{"session.jsonl.zstd", "session.v2.jsonl.zstd"}, "session.v2.jsonl.zstd", []string{"session.jsonl.zstd"}, ""},
		{"numeric not lexical", None, []string{"session.jsonl", "session.v2.jsonl", "session.v10.jsonl", "session.v9.jsonl"}, "session.v10.jsonl",
			[]string{"session.jsonl", "session.v2.jsonl", "session.v9.jsonl"}, "is format generation v10, written by a harness newer than dshfs reads; dshfs reads generations v0, v2, v3 and v4 and writes v0 and v4 (the older session.jsonl, session.v2.jsonl, session.v9.jsonl beside it are kept untouched and are not the session)"},
		{"zstd v3 with ignored", Zstd, []string{"session.jsonl.zstd", "session.v3.jsonl.zstd", "session.v3.jsonl.zstd.tmp", "session.v03.jsonl.zstd"},
			"session.v3.jsonl.zstd", []string{"session.jsonl.zstd"}, ""},
		{"v1 is no release's", None, []string{"session.jsonl", "session.v1.jsonl"}, "session.v1.jsonl", []string{"session.jsonl"},
			"is format generation v1, written by no tagged harness release"},
		{"encoding mismatch of a newer generation", None, []string{"session.jsonl", "session.v3.jsonl.zstd"}, "session.jsonl", []string{"session.v3.jsonl.zstd"},
			`session.v3.jsonl.zstd" uses .jsonl.zstd, but this backend is configured for compression "none"; use a separate root or select the matching compression mode`},
		{"encoding mismatch alone", Zstd, []string{"session.v3.jsonl"}, "session.v3.jsonl", nil,
			`session.v3.jsonl" uses .jsonl, but this backend is configured for compression "zstd"`},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			dir := writeGenFiles(t, root, tt.mode, "s", tt.files, nil)
			b, err := Open(root, tt.mode)
			if err != nil {
				t.Fatal(err)
			}
			l, err := b.List(ctx)
			if err != nil || len(l.RootErrors) != 0 {
				t.Fatalf("list: %v %+v", err, l.RootErrors)
			}
			_, loadErr := b.LoadStored(ctx, "s")
			if tt.current == "" {
				if len(l.Entries) != 0 || !eventstore.IsNotFound(loadErr) {
					t.Fatalf("entries %+v, load %v", l.Entries, loadErr)
				}
				return
			}
			if len(l.Entries) != 1 {
				t.Fatalf("entries: %+v", l.Entries)
			}
			e := l.Entries[0]
			if e.ID != "s" || e.Path != filepath.Join(dir, tt.current) {
				t.Fatalf("entry %s at %s, want %s", e.ID, e.Path, tt.current)
			}
			var preds []string
			for _, p := range e.Beside {
				preds = append(preds, filepath.Base(p))
			}
			if strings.Join(preds, ",") != strings.Join(tt.beside, ",") {
				t.Fatalf("beside %v, want %v", preds, tt.beside)
			}
			if tt.refusal == "" {
				if e.Refusal != nil || loadErr != nil {
					t.Fatalf("refused: %v / %v", e.Refusal, loadErr)
				}
				return
			}
			if e.Refusal == nil || !strings.Contains(e.Refusal.Error(), tt.refusal) {
				t.Fatalf("listing refusal %v, want it to contain %q", e.Refusal, tt.refusal)
			}
			if loadErr == nil || loadErr.Error() != e.Refusal.Error() {
				t.Fatalf("load %v; listing refused with %v", loadErr, e.Refusal)
			}
			if strings.Contains(tt.refusal, "generation v") && eventstore.Classify(loadErr) != eventstore.KindUnsupported {
				t.Fatalf("kind %s", eventstore.Classify(loadErr))
			}
			if st, err := b.Stat(ctx, "s", ""); err == nil && st.Token != e.Revision {
				t.Fatalf("Stat names another file than the listing: %s vs %s", st.Token, e.Revision)
			}
		})
	}
}

// TestGenerationHeaderVersion: a generation file whose header states another version than its name is
// refused with the harness's text, and so is a header whose version is not a safe non-negative integer.
func TestGenerationHeaderVersion(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		mode Compression
		name string
		hdr  int
		want string
	}{
		{None, "session.v3.jsonl", 0, "resolved JSONL source filename identifies v3, but its header identifies v0"},
		{None, "session.v3.jsonl", 2, "resolved JSONL source filename identifies v3, but its header identifies v2"},
		{Zstd, "session.v2.jsonl.zstd", 3, "resolved JSONL source filename identifies v2, but its header identifies v3"},
		{None, "session.v3.jsonl", -1, "corrupt session log: header version is not a non-negative safe integer"},
	} {
		root := t.TempDir()
		dir := writeGenFiles(t, root, tt.mode, "s", []string{tt.name}, map[string]int{tt.name: tt.hdr})
		b, _ := Open(root, tt.mode)
		want := tt.want + " (raw log: " + filepath.Join(dir, tt.name) + ")"
		l, err := b.List(ctx)
		if err != nil || len(l.Entries) != 1 || l.Entries[0].Refusal == nil || l.Entries[0].Refusal.Error() != want {
			t.Fatalf("%s with header v%d: %v %+v\nwant %s", tt.name, tt.hdr, err, l.Entries, want)
		}
		if _, err := b.LoadStored(ctx, "s"); err == nil || err.Error() != want {
			t.Fatalf("load: %v", err)
		}
	}
}

// genFixtureStore copies a fixtures/generations store into a temp dir and opens it in its encoding.
func genFixtureStore(t *testing.T, elem ...string) (*Backend, string) {
	t.Helper()
	root := fixtures.CopyTree(t, fixtures.Path(t, append([]string{"generations"}, elem...)...))
	mode := Zstd
	if elem[len(elem)-1] == "raw" {
		mode = None
	}
	b, err := Open(root, mode)
	if err != nil {
		t.Fatal(err)
	}
	return b, root
}

// TestGenerationFixtures: the harness's own v2 and v3 stores, and v0 logs with their v3 successors beside
// them, list every session from its current generation (never from the v0 file beside it), load its header
// and events exactly as the harness's published codec restores them (fixtures/generations/golden), and raw
// reads the current file's text.
func TestGenerationFixtures(t *testing.T) {
	ctx := context.Background()
	for _, store := range [][]string{{"v3", "raw"}, {"v3", "zstd"}, {"beside", "raw"}, {"beside", "zstd"}, {"v2", "raw"}, {"v2", "zstd"}} {
		t.Run(strings.Join(store, "/"), func(t *testing.T) {
			b, _ := genFixtureStore(t, store...)
			gen := "v" + store[0][1:]
			if store[0] == "beside" {
				gen = "v3"
			}
			l, err := b.List(ctx)
			if err != nil || len(l.RootErrors) != 0 || len(l.Entries) < 5 {
				t.Fatalf("list: %v, %+v, %d entries", err, l.RootErrors, len(l.Entries))
			}
			for _, e := range l.Entries {
				if e.Refusal != nil || !strings.HasSuffix(e.Path, "session."+gen+b.mode.Suffix()) || e.Header == nil {
					t.Fatalf("%s: %s listed with %v", e.ID, e.Path, e.Refusal)
				}
				if (store[0] == "beside") != (len(e.Beside) == 1) {
					t.Fatalf("%s: predecessors %v", e.ID, e.Beside)
				}
				if len(e.HeaderLine) == 0 || !bytes.Contains(e.HeaderLine, []byte(`"version":`+gen[1:])) {
					t.Fatalf("%s: header line %s", e.ID, e.HeaderLine)
				}
				p, err := b.LoadStored(ctx, e.ID)
				if err != nil {
					t.Fatalf("%s: load %v", e.ID, err)
				}
				if p.Generation != int(gen[1]-'0') || p.Path != e.Path {
					t.Fatalf("%s: loaded generation %d from %s", e.ID, p.Generation, p.Path)
				}
				golden := goldenRestore(t, store, gen, e.ID)
				var got bytes.Buffer
				for _, ev := range p.Events {
					got.Write(ev.Raw)
					got.WriteByte('\n')
				}
				if want := golden[bytes.IndexByte(golden, '\n')+1:]; !bytes.Equal(got.Bytes(), want) {
					t.Fatalf("%s: events differ from the codec's restore", e.ID)
				}
				if want := `{"header":` + string(p.Header.Meta()) + `,`; !bytes.HasPrefix(golden, []byte(want)) {
					t.Fatalf("%s: header %s, golden %.200s", e.ID, p.Header.Meta(), golden)
				}
				raw, err := b.ReadRaw(ctx, e.ID)
				if err != nil || !bytes.HasPrefix(raw, []byte(`{"type":"session","version":`+gen[1:])) {
					t.Fatalf("%s: raw %.80q, %v", e.ID, raw, err)
				}
			}
		})
	}
}

// goldenRestore is what the harness's codec restores from a fixture session (fixtures/generations/golden); a
// beside store's v3 files are the v3 store's.
func goldenRestore(t *testing.T, store []string, gen, id string) []byte {
	t.Helper()
	b, err := os.ReadFile(fixtures.Path(t, "generations", "golden", gen+"-"+store[1], id+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGenerationWritesRefused: no write lands in a session whose current generation is not v0 — create of
// an id that exists only as v3, an append, a resume (lock) and a repair of a session with v3 beside its v0
// log, and an append by a writer that loaded a v0 session before a v3 successor appeared — and none
// changes a byte.
func TestGenerationWritesRefused(t *testing.T) {
	ctx := context.Background()
	snapshot := func(dir string) map[string]string {
		out := map[string]string{}
		entries, _ := os.ReadDir(dir)
		for _, de := range entries {
			b, _ := os.ReadFile(filepath.Join(dir, de.Name()))
			out[de.Name()] = string(b)
		}
		return out
	}
	same := func(t *testing.T, dir string, before map[string]string) {
		t.Helper()
		if after := snapshot(dir); !reflect.DeepEqual(before, after) {
			t.Fatalf("the session directory changed: %d files before, %d after", len(before), len(after))
		}
	}

	t.Run("create an id that exists as v3", func(t *testing.T) {
		b, root := genFixtureStore(t, "v3", "zstd")
		st := eventstore.New(b)
		id := "main-session-fa821f4b-98fd-46aa-86bc-0955a88ef4b8"
		dir := filepath.Join(root, "--home-dev-projects-acme-api--", id)
		before := snapshot(dir)
		cwd := event.String("/home/dev/projects/acme-api")
		h := event.Header{ID: id, CreatedAt: 1, Cwd: &cwd}
		err := st.Create(ctx, h)
		if ce := eventstore.AsCommandError(err); ce.Code != eventstore.CodeAlreadyExists {
			t.Fatalf("create: %v", err)
		}
		_, err = b.Materialize(ctx, h, nil) // the backend refuses it too, whoever asks
		if ce := eventstore.AsCommandError(err); ce.Code != eventstore.CodeAlreadyExists || !strings.Contains(err.Error(), "session.v3.jsonl.zstd") {
			t.Fatalf("materialize: %v", err)
		}
		same(t, dir, before)
	})

	t.Run("writes to a session with v3 beside v0", func(t *testing.T) {
		b, root := genFixtureStore(t, "beside", "raw")
		st := eventstore.New(b)
		id := "main-session-fa821f4b-98fd-46aa-86bc-0955a88ef4b8"
		dir := filepath.Join(root, "--home-dev-projects-acme-api--", id)
		before := snapshot(dir)
		ev := eventtest.Events(t, `{"type":"turn/start","seq":999,"time":1,"data":{"turn":99}}`)
		if err := st.Append(ctx, id, ev); err == nil || !strings.Contains(err.Error(), "generation v3") {
			t.Fatalf("append: %v", err)
		}
		if _, err := b.Lock(ctx, id); err == nil || !strings.Contains(err.Error(), "generation v3") {
			t.Fatalf("lock: %v", err)
		}
		if _, err := st.Writer(ctx, id); err == nil {
			t.Fatal("a writer opened")
		}
		same(t, dir, before)
	})

	t.Run("a v3 successor appears under a v0 writer", func(t *testing.T) {
		root := t.TempDir()
		dir := writeGenFiles(t, root, None, "s", []string{"session.jsonl"}, nil)
		b, _ := Open(root, None)
		p, err := b.LoadStored(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		writeGenFiles(t, root, None, "s", []string{"session.v3.jsonl"}, nil)
		before := snapshot(dir)
		ev := eventtest.Events(t, turn(2, 3)...)
		_, err = b.AppendBatch(ctx, p.Header, p.Artifact, ev, nil)
		if ce := eventstore.AsCommandError(err); ce == nil || ce.Code != eventstore.CodeConflict || !strings.Contains(err.Error(), "generation v3") ||
			!strings.HasSuffix(err.Error(), "nothing was written") {
			t.Fatalf("append: %v", err)
		}
		if _, err := b.CommitRepair(ctx, p.Header, p.Artifact, nil, nil, ev); err == nil || !strings.Contains(err.Error(), "generation v3") {
			t.Fatalf("repair: %v", err)
		}
		same(t, dir, before)
	})

	t.Run("a live writer's session is upgraded under it", func(t *testing.T) {
		root := t.TempDir()
		dir := writeGenFiles(t, root, None, "s", []string{"session.jsonl"}, nil)
		b, _ := Open(root, None)
		st := eventstore.New(b)
		w, err := st.Writer(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		if err := w.AcceptEvents(eventtest.Events(t, turn(2, 3)...)); err != nil {
			t.Fatal(err)
		}
		v0 := readFileT(t, filepath.Join(dir, "session.jsonl"))
		writeGenFiles(t, root, None, "s", []string{"session.v3.jsonl"}, nil)
		err = w.Flush(ctx)
		if ce := eventstore.AsCommandError(err); ce == nil || ce.Code != eventstore.CodeConflict || !strings.Contains(err.Error(), "generation v3") ||
			!strings.Contains(err.Error(), "3 accepted events (seq 3..5) were not written and are kept in ") {
			t.Fatalf("flush: %v", err)
		}
		if got := readFileT(t, filepath.Join(dir, "session.jsonl")); !bytes.Equal(got, v0) {
			t.Fatal("the v0 log was written after its v3 successor appeared")
		}
		if err := w.AcceptEvents(eventtest.Events(t, turn(3, 6)...)); err == nil {
			t.Fatal("the writer takes more events after its session was upgraded")
		}
		w.Close(ctx)
	})
}

func readFileT(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
