package event

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestHeaderMetaGolden: for every golden header.json, the session file's first line through
// ParseHeaderLine → Meta() must reproduce the harness's inspect().meta byte for byte.
func TestHeaderMetaGolden(t *testing.T) {
	fx := fixturesDir(t)
	files := map[string]map[string]string{
		"upstream":      sessionFiles(t, filepath.Join(fx, "upstream/raw")),
		"generated-raw": sessionFiles(t, filepath.Join(fx, "generated/raw")),
	}
	// The zstd sessions are the same sessions (their golden headers are identical): check them
	// against the raw copies, which this package can read without a decompressor.
	files["generated-zstd"] = files["generated-raw"]
	colliders, err := os.ReadDir(filepath.Join(fx, "upstream/colliders"))
	if err != nil {
		t.Fatal(err)
	}
	files["colliders"] = map[string]string{}
	for _, c := range colliders {
		for _, p := range sessionFiles(t, filepath.Join(fx, "upstream/colliders", c.Name())) {
			files["colliders"][c.Name()] = p
		}
	}
	goldens, err := filepath.Glob(filepath.Join(fx, "golden/*/*/header.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(goldens) < 100 {
		t.Fatalf("only %d golden headers", len(goldens))
	}
	for _, g := range goldens {
		set := filepath.Base(filepath.Dir(filepath.Dir(g)))
		name := filepath.Base(filepath.Dir(g))
		if set == "generated-sqlite-native" {
			continue // headers from database rows, not header lines: eventstore/sqlite checks them
		}
		path, ok := files[set][name]
		if !ok {
			t.Errorf("%s/%s: no session file found", set, name)
			continue
		}
		want, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rec := data[:bytes.IndexByte(data, '\n')+1]
		h, err := ParseHeaderLine(rec)
		if err != nil {
			t.Errorf("%s/%s: %v", set, name, err)
			continue
		}
		if got := append(h.Meta(), '\n'); !bytes.Equal(got, want) {
			t.Errorf("%s/%s: Meta()\n got: %s\nwant: %s", set, name, got, want)
		}
		if got := h.Line(); !bytes.Equal(got, rec[:len(rec)-1]) {
			t.Errorf("%s/%s: Line()\n got: %s\nwant: %s", set, name, got, rec[:len(rec)-1])
		}
		lh, ok, err := ParseHeaderMeta(rec[:len(rec)-1])
		if !ok || err != nil || !bytes.Equal(lh.Meta(), h.Meta()) {
			t.Errorf("%s/%s: ParseHeaderMeta = %v, %v", set, name, ok, err)
		}
	}
}

// TestRefusedRootHeaders: headers without delegationDepth fail the shape guard.
func TestRefusedRootHeaders(t *testing.T) {
	files := sessionFiles(t, filepath.Join(fixturesDir(t), "upstream/refused-root"))
	for name, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rec := data[:bytes.IndexByte(data, '\n')+1]
		if _, err := ParseHeaderLine(rec); err != ErrNotHeader {
			t.Errorf("%s: err = %v, want ErrNotHeader", name, err)
		}
		if _, ok, err := ParseHeaderMeta(rec[:len(rec)-1]); ok || err != nil {
			t.Errorf("%s: listing parser accepted it (%v, %v)", name, ok, err)
		}
	}
}

