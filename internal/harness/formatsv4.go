package harness

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dshfs/dshfs/internal/fixtures"
)

// FormatsV4 is the installed v4 kit (../shared/interop/formats-v4): the harness's v4 code over its
// published v0–v3 packages, with decode-v4.mjs, the reference answer for what a v4 build restores from a
// session log of any generation.
type FormatsV4 struct {
	Node  string
	Cache string
}

var (
	formatsV4Once sync.Once
	formatsV4     *FormatsV4
	formatsV4Err  error
)

// GetFormatsV4 installs (once per process, idempotently across runs, one installer at a time) and returns
// the v4 kit, failing the test when that is impossible.
func GetFormatsV4(t testing.TB) *FormatsV4 {
	t.Helper()
	kit := filepath.Join(fixtures.Shared(t), "interop", "formats-v4")
	formatsV4Once.Do(func() {
		formatsV4, formatsV4Err = installFormatsV4(kit, filepath.Join(CacheDir(), "formats-v4"))
	})
	if formatsV4Err != nil {
		t.Fatal(formatsV4Err)
	}
	return formatsV4
}

func installFormatsV4(kit, cache string) (*FormatsV4, error) {
	node, unlock, err := setupKit(kit, cache, "v4 format kit")
	if err != nil {
		return nil, err
	}
	unlock()
	return &FormatsV4{Node: node, Cache: cache}, nil
}

// RestoredV4 is decode-v4.mjs's answer for one log: the v4 header line and one line per event, or the
// refusal `<ErrorClass>: <message>`.
type RestoredV4 struct {
	Header []byte
	Events []byte // one event per line, each LF-terminated
	// Warnings is what the kit said on stderr (its summary line, a torn frame it ignored).
	Warnings string
	Refusal  string
}

// Decode runs decode-v4.mjs on the log at path.
func (f *FormatsV4) Decode(path string) (RestoredV4, error) {
	cmd := exec.Command(f.Node, filepath.Join(f.Cache, "decode-v4.mjs"), path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case err == nil:
		nl := bytes.IndexByte(out, '\n')
		if nl < 0 {
			return RestoredV4{}, fmt.Errorf("decode-v4.mjs %s: no header line in %q", path, out)
		}
		return RestoredV4{Header: out[:nl], Events: out[nl+1:], Warnings: stderr.String()}, nil
	case errors.As(err, &exit) && exit.ExitCode() == 3:
		return RestoredV4{Refusal: string(bytes.TrimPrefix(bytes.TrimSpace(out), []byte("ERROR: ")))}, nil
	}
	return RestoredV4{}, fmt.Errorf("decode-v4.mjs %s: %v\n%s", path, err, stderr.String())
}

// DecodeText runs decode-v4.mjs on raw, the text of a raw (uncompressed) v4 log, written out as a
// session.v4.jsonl in a directory of t's: what a store that renders a log's text (the fleet store's
// ReadRaw) hands the harness to read.
func (f *FormatsV4) DecodeText(t testing.TB, raw []byte) (RestoredV4, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "session.v4.jsonl")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		return RestoredV4{}, err
	}
	return f.Decode(file)
}
