package mount

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/storetree"
	"github.com/dshfs/dshfs/views"
)

// FuzzMountAgreesWithCheck builds a whole store tree from the input (storetree.Build) and asserts that the
// mount's answers and `dshfs check`'s agree for every session: the same sessions are listed, a session
// check refuses (at the header or when inspected) is refused by the mount with the same reason, and one
// check accepts is served — its status and events render. Both finish within a deadline, with tiny caps
// (max_line_bytes, max_frame_bytes) keeping memory bounded.
func FuzzMountAgreesWithCheck(f *testing.F) {
	header := `{"type":"session","version":0,"id":"s","createdAt":1,"cwd":"/p","delegationDepth":0}` + "\n"
	f.Add([]byte("\x00s\x00" + header + `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}` + "\n"))
	f.Add([]byte("\x01s\x00" + string(jsonl.EncodeFrame(nil, []byte(header)))))
	f.Add([]byte("\x02s\x00\x03t\x00/dev/zero\x04u\x00\x05v\x00" + header))
	f.Add(append([]byte("\x01bomb\x00"), append(jsonl.EncodeFrame(nil, []byte(strings.ReplaceAll(header, `"s"`, `"bomb"`))), jsonl.Bomb(64)...)...))
	f.Add([]byte("\x00a\nb\x00" + header + "\x00a~000Ab\x00" + header))
	f.Add([]byte("\x00s\x00" + header + `{"type":"user/message","seq":0,"time":1,"data":{"content":"x"},"surfaceOp":"append"}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		root := storetree.TempDir(t)
		storetree.Build(t, root, data)
		for _, mode := range []jsonl.Compression{jsonl.None, jsonl.Zstd} {
			done := make(chan struct{})
			go func() {
				defer close(done)
				agree(t, root, mode)
			}()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("%s: check and the mount did not finish", mode)
			}
		}
	})
}

// open is a fresh store over root, with tiny caps.
func open(t *testing.T, root string, mode jsonl.Compression) *eventstore.Store {
	b, err := jsonl.Open(root, mode)
	if err != nil {
		t.Fatal(err)
	}
	b.SetLimits(1<<16, 1<<20)
	return eventstore.New(b)
}

func agree(t *testing.T, root string, mode jsonl.Compression) {
	ctx := context.Background()
	// check: its own store, as the CLI has
	checked := open(t, root, mode)
	l, err := checked.List(ctx)
	if err != nil {
		t.Errorf("check: list: %v", err)
		return
	}
	verdict := map[string]string{} // id → refusal text, "" when accepted
	seen := map[string]int{}
	for _, e := range l.Entries {
		seen[e.ID]++
	}
	for _, e := range l.Entries {
		if seen[e.ID] > 1 {
			// a stray directory whose raw name decodes to a sibling's id: the mount shows one of the two
			// (TestStraySibling and the listing's own tests pin which), check reports both
			continue
		}
		switch {
		case e.Refusal != nil:
			verdict[e.ID] = e.Refusal.Error()
		default:
			if _, err := checked.Inspect(ctx, e.ID); err != nil {
				verdict[e.ID] = err.Error()
			} else {
				verdict[e.ID] = ""
			}
		}
	}
	// the mount: another store, as a mount has
	m, err := New(Options{Store: open(t, root, mode), Root: root, Config: testConfig(t),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Errorf("mount: %v", err)
		return
	}
	ml := m.Listing()
	if len(ml.Entries) != len(seen) {
		t.Errorf("%s: check lists %d session ids, the mount %d", mode, len(seen), len(ml.Entries))
	}
	for _, e := range ml.Entries {
		if seen[e.ID] > 1 {
			continue
		}
		want, ok := verdict[e.ID]
		if !ok {
			t.Errorf("%s: the mount lists %q, check does not", mode, e.ID)
			continue
		}
		refusal, err := m.Refusal(ctx, e.ID)
		if err != nil {
			t.Errorf("%s: %q: the mount failed to read it: %v", mode, e.ID, err)
			continue
		}
		got := ""
		if refusal != nil {
			got = refusal.Error()
		}
		if got != want {
			t.Errorf("%s: %q: check says %q, the mount %q", mode, e.ID, want, got)
			continue
		}
		if _, err := m.Render(ctx, e.ID, views.Status); err != nil {
			t.Errorf("%s: %q: status.json: %v", mode, e.ID, err)
		}
		if refusal == nil {
			if _, err := m.Render(ctx, e.ID, views.Events); err != nil {
				t.Errorf("%s: %q: accepted by check, but events.jsonl fails: %v", mode, e.ID, err)
			}
		}
	}
}
