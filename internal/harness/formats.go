package harness

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dshfs/dshfs/internal/fixtures"
)

//go:embed formats-types.mjs
var formatsTypesScript []byte

// Formats is the installed format kit (../shared/interop/formats): the harness's published codecs and
// released validation of session formats v2 and v3, with the kit's decode.mjs, the reference answer
// for what the harness restores from a v2/v3 artifact.
type Formats struct {
	Node  string // the Node 22 binary
	Cache string // where the kit is installed; its scripts live here so ESM finds the packages
}

var (
	formatsOnce sync.Once
	formats     *Formats
	formatsErr  error
)

// FormatsDir is where the format kit is installed: formats/ under CacheDir, so one run's install is the
// next run's and $DSHFS_INTEROP_CACHE moves both kits together.
func FormatsDir() string { return filepath.Join(CacheDir(), "formats") }

// GetFormats installs (once per process, idempotently across runs, one installer at a time) and returns
// the format kit, failing the test when that is impossible.
func GetFormats(t testing.TB) *Formats {
	t.Helper()
	kit := filepath.Join(fixtures.Shared(t), "interop", "formats")
	formatsOnce.Do(func() {
		formats, formatsErr = installFormats(kit, FormatsDir())
	})
	if formatsErr != nil {
		t.Fatal(formatsErr)
	}
	return formats
}

// setupKit runs a kit's setup.sh into cache, holding the cache's lock until unlock is called (one installer
// at a time), and returns the path of the Node 22 binary it installed.
func setupKit(kit, cache, what string) (node string, unlock func(), err error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", nil, err
	}
	if unlock, err = lockDir(cache); err != nil {
		return "", nil, err
	}
	cmd := exec.Command("bash", filepath.Join(kit, "setup.sh"), cache)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		unlock()
		return "", nil, fmt.Errorf("%s setup failed: %v\n%s", what, err, stderr.String())
	}
	return string(bytes.TrimSpace(out)), unlock, nil
}

func installFormats(kit, cache string) (*Formats, error) {
	node, unlock, err := setupKit(kit, cache, "format kit")
	if err != nil {
		return nil, err
	}
	defer unlock()
	decode, err := os.ReadFile(filepath.Join(kit, "decode.mjs"))
	if err != nil {
		return nil, err
	}
	// the recoverable variant differs only in the recovery policy the codec's decoder is created with
	const strict = "createDecoder(header, 'strict')"
	if bytes.Count(decode, []byte(strict)) != 1 {
		return nil, errors.New("decode.mjs no longer creates its decoder as " + strict)
	}
	recoverable := bytes.Replace(decode, []byte(strict), []byte("createDecoder(header, 'recoverable')"), 1)
	for name, data := range map[string][]byte{"decode.mjs": decode, "dshfs-decode-recoverable.mjs": recoverable, "dshfs-types.mjs": formatsTypesScript} {
		if err := writeAtomic(filepath.Join(cache, name), data); err != nil {
			return nil, err
		}
	}
	return &Formats{Node: node, Cache: cache}, nil
}

// Restored is the kit's answer for one artifact: what the harness restores (decode.mjs's output), or its
// refusal, `<error class>: <message>`.
type Restored struct {
	Out     []byte
	Refusal string
}

// Decode runs decode.mjs on the artifact at path (the generation and encoding come from its name).
func (f *Formats) Decode(path string) (Restored, error) { return f.run("decode.mjs", path) }

// DecodeRecoverable is Decode with the codec's recoverable policy: the accepted prefix of a damaged
// artifact instead of a refusal, unless a later turn/end proves the damage committed.
func (f *Formats) DecodeRecoverable(path string) (Restored, error) {
	return f.run("dshfs-decode-recoverable.mjs", path)
}

func (f *Formats) run(script, path string) (Restored, error) {
	cmd := exec.Command(f.Node, filepath.Join(f.Cache, script), path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return Restored{Out: out}, nil
	case errors.As(err, &exit) && exit.ExitCode() == 1 && stderr.Len() > 0:
		return Restored{Refusal: string(bytes.TrimSuffix(stderr.Bytes(), []byte("\n")))}, nil
	}
	return Restored{}, fmt.Errorf("%s %s: %v\n%s", script, path, err, stderr.String())
}

// ReleasedV2Types is the released-v2 event inventory as the installed codec package exports it.
func (f *Formats) ReleasedV2Types() ([]byte, error) {
	out, err := exec.Command(f.Node, filepath.Join(f.Cache, "dshfs-types.mjs")).Output()
	if err != nil {
		return nil, fmt.Errorf("dshfs-types.mjs: %v", err)
	}
	return bytes.TrimSpace(out), nil
}
