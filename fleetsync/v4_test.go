package fleetsync_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/convert"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/eventstore/postgres"
	"github.com/dshfs/dshfs/fleetsync"
	"github.com/dshfs/dshfs/internal/fixtures"
	"github.com/dshfs/dshfs/internal/harness"
	"github.com/dshfs/dshfs/internal/synth"
)

// plaintext is a v4 artifact's text: the file (raw) or its frames decoded (zstd).
func plaintext(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(path, ".zstd") {
		return b
	}
	frames, _, err := jsonl.ScanFrames(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, f := range frames {
		text, err := jsonl.RawText(b[f.Start:f.End])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, text...)
	}
	return out
}

// harnessReads checks that the harness's v4 code restores what the fleet store renders of session id (its
// raw text, written out as a session.v4.jsonl) to exactly the header and events the fleet store serves.
func harnessReads(t *testing.T, dst *postgres.Backend, id string) {
	t.Helper()
	raw, err := dst.ReadRaw(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	r, err := harness.GetFormatsV4(t).DecodeText(t, raw)
	if err != nil {
		t.Fatal(err)
	}
	if r.Refusal != "" {
		t.Fatalf("%s: the harness's v4 code refuses what the fleet store renders: %s", id, r.Refusal)
	}
	p, _ := loadFleet(t, dst, id)
	var got []byte
	for _, e := range p.Events {
		got = append(append(got, e.Raw...), '\n')
	}
	if !bytes.Equal(got, r.Events) || !bytes.Equal(p.Header.Meta(), r.Header) {
		t.Fatalf("%s: the fleet store serves other events than the harness restores from what it renders", id)
	}
}

// TestSyncV4Fixtures syncs the harness's v4 stores, raw and zstd: every session is carried as v4 and reads
// back from the fleet store exactly as the JSONL store reads it (header, events), its raw text the v4
// file's plaintext byte for byte, which the harness's v4 code restores to the events the fleet store
// serves; a second run copies nothing, and the sessions the v4 reader refuses are skipped with its text.
func TestSyncV4Fixtures(t *testing.T) {
	ctx := context.Background()
	for _, root := range []string{"raw-root", "zstd-root"} {
		t.Run(root, func(t *testing.T) {
			dir := fixtures.CopyTree(t, fixtures.Path(t, "generations", "v4", root))
			before := tree(t, dir)
			dst, dsn := fleet(t, "h")
			src := source(t, dir)
			s := fleetsync.New(src, dst, fleetsync.Options{Host: "h", MaxLines: 7})
			reports := pass(t, s)
			if len(reports) != 11 {
				t.Fatalf("%d sessions synced, want the 11 of the fixture", len(reports))
			}
			for _, r := range reports {
				if r.Status != fleetsync.Copied || r.From != 0 || r.To != r.Events || r.Events == 0 {
					t.Errorf("%s: %+v, want copied", r.ID, r)
				}
			}
			if equal(t, src, dst, dsn, true) == 0 {
				t.Fatal("no events compared")
			}
			l, err := dst.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range l.Entries {
				if e.Generation != 4 || e.Refusal != nil {
					t.Errorf("%s: listed as generation %d, refusal %v", e.ID, e.Generation, e.Refusal)
				}
				raw, err := dst.ReadRaw(ctx, e.ID)
				if err != nil {
					t.Fatal(err)
				}
				if want := plaintext(t, artifact(t, src, e.ID)); !bytes.Equal(raw, want) {
					t.Errorf("%s: the fleet store's raw text is not the v4 file's", e.ID)
				}
				harnessReads(t, dst, e.ID)
			}
			handedOver(t, dst, src, mode(root))
			if st := statuses(pass(t, s)); st[fleetsync.Unchanged] != len(reports) {
				t.Errorf("second run: %v, want %d unchanged", st, len(reports))
			}
			if st := statuses(pass(t, fleetsync.New(source(t, dir), dst, fleetsync.Options{Host: "h"}))); st[fleetsync.Unchanged] != len(reports) {
				t.Errorf("rerun: %v, want %d unchanged", st, len(reports))
			}
			sameTree(t, before, tree(t, dir))
		})
	}
	t.Run("refuse-root", func(t *testing.T) {
		dir := fixtures.CopyTree(t, fixtures.Path(t, "generations", "v4", "refuse-root"))
		dst, dsn := fleet(t, "h")
		reports := pass(t, fleetsync.New(source(t, dir), dst, fleetsync.Options{Host: "h"}))
		if len(reports) == 0 {
			t.Fatal("no session reported")
		}
		for _, r := range reports {
			want, err := os.ReadFile(fixtures.Path(t, "generations", "v4", "expected", "refuse-root", r.ID+".error.txt"))
			if err != nil {
				t.Fatal(err)
			}
			msg := strings.TrimSpace(string(want))
			if i := strings.Index(msg, ": "); i > 0 && !strings.Contains(msg[:i], " ") {
				msg = msg[i+2:] // the harness's error class
			}
			if r.Status != fleetsync.Skipped || !strings.Contains(r.Reason, msg) {
				t.Errorf("%s: %+v, want skipped with %q", r.ID, r, msg)
			}
		}
		if ids := fleetIDs(t, dsn); len(ids) != 0 {
			t.Errorf("the fleet store holds %v", ids)
		}
	})
}

func mode(root string) jsonl.Compression {
	if root == "raw-root" {
		return jsonl.None
	}
	return jsonl.Zstd
}

// handedOver converts every session of the fleet store into a new JSONL root (what `dshfs backup` and a
// handover with `dshfs convert` do), verified: each v4 session is written as a v4 file whose plaintext is
// the host's v4 file's, byte for byte, and which the harness's v4 code restores to the events the fleet
// store serves.
func handedOver(t *testing.T, dst *postgres.Backend, host *eventstore.Store, m jsonl.Compression) {
	t.Helper()
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "handover")
	out, err := jsonl.Open(root, m)
	if err != nil {
		t.Fatal(err)
	}
	reports, err := convert.Run(ctx, eventstore.New(dst), out, convert.Options{Verify: true,
		Reopen: func() (eventstore.Backend, error) { return jsonl.Open(root, m) }})
	if err != nil {
		t.Fatal(err)
	}
	copied := eventstore.New(out)
	for _, r := range reports {
		if r.Outcome != convert.Converted {
			t.Errorf("%s: handed over %s (%s)", r.ID, r.Outcome, r.Reason)
			continue
		}
		file := artifact(t, copied, r.ID)
		if !strings.Contains(filepath.Base(file), ".v4.") {
			t.Errorf("%s: handed over as %s", r.ID, file)
			continue
		}
		if got, want := plaintext(t, file), plaintext(t, artifact(t, host, r.ID)); !bytes.Equal(got, want) {
			t.Errorf("%s: the handed-over v4 file is not the host's", r.ID)
		}
		r4, err := harness.GetFormatsV4(t).Decode(file)
		if err != nil || r4.Refusal != "" {
			t.Fatalf("%s: the harness's v4 code on the handed-over file: %v %s", r.ID, err, r4.Refusal)
		}
		p, _ := loadFleet(t, dst, r.ID)
		var evs []byte
		for _, e := range p.Events {
			evs = append(append(evs, e.Raw...), '\n')
		}
		if !bytes.Equal(evs, r4.Events) {
			t.Errorf("%s: the harness restores other events from the handed-over file than the fleet store serves", r.ID)
		}
	}
}

