package jsonl

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/internal/fixtures"
)

// v4Expected is the harness's v4 restore of a fixture session: its events, one line each.
func v4Expected(t *testing.T, root, id string) []byte {
	t.Helper()
	b, err := os.ReadFile(fixtures.Path(t, "generations", "v4", "expected", root, id+".events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func eventLines(p *eventstore.Prefix) []byte {
	var out []byte
	for _, e := range p.Events {
		out = append(append(out, e.Raw...), '\n')
	}
	return out
}

// TestV4Fixtures: the harness's v4 stores, raw and zstd, list every session from its v4 file and load the
// events its v4 restore yields; the refusals are listed with the harness's texts.
func TestV4Fixtures(t *testing.T) {
	ctx := context.Background()
	for _, root := range []string{"raw-root", "zstd-root"} {
		t.Run(root, func(t *testing.T) {
			mode := Zstd
			if root == "raw-root" {
				mode = None
			}
			b, err := Open(fixtures.CopyTree(t, fixtures.Path(t, "generations", "v4", root)), mode)
			if err != nil {
				t.Fatal(err)
			}
			l, err := b.List(ctx)
			if err != nil || len(l.RootErrors) != 0 || len(l.Entries) < 10 {
				t.Fatalf("list: %v, %+v, %d entries", err, l.RootErrors, len(l.Entries))
			}
			for _, e := range l.Entries {
				if e.Refusal != nil || !strings.HasSuffix(e.Path, "session.v4"+mode.Suffix()) {
					t.Fatalf("%s: %s listed with %v", e.ID, e.Path, e.Refusal)
				}
				p, err := b.LoadStored(ctx, e.ID)
				if err != nil {
					t.Fatalf("%s: load %v", e.ID, err)
				}
				if p.Generation != 4 || p.Torn != nil {
					t.Fatalf("%s: generation %d, torn %+v", e.ID, p.Generation, p.Torn)
				}
				if got, want := eventLines(p), v4Expected(t, root, e.ID); !bytes.Equal(got, want) {
					t.Fatalf("%s: events differ from the harness's v4 restore", e.ID)
				}
			}
		})
	}
	t.Run("refuse-root", func(t *testing.T) {
		b, err := Open(fixtures.CopyTree(t, fixtures.Path(t, "generations", "v4", "refuse-root")), Zstd)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"sess-refuse-v4-extra-field", "sess-refuse-v4-plugin-source", "sess-refuse-v4-wrapper-result", "sess-refuse-v5"} {
			want, err := os.ReadFile(fixtures.Path(t, "generations", "v4", "expected", "refuse-root", id+".error.txt"))
			if err != nil {
				t.Fatal(err)
			}
			_, text, _ := strings.Cut(strings.TrimSpace(string(want)), ": ")
			_, err = b.LoadStored(ctx, id)
			if err == nil || !strings.Contains(err.Error(), text) {
				t.Errorf("%s: %v, want the harness's %q", id, err, text)
			}
			if id == "sess-refuse-v5" && eventstore.Classify(err) != eventstore.KindUnsupported {
				t.Errorf("%s: class %v", id, eventstore.Classify(err))
			}
		}
	})
}

// TestV4TornFrame: the complete lines inside a torn final frame of a v4 log are events, as the v4 backend's
// prefix decoder recovers them; the frame's bytes stay the torn tail.
func TestV4TornFrame(t *testing.T) {
	const id = "main-session-fa821f4b-98fd-46aa-86bc-0955a88ef4b8"
	src, err := os.ReadFile(filepath.Join(fixtures.Path(t, "generations", "v4", "raw-root", "--home-dev-projects-acme-api--", id), "session.v4.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(src, []byte("\n"))
	lines = lines[:len(lines)-1] // the empty string after the last LF
	header, events := lines[0], lines[1:]
	k := len(events) - 5
	// the last frame: five events, then a line long enough that the frame needs more than one block
	last := bytes.Join(events[k:], nil)
	last = append(last, `{"type":"user/message","seq":26,"time":1,"data":{"content":[{"type":"text","text":"`...)
	last = append(last, bytes.Repeat([]byte("x"), 300<<10)...)
	last = append(last, `"}],"source":{"kind":"user"},"role":"user","id":"u"},"surfaceOp":"append"}`+"\n"...)
	var art []byte
	art = EncodeFrame(art, header)
	art = EncodeFrame(art, bytes.Join(events[:k], nil))
	start := len(art)
	art = EncodeFrame(art, last)
	// cut the last frame right after its first block
	h, err := parseFrameHeader(art[start:], 0)
	if err != nil {
		t.Fatal(err)
	}
	blk, err := readBlock(art[start:], h.size, 0)
	if err != nil || blk.last {
		t.Fatalf("first block: %+v %v", blk, err)
	}
	art = art[:start+blk.end()+2]

	root := t.TempDir()
	dir := filepath.Join(root, "--home-dev-projects-acme-api--", id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "session.v4.jsonl.zstd"), art, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := Open(root, Zstd)
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.LoadStored(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := eventLines(p), v4Expected(t, "raw-root", id); !bytes.Equal(got, want) {
		t.Fatalf("recovered %d events, want the %d of the intact log", len(p.Events), len(events))
	}
	if p.Torn == nil || p.Torn.TruncateTo != int64(start) || p.Torn.Bytes != int64(len(art)-start) || p.Torn.Recovered != 5 {
		t.Fatalf("torn %+v, want the last frame from %d, 5 events recovered", p.Torn, start)
	}

	// resume cuts the torn frame to a sidecar and writes the recovered events again, as the harness does
	if _, err := eventstore.New(b).Resume(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	p, err = b.LoadStored(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	want := append(v4Expected(t, "raw-root", id), p.Events[len(p.Events)-1].Raw...)
	if got := eventLines(p); p.Torn != nil || !bytes.Equal(got, append(want, '\n')) {
		t.Fatalf("after resume: %d events, torn %+v", len(p.Events), p.Torn)
	}
	if last := p.Events[len(p.Events)-1]; last.Type != "session/end-seed" {
		t.Fatalf("last event %s", last.Raw)
	}
	if side, _ := filepath.Glob(filepath.Join(dir, "session.v4.jsonl.zstd.torn-*")); len(side) != 1 {
		t.Fatalf("torn sidecars %v", side)
	}
}
