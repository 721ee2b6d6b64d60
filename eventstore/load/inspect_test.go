package load

import (
	"errors"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/internal/eventtest"
)

func vPtr(v event.Value) *event.Value { return &v }

func TestHeaderRestoreRules(t *testing.T) {
	cases := []struct {
		name   string
		modify func(*event.Header)
		want   string
	}{
		{"valid", func(*event.Header) {}, ""},
		{"no cwd", func(h *event.Header) { h.Cwd = nil }, ""},
		{"full lineage", func(h *event.Header) {
			h.ParentSession = vPtr(event.String("p"))
			h.SeedLength = vPtr(event.Number(36))
			h.Origin = vPtr(event.String("subagent"))
			h.DelegationDepth = 2
			h.AgentPreset = vPtr(event.String("x"))
		}, ""},
		{"cwd not a string", func(h *event.Header) { h.Cwd = vPtr(event.Number(5)) }, "session header cwd must be a string"},
		{"cwd null", func(h *event.Header) { h.Cwd = vPtr(event.Null()) }, "session header cwd must be a string"},
		{"cwd relative", func(h *event.Header) { h.Cwd = vPtr(event.String("rel/dir")) }, `session header cwd must be an absolute path, got "rel/dir"`},
		{"cwd empty", func(h *event.Header) { h.Cwd = vPtr(event.String("")) }, `session header cwd must be an absolute path, got ""`},
		{"parentSession not a string", func(h *event.Header) { h.ParentSession = vPtr(event.Number(1)) }, "session header parentSession must be a string"},
		{"seedLength negative", func(h *event.Header) { h.SeedLength = vPtr(event.Number(-1)) }, "session header seedLength must be a non-negative safe integer"},
		{"seedLength fractional", func(h *event.Header) { h.SeedLength = vPtr(event.Number(1.5)) }, "session header seedLength must be a non-negative safe integer"},
		{"seedLength string", func(h *event.Header) { h.SeedLength = vPtr(event.String("3")) }, "session header seedLength must be a non-negative safe integer"},
		{"origin other", func(h *event.Header) { h.Origin = vPtr(event.String("user")) }, `session header origin must be "subagent"`},
		{"agentPreset not a string", func(h *event.Header) { h.AgentPreset = vPtr(event.Bool(true)) }, "session header agentPreset must be a string"},
		{"createdAt negative", func(h *event.Header) { h.CreatedAt = -1 }, "session header createdAt must be a non-negative safe integer"},
		{"delegationDepth negative", func(h *event.Header) { h.DelegationDepth = -1 }, "session header delegationDepth must be a non-negative safe integer"},
	}
	log := []string{`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := vHeader("s")
			c.modify(&h)
			_, _, err := inspectWith("s", h, vEvents(t, log...), "", nil)
			got := ""
			if err != nil {
				got = err.Error()
			}
			want := c.want
			if want != "" {
				want = corrupt + want
			}
			if got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
			// The read path never validates the header fields.
			if _, err := readStored("s", h, vEvents(t, log...), ""); err != nil {
				t.Fatalf("ReadStored: %v", err)
			}
		})
	}
}

func TestInspectCheckOrder(t *testing.T) {
	bad := vHeader("s")
	bad.Cwd = vPtr(event.String("rel"))
	envelopeBad := `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1},"x":1}`
	shapeBad := `{"type":"user/message","seq":0,"time":1,"data":{"id":"u","role":"assistant","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}`

	// Header rules run before the per-event seed checks...
	_, _, err := inspectWith("s", bad, vEvents(t, envelopeBad), "", nil)
	if want := corrupt + `session header cwd must be an absolute path, got "rel"`; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	// ...but after the read-side checks.
	_, _, err = inspectWith("s", bad, vEvents(t, shapeBad), "", nil)
	if want := corrupt + `session event at seq 0 message must have role "user"`; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	// Unknown types are refused before header or envelope validation, unwrapped.
	_, _, err = inspectWith("s", bad, vEvents(t, `{"type":"future/x","seq":0,"time":1,"data":{},"x":1}`), "", nil)
	var u *UnsupportedError
	if !errors.As(err, &u) {
		t.Fatalf("got %v, want *UnsupportedError", err)
	}
}

func TestIdentityAndVersion(t *testing.T) {
	log := []string{`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`}
	mismatch := `stored session identity mismatch: requested "s", header contains "other"`
	_, err := readStored("s", vHeader("other"), vEvents(t, log...), "")
	var ce *CorruptionError
	if err == nil || err.Error() != mismatch || errors.As(err, &ce) {
		t.Fatalf("ReadStored: got %v", err)
	}
	_, _, err = inspectWith("s", vHeader("other"), vEvents(t, log...), "", nil)
	if !errors.As(err, &ce) || err.Error() != corrupt+mismatch {
		t.Fatalf("Inspect: got %v", err)
	}

	for _, c := range []struct {
		version float64
		path    string
		want    string
	}{
		{1, "/r/s/session.jsonl", `session "s" uses log format v1, but this harness reads only v0: the log was written by a newer harness — upgrade the harness to open it (raw log: /r/s/session.jsonl)`},
		{-1, "", `session "s" uses log format v-1, older than the supported v0, and this build ships no upgrade path for it`},
	} {
		h := vHeader("s")
		h.Version = c.version
		_, err := readStored("s", h, vEvents(t, log...), c.path)
		var u *UnsupportedError
		if !errors.As(err, &u) || u.Message != c.want || u.Path != c.path {
			t.Fatalf("ReadStored v%v: got %#v", c.version, err)
		}
		_, _, err = inspectWith("s", h, vEvents(t, log...), c.path, nil)
		if !errors.As(err, &u) || err.Error() != c.want {
			t.Fatalf("Inspect v%v: got %v", c.version, err)
		}
	}
}

func TestVocabulary(t *testing.T) {
	unknown := `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`
	cases := []struct {
		name, event, path, want string
	}{
		{"unknown type", `{"type":"future/event","seq":1,"time":1,"data":{}}`, "/r/x/session.jsonl",
			`session "s" contains event type "future/event" (seq 1) unknown to this harness and not marked ignorable; refusing to interpret the log — it was likely written by a newer harness (raw log: /r/x/session.jsonl)`},
		{"unknown type without artifact", `{"type":"future/event","seq":1,"time":1,"data":{}}`, "",
			`session "s" contains event type "future/event" (seq 1) unknown to this harness and not marked ignorable; refusing to interpret the log — it was likely written by a newer harness`},
		{"non-string type", `{"type":42,"seq":1,"time":1,"data":{}}`, "",
			`session "s" contains event type "42" (seq 1) unknown to this harness and not marked ignorable; refusing to interpret the log — it was likely written by a newer harness`},
		{"missing type", `{"seq":1,"time":1,"data":{}}`, "",
			`session "s" contains event type "undefined" (seq 1) unknown to this harness and not marked ignorable; refusing to interpret the log — it was likely written by a newer harness`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := readStored("s", vHeader("s"), vEvents(t, unknown, c.event), c.path)
			var u *UnsupportedError
			if !errors.As(err, &u) || u.Message != c.want || u.Path != c.path {
				t.Fatalf("ReadStored: got %v", err)
			}
			_, _, err = inspectWith("s", vHeader("s"), vEvents(t, unknown, c.event), c.path, nil)
			if !errors.As(err, &u) || err.Error() != c.want {
				t.Fatalf("Inspect: got %v", err)
			}
		})
	}
}

