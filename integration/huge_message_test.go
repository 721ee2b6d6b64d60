package integration

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/eventtest"
)

// writeHugeMessage writes session id into a raw root: one turn whose user message is text.
func writeHugeMessage(t *testing.T, root, id, text string) {
	t.Helper()
	ctx := context.Background()
	b, err := jsonl.Open(root, jsonl.None)
	if err != nil {
		t.Fatal(err)
	}
	st := eventstore.New(b)
	defer st.Close(ctx) // release the writer lock for the mount
	cwd := event.String("/home/dev/paste")
	if err := st.Create(ctx, event.Header{ID: id, CreatedAt: 1778573701000, Cwd: &cwd}); err != nil {
		t.Fatal(err)
	}
	if err := st.Append(ctx, id, eventtest.Events(t,
		`{"type":"turn/start","seq":0,"time":1778573701000,"data":{"turn":1}}`,
		`{"type":"user/message","seq":1,"time":1778573701001,"data":{"id":"u1","role":"user","content":[{"type":"text","text":`+
			string(event.Stringify(event.String(text)))+`}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"turn/end","seq":2,"time":1778573701002,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
	)); err != nil {
		t.Fatal(err)
	}
}

// TestHugeMessageMemory: a session whose one user message is 50 MB — quotes, line feeds and two-byte
// characters throughout, so the log escapes it — is read through a read-only mount by four readers of
// transcript.md and four of transcript.html at once, beside its usage views and the store's index. Every
// page shows the start of the message and says how long it is, and the mount process stays within the
// 256 MiB budget (VmHWM, the kernel's own peak): a human view costs what it shows, not what the log
// holds, and readers at once share one rendering. (`dshfs cat` renders through the same views, whose
// allocation views.TestHumanViewsAllocateWhatTheyShow bounds: a child's rusage here would count this
// test process's own peak, which the fork shares until the exec.)
func TestHugeMessageMemory(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "sessions")
	unit := "a pasted \"line\" of text é\n"
	text := strings.Repeat(unit, 50_000_000/len(unit))
	writeHugeMessage(t, root, "big", text)
	note := "cut: " + strconv.Itoa(len(text)) + " bytes in all"

	m := startMount(t, "--read-only", root)
	dir := filepath.Join(m.dir, "sessions", "big")
	files := []string{"usage.jsonl", "usage.svg", "../../index.html"}
	for range 4 {
		files = append(files, "transcript.md", "transcript.html")
	}
	out := make([][]byte, len(files))
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = exec.Command("cat", filepath.Join(dir, f)).Output()
		}()
	}
	wg.Wait()
	for i, f := range files {
		if errs[i] != nil {
			t.Fatalf("cat %s: %v", f, errs[i])
		}
		if strings.HasPrefix(f, "transcript") {
			if len(out[i]) > 1<<20 || !strings.Contains(string(out[i]), note) || !strings.Contains(string(out[i]), "a pasted") {
				t.Errorf("%s: %d bytes, no %q or no start of the message", f, len(out[i]), note)
			}
		}
	}
	peak := vmHWM(t, m.cmd.Process.Pid)
	t.Logf("four readers each of transcript.md and transcript.html of a 50 MB message: mount VmHWM %d KiB", peak)
	if peak > 256<<10 {
		t.Errorf("the mount peaked at %d KiB (VmHWM): more than 256 MiB", peak)
	}
}