// TestSyncV4Appended: what the harness appends to a v4 session is copied on the next run, past what the
// fleet store holds; a copy of the root grown otherwise, synced under the same host name, is refused
// naming the first differing seq, with nothing written, and recorded as diverged.
func TestSyncV4Appended(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []jsonl.Compression{jsonl.None, jsonl.Zstd} {
		t.Run(string(mode), func(t *testing.T) {
			dir := t.TempDir()
			a, c := filepath.Join(dir, "a"), filepath.Join(dir, "c")
			if err := synth.WriteV4(a, mode, "s", 30); err != nil {
				t.Fatal(err)
			}
			dst, dsn := fleet(t, "h")
			s := fleetsync.New(source(t, a), dst, fleetsync.Options{Host: "h"})
			first := pass(t, s)[0]
			if first.Status != fleetsync.Copied {
				t.Fatalf("first sync: %+v", first)
			}
			copyRoot(t, a, c)
			note(t, a, mode, "s", "copy A")
			r := pass(t, s)[0]
			if r.Status != fleetsync.Copied || r.From != first.To || r.To != first.To+1 || r.Lines != 1 {
				t.Fatalf("after an append: %+v, want the one new row copied from seq %d", r, first.To)
			}
			equal(t, source(t, a), dst, dsn, true)
			harnessReads(t, dst, "s")

			note(t, c, mode, "s", "copy C")
			was, _ := dst.Held(ctx, "s")
			rc := pass(t, fleetsync.New(source(t, c), dst, fleetsync.Options{Host: "h"}))[0]
			if rc.Status != fleetsync.Refused || !strings.Contains(rc.Reason, "differs from the fleet store's copy at seq "+itoa(int(first.To))) {
				t.Fatalf("the other copy: %+v, want refused at seq %d", rc, first.To)
			}
			unchangedFleet(t, dst, "s", was)
			if cu, err := dst.Custody(ctx, "s"); err != nil || cu.State != postgres.Diverged {
				t.Fatalf("custody %+v %v, want diverged", cu, err)
			}
		})
	}
}

