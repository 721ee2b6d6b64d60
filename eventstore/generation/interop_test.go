package generation_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
	"github.com/dshfs/dshfs/internal/fixtures"
	"github.com/dshfs/dshfs/internal/harness"
)

// The interop tests hold the decoder against the harness's published codecs (the format kit's
// decode.mjs): on every fixture artifact, and on artifacts written here so that the codec, not this
// project, decides what they restore to.

// compare runs the decoder on the artifact at path and requires the reference's restored bytes, or a
// refusal where the reference refuses; where the reference refuses with one of the codec's error classes, the text must be the same.
func compare(t *testing.T, want harness.Restored, path string, gen int, compressed bool, rec generation.Recovery) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	art, derr := generation.DecodeWith(b, generation.Options{Generation: gen, Compressed: compressed, Recovery: rec})
	switch {
	case want.Refusal == "" && derr != nil:
		t.Fatalf("refused what the harness restores: %v", derr)
	case want.Refusal != "" && derr == nil:
		t.Fatalf("restored what the harness refuses (%s)", want.Refusal)
	case want.Refusal != "":
		var fe *generation.FormatError
		if strings.HasPrefix(want.Refusal, "SessionFormat") {
			if !errors.As(derr, &fe) {
				t.Fatalf("refusal %T %v, the harness: %s", derr, derr, want.Refusal)
			}
			if got := string(fe.Class) + ": " + fe.Message; got != want.Refusal {
				t.Fatalf("refusal text\n got  %s\n want %s", got, want.Refusal)
			}
		}
	default:
		if got := art.AppendRestored(nil); !bytes.Equal(got, want.Out) {
			t.Fatalf("restored output differs from the harness's:\n%s", firstDiff(got, want.Out))
		}
	}
}

func TestInteropFixtures(t *testing.T) {
	f := harness.GetFormats(t)
	for _, a := range fixtureArtifacts(t) {
		t.Run(strings.TrimPrefix(a.path, fixtures.Path(t, "generations")), func(t *testing.T) {
			want, err := f.Decode(a.path)
			if err != nil {
				t.Fatal(err)
			}
			compare(t, want, a.path, a.gen, a.compressed, generation.Strict)
		})
	}
}

// TestReleasedV2TypesMatchPackage holds the copied inventory against the installed package's.
func TestReleasedV2TypesMatchPackage(t *testing.T) {
	got, err := harness.GetFormats(t).ReleasedV2Types()
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]event.Value, len(generation.ReleasedV2Types))
	for i, s := range generation.ReleasedV2Types {
		vals[i] = event.String(s)
	}
	if want := event.Stringify(event.Array(vals...)); !bytes.Equal(got, want) {
		t.Fatalf("released v2 inventory\n package %s\n dshfs   %s", got, want)
	}
}

// session is a fixture artifact's lines (header first), to be varied and written anew.
type session struct {
	gen   int
	lines []string
}