func TestParseHeaderLineOrderOfChecks(t *testing.T) {
	const base = `"type":"session","id":"s","createdAt":1,"delegationDepth":0`
	cases := []struct {
		name, rec string
		want      error
		text      string // exact Error() when set
	}{
		{"empty", "", ErrHeaderless, ""},
		{"no LF", `{"type":"session"}`, ErrHeaderless, ""},
		{"two lines", "{}\n{}\n", ErrHeaderless, ""},
		{"bad JSON", "{\n", ErrHeaderNotJSON, ""},
		{"BOM", "\ufeff{" + base + `,"version":0}` + "\n", ErrHeaderNotJSON, ""},
		{"scalar", "42\n", ErrNotHeader, ""},
		{"newer, foreign shape", `{"version":3,"id":"x"}` + "\n", nil,
			`session "x" uses log format v3, but this harness reads only v0: the log was written by a newer harness — upgrade the harness to open it`},
		{"older", `{"version":-1,"id":"x","sandboxMode":1}` + "\n", nil,
			`session "x" uses log format v-1, older than the supported v0, and this build ships no upgrade path for it`},
		{"numeric id", `{"version":1.5,"id":7}` + "\n", nil,
			`session "7" uses log format v1.5, but this harness reads only v0: the log was written by a newer harness — upgrade the harness to open it`},
		{"absent id", `{"version":1e21}` + "\n", nil,
			`session "undefined" uses log format v1e+21, but this harness reads only v0: the log was written by a newer harness — upgrade the harness to open it`},
		{"string version", `{"version":"1",` + base + "}\n", ErrNotHeader, ""},
		{"no delegationDepth", `{"type":"session","version":0,"id":"s","createdAt":1}` + "\n", ErrNotHeader, ""},
		{"negative zero createdAt", `{"type":"session","version":0,"id":"s","createdAt":-0,"delegationDepth":0}` + "\n", ErrNotHeader, ""},
		{"fractional depth", `{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0.5}` + "\n", ErrNotHeader, ""},
		{"unsafe createdAt", `{"type":"session","version":0,"id":"s","createdAt":9007199254740992,"delegationDepth":0}` + "\n", ErrNotHeader, ""},
		{"bad origin", `{"version":0,` + base + `,"origin":"user"}` + "\n", ErrNotHeader, ""},
		{"null agentPreset", `{"version":0,` + base + `,"agentPreset":null}` + "\n", ErrNotHeader, ""},
		{"wrong type", `{"type":"Session","version":0,"id":"s","createdAt":1,"delegationDepth":0}` + "\n", ErrNotHeader, ""},
		{"retired sandboxMode", `{"version":0,` + base + `,"sandboxMode":null}` + "\n", ErrRetiredBaseline, ""},
		{"retired approvalPolicy", `{"version":0,` + base + `,"approvalPolicy":"x"}` + "\n", ErrRetiredBaseline, ""},
		{"shape before retired", `{"version":0,"sandboxMode":1}` + "\n", ErrNotHeader, ""},
	}
	for _, c := range cases {
		_, err := ParseHeaderLine([]byte(c.rec))
		if c.text != "" {
			var uv *UnsupportedVersionError
			if !errors.As(err, &uv) || err.Error() != c.text {
				t.Errorf("%s: err = %v, want refusal %q", c.name, err, c.text)
			}
			continue
		}
		if err != c.want {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	if ErrHeaderless.Error() != "empty or header-less session log" ||
		ErrHeaderNotJSON.Error() != "corrupt session log: header line is not valid JSON" ||
		ErrNotHeader.Error() != "corrupt session log: first line is not a session header" ||
		ErrRetiredBaseline.Error() != "session header uses retired policy baseline fields" {
		t.Error("sentinel texts changed")
	}
}

func TestHeaderKeepsOptionalFieldsAsParsed(t *testing.T) {
	rec := `{"agentPreset":"p","pad":"x","delegationDepth":2.0,"seedLength":"36","cwd":5,"type":"session","version":-0,"id":"\ud800","createdAt":1e3,"parentSession":null,"origin":"subagent"}` + "\n"
	h, err := ParseHeaderLine([]byte(rec))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(h.Meta()), `{"version":0,"id":"\ud800","createdAt":1000,"cwd":5,"parentSession":null,"seedLength":"36","origin":"subagent","delegationDepth":2,"agentPreset":"p"}`; got != want {
		t.Errorf("Meta()\n got %s\nwant %s", got, want)
	}
	if got, want := string(h.Line()), `{"type":"session","version":0,"id":"\ud800","createdAt":1000,"cwd":5,"parentSession":null,"seedLength":"36","origin":"subagent","delegationDepth":2,"agentPreset":"p"}`; got != want {
		t.Errorf("Line()\n got %s\nwant %s", got, want)
	}
}

func TestParseHeaderMetaIsLenient(t *testing.T) {
	cases := []struct {
		line    string
		ok      bool
		wantErr error
	}{
		{`{"type":"session","version":7,"id":"s","createdAt":1,"delegationDepth":0}`, true, nil},
		{`not json`, false, nil},
		{`{"type":"session","version":0,"id":"s","createdAt":1}`, false, nil},
		{`{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0,"approvalPolicy":1}`, false, ErrRetiredBaseline},
	}
	for _, c := range cases {
		_, ok, err := ParseHeaderMeta([]byte(c.line))
		if ok != c.ok || err != c.wantErr {
			t.Errorf("ParseHeaderMeta(%s) = %v, %v; want %v, %v", c.line, ok, err, c.ok, c.wantErr)
		}
	}
}