// upgradeRoot is the harness's v0 store with, beside each session.jsonl, the v4 file the harness's
// migration made of it (the v4 fixtures are the v0 fixtures upgraded).
func upgradeRoot(t *testing.T, dir string, mode jsonl.Compression) {
	t.Helper()
	v4 := "raw-root"
	if mode == jsonl.Zstd {
		v4 = "zstd-root"
	}
	name := jsonl.GenerationFile{Gen: 4, Compression: mode}.Name()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasPrefix(d.Name(), "session.jsonl") {
			return err
		}
		rel, _ := filepath.Rel(dir, filepath.Dir(p))
		b, err := os.ReadFile(fixtures.Path(t, "generations", "v4", v4, rel, name))
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(filepath.Dir(p), name), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSyncV4Upgrade: sessions synced as v0 whose harness then upgraded them (the v4 file published beside
// the v0 log) are carried as their new generation: the fleet store then serves the v4 log exactly as the
// JSONL store does, and keeps the v0 log it held, byte for byte, as a superseded row. A v0 copy holding
// events the v4 log lacks (written after the harness's upgrade read it: here the closers and note a resume
// appended) stays, marked stale with the first such event named, and is refused.
func TestSyncV4Upgrade(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		mode jsonl.Compression
		path string
	}{{jsonl.None, "generated/raw"}, {jsonl.Zstd, "generated/zstd"}} {
		t.Run(string(tc.mode), func(t *testing.T) {
			dir := fixtures.CopyTree(t, fixtures.Path(t, tc.path))
			dst, _ := fleet(t, "h")
			s := fleetsync.New(source(t, dir), dst, fleetsync.Options{Host: "h"})
			v0 := map[string][]byte{}
			for _, r := range pass(t, s) {
				if r.Status != fleetsync.Copied {
					t.Fatalf("%s: v0 sync %+v", r.ID, r)
				}
				raw, err := dst.ReadRaw(ctx, r.ID)
				if err != nil {
					t.Fatal(err)
				}
				v0[r.ID] = raw
			}
			const grown = "main-session-30628611-e45f-4f98-9688-010e1428e585"
			note(t, dir, tc.mode, grown, "after the upgrade's source was taken")
			if r := pass(t, s); statuses(r)[fleetsync.Copied] != 1 {
				t.Fatalf("syncing the grown v0 log: %+v", r)
			}
			upgradeRoot(t, dir, tc.mode)
			src := source(t, dir)
			for _, r := range pass(t, s) {
				if r.ID == grown {
					if r.Status != fleetsync.Skipped || !strings.Contains(r.Reason, "not carried") || !strings.Contains(r.Reason, "is not in the v4 log") {
						t.Errorf("%s: %+v, want skipped, stale, naming the event", r.ID, r)
					}
					continue
				}
				if r.Status != fleetsync.Copied || !strings.Contains(r.Reason, "carried as format generation v4") {
					t.Errorf("%s: %+v, want carried as v4", r.ID, r)
					continue
				}
				want, err := src.Backend().LoadStored(ctx, r.ID)
				if err != nil {
					t.Fatal(err)
				}
				got, _ := loadFleet(t, dst, r.ID)
				if got.Generation != 4 || !bytes.Equal(got.Header.Meta(), want.Header.Meta()) || len(got.Events) != len(want.Events) {
					t.Errorf("%s: the fleet store serves generation %d, %d events, want the v4 log's %d", r.ID, got.Generation, len(got.Events), len(want.Events))
					continue
				}
				for i := range want.Events {
					if !bytes.Equal(got.Events[i].Raw, want.Events[i].Raw) {
						t.Errorf("%s: event %d differs", r.ID, i)
						break
					}
				}
				kept, err := dst.KeptOf(ctx, r.ID)
				if err != nil || len(kept) != 1 || kept[0].Kind != "superseded" || !bytes.Equal(kept[0].Body, v0[r.ID]) {
					t.Errorf("%s: kept %+v %v, want the v0 log as superseded", r.ID, kept, err)
				}
				harnessReads(t, dst, r.ID)
			}
			if _, err := dst.LoadStored(ctx, grown); err == nil || !strings.Contains(err.Error(), "stale") {
				t.Errorf("the stale session loads: %v", err)
			}
			// carried once: the next run finds the v4 copies unchanged
			for _, r := range pass(t, fleetsync.New(source(t, dir), dst, fleetsync.Options{Host: "h"})) {
				if r.ID != grown && r.Status != fleetsync.Unchanged {
					t.Errorf("%s after the upgrade: %+v, want unchanged", r.ID, r)
				}
			}
		})
	}
}