func loadSession(t *testing.T, gen int, idPrefix string) session {
	t.Helper()
	g := strconv.Itoa(gen)
	paths, err := filepath.Glob(fixtures.Path(t, "generations", "v"+g, "raw", "*", idPrefix+"*", "session.v"+g+".jsonl"))
	if err != nil || len(paths) != 1 {
		t.Fatalf("fixture %s v%d: %v %v", idPrefix, gen, paths, err)
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	return session{gen: gen, lines: lines}
}

// The fixture sessions varied below (fixtures/README.md): a clean two-turn session, the compaction
// session (surface replacements with multi-event provenance), and a crash whose last turn is open.
const (
	cleanID      = "main-session-fa821f4b"
	compactionID = "main-session-39ade10b"
	crashID      = "main-session-30628611"
)

func (s session) clone() session {
	return session{gen: s.gen, lines: append([]string(nil), s.lines...)}
}

// row returns line i (0 = header) parsed.
func (s session) row(t *testing.T, i int) event.Value {
	t.Helper()
	v, err := event.Parse([]byte(s.lines[i]))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// edit replaces line i by fn of its parsed value.
func (s session) edit(t *testing.T, i int, fn func(v event.Value) event.Value) session {
	t.Helper()
	out := s.clone()
	out.lines[i] = string(event.Stringify(fn(s.row(t, i))))
	return out
}

// find returns the index of the first line whose type is typ, from line from on.
func (s session) find(t *testing.T, typ string, from int) int {
	t.Helper()
	for i := max(from, 1); i < len(s.lines); i++ {
		if ty, _ := s.row(t, i).Get("type"); ty.Str == typ {
			return i
		}
	}
	t.Fatalf("no %s from line %d", typ, from)
	return 0
}

// appendEvent adds an event after the last one, with the next seq and a later time.
func (s session) appendEvent(t *testing.T, typ string, data string, extra ...event.Member) session {
	t.Helper()
	out := s.clone()
	last := s.row(t, len(s.lines)-1)
	tm, _ := last.Get("time")
	d, err := event.Parse([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	ms := append([]event.Member{{Key: "type", Value: event.String(typ)}, {Key: "seq", Value: event.Int(int64(len(s.lines) - 1))},
		{Key: "time", Value: event.Number(tm.Num + 1)}, {Key: "data", Value: d}}, extra...)
	out.lines = append(out.lines, string(event.Stringify(event.Object(ms...))))
	return out
}

// set returns v with member key set (appended when absent).
func set(v event.Value, key string, x event.Value) event.Value {
	ms := append([]event.Member(nil), v.Obj...)
	for i := range ms {
		if ms[i].Key == key {
			ms[i].Value = x
			return event.Value{Kind: event.KindObject, Obj: ms}
		}
	}
	return event.Value{Kind: event.KindObject, Obj: append(ms, event.Member{Key: key, Value: x})}
}

// setData sets a member of an event's data.
func setData(t *testing.T, v event.Value, key string, x event.Value) event.Value {
	t.Helper()
	data, ok := v.Get("data")
	if !ok {
		t.Fatal("event without data")
	}
	return set(v, "data", set(data, key, x))
}

func del(v event.Value, key string) event.Value {
	var ms []event.Member
	for _, m := range v.Obj {
		if m.Key != key {
			ms = append(ms, m)
		}
	}
	return event.Value{Kind: event.KindObject, Obj: ms}
}

func jsonValue(t *testing.T, s string) event.Value {
	t.Helper()
	v, err := event.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// text is the raw artifact: every line LF-terminated, then tail.
func (s session) text(tail string) []byte {
	return []byte(strings.Join(s.lines, "\n") + "\n" + tail)
}

// compressed is the artifact in frames: the header frame, then the body as a migration publishes it
// (one frame) or, batched, as a writer appends it (a frame per few events); tornTail appends the first
// half of one more frame.
func (s session) compressed(t *testing.T, batched, tornTail bool) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	out := enc.EncodeAll([]byte(s.lines[0]+"\n"), nil)
	body := s.lines[1:]
	if batched {
		for len(body) > 0 {
			n := min(len(body), 5)
			out = enc.EncodeAll([]byte(strings.Join(body[:n], "\n")+"\n"), out)
			body = body[n:]
		}
	} else {
		out = enc.EncodeAll([]byte(strings.Join(body, "\n")+"\n"), out)
	}
	if tornTail {
		extra := enc.EncodeAll([]byte(s.lines[len(s.lines)-1]+"\n"), nil)
		out = append(out, extra[:len(extra)/2]...)
	}
	return out
}

// write stores the artifact under dir with its generation file name and returns the path.
func (s session) write(t *testing.T, dir string, b []byte, compressed bool) string {
	t.Helper()
	name := "session.v" + strconv.Itoa(s.gen) + ".jsonl"
	if compressed {
		name += ".zstd"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// variation is one artifact written from a fixture; accept says what the test expects the harness to
// decide, so that a variation which stops testing what it was written for is noticed.
type variation struct {
	name   string
	gens   []int
	accept map[int]bool // by generation
	make   func(t *testing.T, gen int) session
	tail   string // raw bytes after the last line (a torn tail)
}

func both(accept bool) map[int]bool { return map[int]bool{2: accept, 3: accept} }

func variations() []variation {
	return []variation{
		{name: "ignorable-unknown-appended", gens: []int{2, 3}, accept: both(true), make: func(t *testing.T, gen int) session {
			return loadSession(t, gen, cleanID).appendEvent(t, "x/future", `{"a":1}`, event.Member{Key: "ignorable", Value: event.Bool(true)})
		}},
		{name: "unknown-appended", gens: []int{2, 3}, accept: both(false), make: func(t *testing.T, gen int) session {
			return loadSession(t, gen, cleanID).appendEvent(t, "x/future", `{}`)
		}},
		{name: "feedback-appended", gens: []int{2, 3}, accept: map[int]bool{2: false, 3: true}, make: func(t *testing.T, gen int) session {
			return loadSession(t, gen, cleanID).appendEvent(t, "feedback/message-put",
				`{"sessionId":"s","item":{"messageId":"m","rating":"positive","version":"1","createdAt":1,"updatedAt":2}}`)
		}},
		{name: "provenance-ranges", gens: []int{2, 3}, accept: both(true), make: func(t *testing.T, gen int) session {
			// the harness's encoder writes a run of consecutive sources as [start, end]; the compaction
			// summaries cite increasing runs once their sources are sorted
			s := loadSession(t, gen, compactionID)
			for i := 1; i < len(s.lines); i++ {
				src, ok := s.row(t, i).Get("sourceEventSeqs")
				if !ok || len(src.Arr) < 4 {
					continue
				}
				s = s.edit(t, i, func(v event.Value) event.Value { return set(v, "sourceEventSeqs", ranges(sortedSeqs(src))) })
			}
			return s
		}},
		{name: "provenance-range-backwards", gens: []int{2, 3}, accept: both(false), make: func(t *testing.T, gen int) session {
			s := loadSession(t, gen, cleanID)
			i := s.find(t, "user/message", 4)
			return s.edit(t, i, func(v event.Value) event.Value { return set(v, "sourceEventSeqs", jsonValue(t, `[[3,1]]`)) })
		}},
		{name: "noncanonical-spelling", gens: []int{2, 3}, accept: both(true), make: func(t *testing.T, gen int) session {
			s := loadSession(t, gen, compactionID).clone()
			for i := 1; i < len(s.lines); i++ {
				l := strings.Replace(s.lines[i], `{"type":"`, `{ "type" : "`, 1)
				l = strings.Replace(l, `"seq":`, `"\u0073eq":`, 1)
				l = strings.Replace(l, `eq":`+strconv.Itoa(i-1)+`,`, `eq":`+strconv.Itoa(i-1)+`.0e0 ,`, 1)
				s.lines[i] = strings.ReplaceAll(l, `/`, `\/`) + " \t"
			}
			return s
		}},
		{name: "torn-tail", gens: []int{2, 3}, accept: both(true), make: func(t *testing.T, gen int) session {
			return loadSession(t, gen, crashID)
		}, tail: `{"type":"tool/result","seq":`},
		{name: "seq-gap", gens: []int{2, 3}, accept: both(false), make: func(t *testing.T, gen int) session {
			return loadSession(t, gen, cleanID).edit(t, 5, func(v event.Value) event.Value { return set(v, "seq", event.Int(40)) })
		}},
		{name: "unexpected-member", gens: []int{2, 3}, accept: both(false), make: func(t *testing.T, gen int) session {
			return loadSession(t, gen, cleanID).edit(t, 3, func(v event.Value) event.Value { return set(v, "extra", event.Int(1)) })
		}},
		{name: "ignorable-false", gens: []int{2, 3}, accept: both(false), make: func(t *testing.T, gen int) session {
			return loadSession(t, gen, cleanID).edit(t, 2, func(v event.Value) event.Value { return set(v, "ignorable", event.Bool(false)) })
		}},
		{name: "time-not-integer", gens: []int{2, 3}, accept: both(false), make: func(t *testing.T, gen int) session {
			return loadSession(t, gen, cleanID).edit(t, 4, func(v event.Value) event.Value { return set(v, "time", event.Number(1.5)) })
		}},
		{name: "log-event-with-surface-op", gens: []int{2, 3}, accept: both(false), make: func(t *testing.T, gen int) session {
			s := loadSession(t, gen, cleanID)
			return s.edit(t, s.find(t, "step/start", 1), func(v event.Value) event.Value { return set(v, "surfaceOp", event.String("append")) })
		}},
		{name: "header-relative-cwd", gens: []int{2, 3}, accept: both(false), make: func(t *testing.T, gen int) session {
			return loadSession(t, gen, cleanID).edit(t, 0, func(v event.Value) event.Value { return set(v, "cwd", event.String("rel/dir")) })
		}},
		{name: "header-extra-member", gens: []int{2, 3}, accept: both(false), make: func(t *testing.T, gen int) session {
			return loadSession(t, gen, cleanID).edit(t, 0, func(v event.Value) event.Value { return set(v, "seedLength", event.Int(0)) })
		}},
		{name: "header-without-depth", gens: []int{2, 3}, accept: both(false), make: func(t *testing.T, gen int) session {
			return loadSession(t, gen, cleanID).edit(t, 0, func(v event.Value) event.Value { return del(v, "delegationDepth") })
		}},
		{name: "header-optional-members", gens: []int{2, 3}, accept: both(true), make: func(t *testing.T, gen int) session {
			return loadSession(t, gen, cleanID).edit(t, 0, func(v event.Value) event.Value {
				// physical member order differs from the logical one; the restored header has its own
				return set(set(v, "agentPreset", event.String("ptc")), "origin", event.String("subagent"))
			})
		}},
		{name: "seeded-without-marker", gens: []int{2, 3}, accept: both(false), make: func(t *testing.T, gen int) session {
			return loadSession(t, gen, cleanID).edit(t, 0, func(v event.Value) event.Value { return set(v, "isSeeded", event.Bool(true)) })
		}},
		{name: "retired-system-prompt", gens: []int{3}, accept: both(false), make: func(t *testing.T, gen int) session {
			s := loadSession(t, gen, cleanID)
			return s.edit(t, s.find(t, "request/header", 1), func(v event.Value) event.Value {
				data, _ := v.Get("data")
				h, _ := data.Get("header")
				return set(v, "data", set(data, "header", set(h, "system", event.String("You are"))))
			})
		}},
		{name: "empty-tools", gens: []int{3}, accept: both(false), make: func(t *testing.T, gen int) session {
			s := loadSession(t, gen, cleanID)
			return s.edit(t, s.find(t, "request/header", 1), func(v event.Value) event.Value {
				data, _ := v.Get("data")
				h, _ := data.Get("header")
				return set(v, "data", set(data, "header", set(h, "tools", event.Array())))
			})
		}},
		{name: "required-code-dispatch", gens: []int{3}, accept: both(false), make: func(t *testing.T, gen int) session {
			return loadSession(t, gen, cleanID).appendEvent(t, "tool/code-dispatch", `{}`)
		}},
		{name: "ignorable-code-dispatch", gens: []int{3}, accept: both(true), make: func(t *testing.T, gen int) session {
			return loadSession(t, gen, cleanID).appendEvent(t, "tool/code-dispatch", `{}`, event.Member{Key: "ignorable", Value: event.Bool(true)})
		}},
		{name: "replacement-legacy-spelling", gens: []int{3}, accept: both(false), make: func(t *testing.T, gen int) session {
			s := loadSession(t, gen, compactionID)
			for i := 1; i < len(s.lines); i++ {
				if op, ok := s.row(t, i).Get("surfaceOp"); ok && op.Kind == event.KindObject {
					return s.edit(t, i, func(v event.Value) event.Value {
						return set(v, "surfaceOp", jsonValue(t, `{"op":"replace","start":1,"end":1}`))
					})
				}
			}
			t.Fatal("no replacement in the compaction fixture")
			return s
		}},
		{name: "user-replaces-system-head", gens: []int{3}, accept: both(false), make: func(t *testing.T, gen int) session {
			s := loadSession(t, gen, cleanID)
			head := int64(-1)
			for i := 1; i < len(s.lines); i++ {
				v := s.row(t, i)
				ty, _ := v.Get("type")
				seq, _ := v.Get("seq")
				switch ty.Str {
				case "system/message":
					head = int64(seq.Num)
				case "user/message":
					if head >= 0 && int64(seq.Num) > head {
						return s.edit(t, i, func(v event.Value) event.Value {
							return set(v, "surfaceOp", jsonValue(t, `{"op":"replace","startSeq":`+strconv.FormatInt(head, 10)+`,"endSeq":`+strconv.FormatInt(head, 10)+`}`))
						})
					}
				}
			}
			t.Fatal("no user message after the system head")
			return s
		}},
		// the released relationship validation
		{name: "turn-end-of-another-turn", gens: []int{2, 3}, accept: both(false), make: func(t *testing.T, gen int) session {
			s := loadSession(t, gen, cleanID)
			return s.edit(t, s.find(t, "turn/end", 1), func(v event.Value) event.Value { return setData(t, v, "turn", event.Int(7)) })
		}},
		{name: "step-out-of-order", gens: []int{2, 3}, accept: both(false), make: func(t *testing.T, gen int) session {
			s := loadSession(t, gen, cleanID)
			return s.edit(t, s.find(t, "step/start", 1), func(v event.Value) event.Value { return setData(t, v, "step", event.Int(5)) })
		}},
		{name: "tool-call-not-advertised", gens: []int{2, 3}, accept: both(false), make: func(t *testing.T, gen int) session {
			s := loadSession(t, gen, cleanID)
			return s.edit(t, s.find(t, "tool/call", 1), func(v event.Value) event.Value { return setData(t, v, "callId", event.String("call_x")) })
		}},
		{name: "tool-result-without-call", gens: []int{2, 3}, accept: both(false), make: func(t *testing.T, gen int) session {
			s := loadSession(t, gen, cleanID)
			return s.edit(t, s.find(t, "tool/result", 1), func(v event.Value) event.Value {
				data, _ := v.Get("data")
				m, _ := data.Get("message")
				src, _ := m.Get("source")
				return set(v, "data", set(data, "message", set(m, "source", set(src, "callId", event.String("call_x")))))
			})
		}},
		{name: "replacement-omits-a-source", gens: []int{2, 3}, accept: both(false), make: func(t *testing.T, gen int) session {
			s := loadSession(t, gen, compactionID)
			for i := 1; i < len(s.lines); i++ {
				if src, ok := s.row(t, i).Get("sourceEventSeqs"); ok && len(src.Arr) > 3 {
					return s.edit(t, i, func(v event.Value) event.Value {
						return set(v, "sourceEventSeqs", event.Array(src.Arr[:len(src.Arr)-1]...))
					})
				}
			}
			t.Fatal("no multi-source replacement")
			return s
		}},
		{name: "compaction-summary-off-span", gens: []int{2, 3}, accept: both(false), make: func(t *testing.T, gen int) session {
			s := loadSession(t, gen, compactionID)
			return s.edit(t, s.find(t, "compaction/summary", 1), func(v event.Value) event.Value {
				data, _ := v.Get("data")
				seqs, _ := data.Get("shadowedSeqs")
				return setData(t, v, "shadowedSeqs", event.Array(seqs.Arr[1:]...))
			})
		}},
		{name: "command-run-repeated", gens: []int{2, 3}, accept: both(false), make: func(t *testing.T, gen int) session {
			s := loadSession(t, gen, compactionID)
			data, _ := s.row(t, s.find(t, "command/run", 1)).Get("data")
			return s.appendEvent(t, "command/run", string(event.Stringify(data)))
		}},
		{name: "command-done-without-run", gens: []int{2, 3}, accept: both(false), make: func(t *testing.T, gen int) session {
			return loadSession(t, gen, cleanID).appendEvent(t, "command/done", `{"commandId":"c-none","kind":"success"}`)
		}},
		{name: "retry-outside-turn", gens: []int{2, 3}, accept: both(false), make: func(t *testing.T, gen int) session {
			return loadSession(t, gen, cleanID).appendEvent(t, "llm/retry",
				`{"turn":2,"step":2,"provider":"deepseek-official","policyKey":"k","retryId":"r","retry":1,"delayMs":1,"error":{"message":"x"}}`)
		}},
		{name: "attempt-outside-step", gens: []int{2}, accept: both(false), make: func(t *testing.T, gen int) session {
			return loadSession(t, gen, cleanID).appendEvent(t, "assistant/attempt", `{"turn":2,"step":2,"stream":[]}`)
		}},
		{name: "delivery-marker-of-another-session", gens: []int{2, 3}, accept: both(false), make: func(t *testing.T, gen int) session {
			return loadSession(t, gen, cleanID).appendEvent(t, "session-log-deepseek/delivery-accepted",
				`{"sessionId":"other","throughSeq":3,"sessionFormatVersion":2}`)
		}},
		{name: "request-header-without-config", gens: []int{2, 3}, accept: both(false), make: func(t *testing.T, gen int) session {
			s := loadSession(t, gen, cleanID)
			return s.edit(t, s.find(t, "request/header", 1), func(v event.Value) event.Value {
				data, _ := v.Get("data")
				h, _ := data.Get("header")
				return set(v, "data", set(data, "header", del(h, "config")))
			})
		}},
		{name: "system-message-malformed-block", gens: []int{3}, accept: both(false), make: func(t *testing.T, gen int) session {
			s := loadSession(t, gen, cleanID)
			return s.edit(t, s.find(t, "system/message", 1), func(v event.Value) event.Value {
				data, _ := v.Get("data")
				m, _ := data.Get("message")
				return set(v, "data", set(data, "message", set(m, "content", jsonValue(t, `[{"type":"text","text":"x","cache":true}]`))))
			})
		}},
		{name: "system-message-unknown-form", gens: []int{3}, accept: both(false), make: func(t *testing.T, gen int) session {
			s := loadSession(t, gen, cleanID)
			return s.edit(t, s.find(t, "system/message", 1), func(v event.Value) event.Value {
				data, _ := v.Get("data")
				m, _ := data.Get("message")
				src, _ := m.Get("source")
				return set(v, "data", set(data, "message", set(m, "source", set(src, "form", event.String("poem")))))
			})
		}},
		{name: "system-message-other-block-kinds", gens: []int{3}, accept: both(true), make: func(t *testing.T, gen int) session {
			s := loadSession(t, gen, cleanID)
			return s.edit(t, s.find(t, "system/message", 1), func(v event.Value) event.Value {
				data, _ := v.Get("data")
				m, _ := data.Get("message")
				return set(v, "data", set(data, "message", set(m, "content", jsonValue(t,
					`[{"type":"text","text":"You are"},{"type":"reasoning","text":""},{"type":"future","x":1}]`))))
			})
		}},
		{name: "system-message-outside-step", gens: []int{3}, accept: both(false), make: func(t *testing.T, gen int) session {
			s := loadSession(t, gen, cleanID)
			v := s.row(t, s.find(t, "system/message", 1))
			data, _ := v.Get("data")
			return s.appendEvent(t, "system/message", string(event.Stringify(data)), event.Member{Key: "surfaceOp", Value: event.String("append")})
		}},
		{name: "system-message-without-surface-op", gens: []int{3}, accept: both(false), make: func(t *testing.T, gen int) session {
			s := loadSession(t, gen, cleanID)
			return s.edit(t, s.find(t, "system/message", 1), func(v event.Value) event.Value { return del(v, "surfaceOp") })
		}},
		{name: "system-message-with-user-role", gens: []int{3}, accept: both(false), make: func(t *testing.T, gen int) session {
			s := loadSession(t, gen, cleanID)
			return s.edit(t, s.find(t, "system/message", 1), func(v event.Value) event.Value {
				data, _ := v.Get("data")
				m, _ := data.Get("message")
				return set(v, "data", set(data, "message", set(m, "role", event.String("user"))))
			})
		}},
	}
}

// sortedSeqs returns a plain list of seqs in increasing order.
func sortedSeqs(v event.Value) []int64 {
	out := make([]int64, len(v.Arr))
	for i, x := range v.Arr {
		out[i] = int64(x.Num)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// ranges writes increasing seqs with every run of two or more as [start, end] (the decoder admits pairs
// even though the harness's encoder writes them plain).
func ranges(seqs []int64) event.Value {
	var out []event.Value
	for i := 0; i < len(seqs); {
		j := i
		for j+1 < len(seqs) && seqs[j+1] == seqs[j]+1 {
			j++
		}
		if j > i {
			out = append(out, event.Array(event.Int(seqs[i]), event.Int(seqs[j])))
		} else {
			out = append(out, event.Int(seqs[i]))
		}
		i = j + 1
	}
	return event.Array(out...)
}

func TestInteropWrittenSessions(t *testing.T) {
	f := harness.GetFormats(t)
	for _, v := range variations() {
		for _, gen := range v.gens {
			for _, enc := range []string{"raw", "zstd", "zstd-batched"} {
				compressed := enc != "raw"
				t.Run(v.name+"/v"+strconv.Itoa(gen)+"/"+enc, func(t *testing.T) {
					s := v.make(t, gen)
					b := s.text(v.tail)
					if compressed {
						b = s.compressed(t, enc == "zstd-batched", v.tail != "")
					}
					path := s.write(t, t.TempDir(), b, compressed)
					want, err := f.Decode(path)
					if err != nil {
						t.Fatal(err)
					}
					if accepted := want.Refusal == ""; accepted != v.accept[gen] {
						t.Fatalf("the harness accepts=%v (%s); the variation expects %v", accepted, want.Refusal, v.accept[gen])
					}
					compare(t, want, path, gen, compressed, generation.Strict)
				})
			}
		}
	}
}

// TestInteropRecoverable compares the codec's recoverable policy: a damaged final row is dropped with
// everything after it, unless a later turn/end shows the damage is inside committed history.
func TestInteropRecoverable(t *testing.T) {
	f := harness.GetFormats(t)
	cases := []struct {
		name   string
		accept bool
		make   func(t *testing.T, gen int) session
		v3only bool
	}{
		{"malformed-last-row", true, func(t *testing.T, gen int) session {
			s := loadSession(t, gen, crashID)
			return s.edit(t, len(s.lines)-1, func(v event.Value) event.Value { return set(v, "extra", event.Int(1)) })
		}, false},
		{"gap-in-last-rows", true, func(t *testing.T, gen int) session {
			s := loadSession(t, gen, crashID)
			return s.edit(t, len(s.lines)-2, func(v event.Value) event.Value { return set(v, "seq", event.Int(99)) })
		}, false},
		{"malformed-row-before-turn-end", false, func(t *testing.T, gen int) session {
			s := loadSession(t, gen, cleanID)
			return s.edit(t, len(s.lines)-3, func(v event.Value) event.Value { return set(v, "time", event.String("late")) })
		}, false},
		// v3's canonical envelope check has a recoverable issue of its own, after the row decoded
		{"noncanonical-last-event", true, func(t *testing.T, gen int) session {
			s := loadSession(t, gen, crashID)
			return s.appendEvent(t, "request/header", `{"header":{"config":{"provider":"p","model":"m"},"tools":[]},"reason":"initial"}`)
		}, false},
		{"noncanonical-event-before-turn-end", false, func(t *testing.T, gen int) session {
			s := loadSession(t, gen, cleanID)
			i := s.find(t, "request/header", 1)
			return s.edit(t, i, func(v event.Value) event.Value {
				data, _ := v.Get("data")
				h, _ := data.Get("header")
				return set(v, "data", set(data, "header", set(h, "adapterDefaults", event.Object())))
			})
		}, true},
	}
	for _, c := range cases {
		for _, gen := range []int{2, 3} {
			if c.v3only && gen == 2 {
				continue
			}
			t.Run(c.name+"/v"+strconv.Itoa(gen), func(t *testing.T) {
				s := c.make(t, gen)
				path := s.write(t, t.TempDir(), s.text(""), false)
				want, err := f.DecodeRecoverable(path)
				if err != nil {
					t.Fatal(err)
				}
				if accepted := want.Refusal == ""; accepted != c.accept {
					t.Fatalf("the harness accepts=%v (%s); the case expects %v", accepted, want.Refusal, c.accept)
				}
				compare(t, want, path, gen, false, generation.Recoverable)
			})
		}
	}
}
