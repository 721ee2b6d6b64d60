package backup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestManifestRoundTrip(t *testing.T) {
	m := &Manifest{DshfsVersion: "v", HarnessRelease: "r", Backend: "jsonl", CreatedAt: time.Unix(1, 0).UTC(), Source: "/s",
		Sessions: []SessionEntry{
			{ID: "a", Path: "p/a/session.jsonl", Bytes: 10, SHA256: strings.Repeat("0", 64), Events: 3, DurableSeq: 2,
				Spill: []Locator{{Seq: 1, CallID: "c", Locator: "/x", Status: "missing", Bytes: -1}}},
			{ID: "b", Path: "p/b/session.jsonl", Bytes: 1, SHA256: strings.Repeat("1", 64), DurableSeq: -1, Refusal: "refused"},
		}}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), m.JSON(), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.JSON()) != string(m.JSON()) {
		t.Fatalf("round trip:\n got %s\nwant %s", got.JSON(), m.JSON())
	}
	if !strings.Contains(string(m.JSON()), `"durableSeq":null,"refusal":"refused"`) ||
		!strings.Contains(string(m.JSON()), `"bytes":null,"shadowed":false,"file":null`) {
		t.Errorf("nulls: %s", m.JSON())
	}
}

func TestEmptyDir(t *testing.T) {
	dir := t.TempDir()
	if err := emptyDir(filepath.Join(dir, "new", "deeper")); err != nil {
		t.Errorf("a new directory: %v", err)
	}
	if err := emptyDir(dir); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("a non-empty directory: %v", err)
	}
	if got := UnescapeMount(`/mnt/a\040b\011c`); got != "/mnt/a b\tc" {
		t.Errorf("UnescapeMount: %q", got)
	}
}
