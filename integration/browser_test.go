package integration

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// chromium runs headless Chromium (Debian's package) on a file of the mount with a fresh profile, as a
// person's browser would open it over file://, and returns what it printed.
func chromium(t *testing.T, args ...string) []byte {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is needed (Debian package chromium; .ci/run installs it): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--no-first-run", "--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir(), "XDG_CACHE_HOME="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.Bytes())
	}
	return out
}

// screenshot has Chromium draw a page of the mount into dir/name and checks it is a picture of that size.
func screenshot(t *testing.T, url, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	chromium(t, "--window-size=1200,900", "--screenshot="+path, url)
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("no screenshot of %s: %v", url, err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil || cfg.Width != 1200 || cfg.Height != 900 {
		t.Fatalf("screenshot of %s: %+v, %v", url, cfg, err)
	}
	return path
}

// TestBrowserViews opens the human views of a real mount of the demo store in headless Chromium — a
// compacted session's transcript.html, a crashed one's, its usage.svg and the root index.html — and checks
// what the browser made of them (the DOM it dumps): every turn heading, every mark, the picture's labelled
// markers, a row and a transcript link per session. Screenshots of each go to $DSHFS_SCREENSHOTS when it is
// set (docs/images was made so), else to the test's temp dir.
func TestBrowserViews(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	cli(t, 0, "demo", base)
	m := startMount(t, "--read-only", filepath.Join(base, "sessions"))
	shots := os.Getenv("DSHFS_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	sessions := filepath.Join(m.dir, "sessions")

	for _, c := range []struct {
		id    string
		marks []string
	}{
		{"demo-compacted", []string{"[!] Compaction checkpoint", "[!] Shadowed"}},
		{"demo-crashed", []string{"[!] Unknown outcome", "[!] Crash: the log ends inside a turn."}},
		{"demo-fork-child", []string{"[!] Fork boundary"}},
		{"demo-spilled", []string{"[!] Spill locator"}},
	} {
		page := filepath.Join(sessions, c.id, "transcript.html")
		dom := string(chromium(t, "--dump-dom", "file://"+page))
		md := string(readFile(t, filepath.Join(sessions, c.id, "transcript.md")))
		turns := regexp.MustCompile(`(?m)^## (Turn \d+)$`).FindAllStringSubmatch(md, -1)
		if len(turns) == 0 {
			t.Fatalf("%s: no turn in transcript.md", c.id)
		}
		for _, h := range turns {
			if !strings.Contains(dom, ">"+h[1]+"</h2>") {
				t.Errorf("%s: the browser shows no heading %q", c.id, h[1])
			}
		}
		for _, mark := range c.marks {
			if !strings.Contains(dom, mark) {
				t.Errorf("%s: the browser shows no mark %q", c.id, mark)
			}
		}
		if strings.Count(dom, "<strong>[!] ") != strings.Count(md, "> **[!] ") {
			t.Errorf("%s: %d marks shown, %d in transcript.md", c.id, strings.Count(dom, "<strong>[!] "), strings.Count(md, "> **[!] "))
		}
		screenshot(t, "file://"+page, shots, c.id+"-transcript.png")
	}

	svg := filepath.Join(sessions, "demo-compacted", "usage.svg")
	dom := string(chromium(t, "--dump-dom", "file://"+svg))
	if !strings.Contains(dom, "<svg") || !strings.Contains(dom, `class="marker"`) || !strings.Contains(dom, ">compaction ") {
		t.Errorf("usage.svg as the browser has it holds no labelled compaction marker:\n%.2000s", dom)
	}
	screenshot(t, "file://"+svg, shots, "demo-compacted-usage.png")

	index := filepath.Join(m.dir, "index.html")
	dom = string(chromium(t, "--dump-dom", "file://"+index))
	ids, err := os.ReadDir(sessions)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ids {
		link := fmt.Sprintf(`href="sessions/%s/transcript.html"`, d.Name())
		if !strings.Contains(dom, link) {
			t.Errorf("index.html has no link %s", link)
		}
	}
	if n := strings.Count(dom, "<tr class="); n != len(ids) {
		t.Errorf("index.html lists %d sessions, the mount %d", n, len(ids))
	}
	if !strings.Contains(dom, `<tr class="needs-repair"><td><a href="sessions/demo-crashed/transcript.html">demo-crashed</a>`) {
		t.Errorf("index.html does not show the crashed session as needing repair")
	}
	screenshot(t, "file://"+index, shots, "index.png")
	m.stop(t)
}
