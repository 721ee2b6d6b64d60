package mount

import (
	"testing"

	"github.com/dshfs/dshfs/config"
)

// testConfig is config.Default() with the persistent index in a directory of the test's own: a test
// never writes under the user's cache ($XDG_CACHE_HOME or ~/.cache).
func testConfig(t testing.TB) config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Cache.Dir = t.TempDir()
	return cfg
}