func TestVocabularyIgnorableKept(t *testing.T) {
	in := []string{
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
		`{"type":"plugin/test","seq":1,"time":1,"data":null,"ignorable":true}`,
		`{"type":"turn/end","seq":2,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
	}
	got, err := readStored("s", vHeader("s"), vEvents(t, in...), "")
	if err != nil {
		t.Fatal(err)
	}
	eventtest.SameLines(t, vLines(got), in)
	events, closers, err := inspectWith("s", vHeader("s"), vEvents(t, in...), "", nil)
	if err != nil || len(closers) != 0 {
		t.Fatalf("Inspect: %v, %d closers", err, len(closers))
	}
	eventtest.SameLines(t, vLines(events), in)
}

func TestVocabularyAfterNormalization(t *testing.T) {
	// steering/message is unknown to the build, but it is upgraded before the vocabulary check.
	in := `{"type":"steering/message","seq":0,"time":1,"data":{"turn":1,"content":[],"source":{"kind":"user"}},"surfaceOp":"append"}`
	got, err := readStored("s", vHeader("s"), vEvents(t, in), "")
	if err != nil || got[0].Type != "user/message" {
		t.Fatalf("got %v, %v", vLines(got), err)
	}
}

// failAt is a surface check that rejects the event with the given seq.
type failAt struct {
	seq  int64
	seen []int64
}

func (f *failAt) Push(e event.Event) error {
	f.seen = append(f.seen, e.Seq)
	if e.Seq == f.seq {
		return errors.New("boom")
	}
	return nil
}

func TestSurfaceCheckWrapping(t *testing.T) {
	in := []string{
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
		`{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}`,
	}
	sc := &failAt{seq: 1}
	_, _, err := inspectWith("s", vHeader("s"), vEvents(t, in...), "", sc)
	if want := corrupt + "invalid seed event at index 1: boom"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	// The checker also sees the closers, after the stored events.
	sc = &failAt{seq: -2}
	_, closers, err := inspectWith("s", vHeader("s"), vEvents(t, in...), "", sc)
	if err != nil || len(closers) != 2 || len(sc.seen) != 4 || sc.seen[3] != 3 {
		t.Fatalf("err %v, closers %d, seen %v", err, len(closers), sc.seen)
	}
}
