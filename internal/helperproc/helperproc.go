// Package helperproc starts the running test binary again as a helper process: tests that need another
// process — one holding a lock, writing a file, keeping a descriptor open — run it from their own binary
// (its TestMain or an init reads the variable named here and does the helper's part) instead of shipping a
// tool of their own.
package helperproc

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Start runs the test binary with env=value in its environment and args after a -test.run that runs no
// test, and waits for the first line it prints (without its newline). The helper runs until stop is called
// or the test ends: stop closes its standard input, which tells it to finish, and waits for it to exit.
func Start(t testing.TB, env, value string, args ...string) (first string, stop func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$"}, args...)...)
	cmd.Env = append(os.Environ(), env+"="+value)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			in.Close()
			cmd.Wait()
		}
	}
	t.Cleanup(stop)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("helper process %s=%s: %v", env, value, err)
	}
	return strings.TrimSuffix(line, "\n"), stop
}
