package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/harness"
)

// TestWriteByteCompatible: for the same events and batch boundaries, the artifact dshfs writes through the
// mount equals the one the harness's own Session.append + flush writes — raw byte for byte, zstd frame for
// frame after decompression — apart from the header's createdAt (the moment each was created).
func TestWriteByteCompatible(t *testing.T) {
	t.Parallel()
	h := harness.Get(t)
	// half a turn a batch: each turn's run of chunks lies inside a batch, where both writers pack it
	const every = 7
	var lines []string
	base := int64(0)
	for turn := 1; turn <= 4; turn++ {
		tl := turnLines(turn, base, turn == 4)
		lines = append(lines, tl...)
		base += int64(len(tl))
	}
	for _, mode := range []string{"raw", "zstd"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			in := filepath.Join(dir, "in.jsonl")
			if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			// the harness writes first; dshfs then appends the very events it stored (same seqs and times)
			hroot := filepath.Join(dir, "harness")
			h.AppendRate(t, in, hroot, mode, every)
			hl := listStore(t, hroot)
			if len(hl) != 1 {
				t.Fatalf("harness store: %+v", hl)
			}
			id := hl[0].ID
			stored := textLines(cli(t, 0, "cat", hroot, id))
			if len(stored) != len(lines) {
				t.Fatalf("the harness stored %d events of %d", len(stored), len(lines))
			}

			compression := "none"
			if mode == "zstd" {
				compression = "zstd"
			}
			droot := filepath.Join(dir, "dshfs")
			if err := os.Mkdir(droot, 0o700); err != nil {
				t.Fatal(err)
			}
			cfg := writeConfig(t, "[writer]\ncompression = %q\nbatch_window = \"1h\"\n", compression)
			m := startMount(t, "--config", cfg, droot)
			mustCtl(t, filepath.Join(m.dir, "ctl"), "create "+id+" cwd=/srv/append-rate")
			s := filepath.Join(m.dir, "sessions", id)
			for i := 0; i < len(stored); i += every {
				mustAppend(t, s, stored[i:min(i+every, len(stored))])
				mustCtl(t, filepath.Join(s, "ctl"), "flush")
			}
			m.stop(t)

			hrec, drec := records(t, artifactOf(t, hroot, id), mode), records(t, artifactOf(t, droot, id), mode)
			createdAt := regexp.MustCompile(`"createdAt":[0-9]+`)
			hrec[0] = createdAt.ReplaceAllString(hrec[0], `"createdAt":T`)
			drec[0] = createdAt.ReplaceAllString(drec[0], `"createdAt":T`)
			if len(hrec) != len(drec) {
				t.Fatalf("the harness wrote %d %s, dshfs %d", len(hrec), unit(mode), len(drec))
			}
			for i := range hrec {
				if hrec[i] != drec[i] {
					t.Fatalf("%s %d differs:\nharness: %.400s\n  dshfs: %.400s", unit(mode), i, hrec[i], drec[i])
				}
			}
			packed := strings.Count(strings.Join(drec, ""), `"type":"text-chunks"`)
			if packed == 0 {
				t.Errorf("no packed chunk row was written: the comparison did not cover packing")
			}
			t.Logf("%s: %d %s identical (%d packed rows)", mode, len(hrec), unit(mode), packed)
		})
	}
}

func unit(mode string) string {
	if mode == "zstd" {
		return "decoded frames"
	}
	return "byte ranges"
}

// records splits an artifact into what must be equal: raw — the header line and then the rest as one
// string (byte for byte); zstd — each frame decoded.
func records(t *testing.T, path, mode string) []string {
	t.Helper()
	buf := readFile(t, path)
	if mode == "raw" {
		nl := strings.IndexByte(string(buf), '\n')
		return []string{string(buf[:nl+1]), string(buf[nl+1:])}
	}
	frames, torn, err := jsonl.ScanFrames(buf, 0)
	if err != nil || torn >= 0 {
		t.Fatalf("%s: %v (torn at %d)", path, err, torn)
	}
	var out []string
	for _, f := range frames {
		plain, err := jsonl.RawText(buf[f.Start:f.End])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(plain))
	}
	return out
}
