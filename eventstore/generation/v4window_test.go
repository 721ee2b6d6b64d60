package generation_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/synth"
)

// TestV4DecodeAcrossWindows decodes a log of many parse windows (whose memory a decode reuses once the
// decoder has taken the next) on one and on two workers, and holds it to a walk of the same events that
// reuses nothing (NewV4Checker): the log is accepted and its checker agrees at the end; and with one tool
// call's tool/call or tool/result changed wherever it falls — so that what the lifecycle kept of the
// assistant message came from a window parsed over since — each decode refuses it exactly as that walk
// does.
func TestV4DecodeAcrossWindows(t *testing.T) {
	b := synthV4(t, 20000)
	lines := bytes.SplitAfter(b, []byte("\n"))
	decode := func(text []byte, workers int) (*generation.Artifact, error) {
		return generation.DecodeWith(text, generation.Options{Generation: 4, Recovery: generation.Recoverable, Workers: workers})
	}
	for _, workers := range []int{1, 2} {
		a, err := decode(b, workers)
		if err != nil {
			t.Fatalf("%d workers: %v", workers, err)
		}
		if len(a.Events) != len(lines)-2 { // the header, and the empty tail after the last LF
			t.Fatalf("%d workers: %d events of %d lines", workers, len(a.Events), len(lines)-2)
		}
		if _, err := generation.NewV4Checker(a.Header, a.InheritedEventCount, a.Events); err != nil {
			t.Fatal(err)
		}
		// the walk the decode kept takes the next turn as a fresh walk does
		next := []event.Event{mustEvent(t, `{"type":"turn/start","seq":`+itoa(len(a.Events))+`,"time":1,"data":{"turn":`+itoa(len(a.Events)/11+1)+`}}`)}
		_, kept := a.CheckerFor(a.Events).Check(a.Events, next)
		_, walked := generation.CheckV4Append(a.Header, a.InheritedEventCount, a.Events, next)
		if (kept == nil) != (walked == nil) || (kept != nil && kept.Error() != walked.Error()) {
			t.Fatalf("%d workers: next turn: kept walk %v, fresh walk %v", workers, kept, walked)
		}
	}
	// line i is row i: windows of 4096 rows, halved between two workers
	var at []int
	for _, edge := range []int{2048, 4096, 6144, 8192, 12288, 16384} {
		for i := edge - 6; i <= edge+6; i++ {
			at = append(at, i)
		}
	}
	changed := 0
	for _, i := range at {
		line := string(lines[i])
		var bad string
		switch {
		case strings.Contains(line, `"type":"tool/call"`):
			bad = strings.Replace(line, `"name":"bash"`, `"name":"sh"`, 1)
		case strings.Contains(line, `"type":"tool/result"`):
			bad = strings.Replace(line, `"toolCallId":"call-`, `"toolCallId":"cull-`, 1)
		default:
			continue
		}
		changed++
		text := bytes.Join([][]byte{bytes.Join(lines[:i], nil), []byte(bad), bytes.Join(lines[i+1:], nil)}, nil)
		events := make([]event.Event, 0, len(lines))
		for _, l := range bytes.Split(bytes.TrimSuffix(text, []byte("\n")), []byte("\n"))[1:] {
			events = append(events, mustEvent(t, string(l)))
		}
		a, _ := decode(lines[0], 1)
		_, want := generation.NewV4Checker(a.Header, 0, events)
		if want == nil {
			t.Fatalf("line %d: the changed log is accepted", i)
		}
		for _, workers := range []int{1, 2} {
			if _, err := decode(text, workers); err == nil || err.Error() != want.Error() {
				t.Fatalf("line %d, %d workers: decode %v, walk %v", i, workers, err, want)
			}
		}
	}
	if changed < 6 {
		t.Fatalf("only %d changed logs", changed)
	}
}

func mustEvent(t *testing.T, line string) event.Event {
	t.Helper()
	e, err := event.ParseEvent([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func itoa(n int) string { return strconv.Itoa(n) }

// synthV4 is the raw text of a synthetic v4 log of about n events.
func synthV4(t *testing.T, n int) []byte {
	t.Helper()
	root := t.TempDir()
	if err := synth.WriteV4(root, jsonl.None, "w", n); err != nil {
		t.Fatal(err)
	}
	paths, err := filepath.Glob(filepath.Join(root, "*", "*", "session.v4.jsonl"))
	if err != nil || len(paths) != 1 {
		t.Fatalf("%v %v", paths, err)
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestV4FramesCutAnywhere decodes one v4 log framed in several ways — a frame per batch of lines, frames
// cut inside lines (a line then runs on into the next frame, or the next several), empty frames, one
// frame larger than a worker's buffer — on one and on two workers, and holds every decode to the raw
// log's: the same events, byte for byte.
func TestV4FramesCutAnywhere(t *testing.T) {
	b := synthV4(t, 30000)
	want, err := generation.DecodeWith(b, generation.Options{Generation: 4, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	header := bytes.IndexByte(b, '\n') + 1
	body := b[header:]
	// framed cuts body at the given offsets, after a frame of the header line
	framed := func(cuts []int) []byte {
		out := enc.EncodeAll(b[:header], nil)
		prev := 0
		for _, c := range append(cuts, len(body)) {
			out = enc.EncodeAll(body[prev:c], out)
			prev = c
		}
		return out
	}
	var lineEnds, midLine, withEmpty []int
	for p, line := 0, 0; p < len(body); line++ {
		p += bytes.IndexByte(body[p:], '\n') + 1
		if p < len(body) && line%7 == 0 {
			lineEnds = append(lineEnds, p)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for p := 0; p < len(body); p += 1 + rng.IntN(3000) {
		midLine = append(midLine, p)
		if rng.IntN(5) == 0 {
			withEmpty = append(withEmpty, p, p) // an empty frame here
		} else {
			withEmpty = append(withEmpty, p)
		}
	}
	if len(body) < 5<<20 {
		t.Fatalf("the log is %d bytes: too short for a frame larger than a worker's buffer", len(body))
	}
	for _, tt := range []struct {
		name string
		cuts []int
	}{
		{"batches of lines", lineEnds},
		{"inside lines", midLine},
		{"empty frames", withEmpty},
		{"one frame", nil},
		{"a large frame among small ones", append(append([]int{}, lineEnds[:3]...), lineEnds[len(lineEnds)-3:]...)},
	} {
		art := framed(tt.cuts)
		for _, workers := range []int{1, 2} {
			got, err := generation.DecodeWith(art, generation.Options{Generation: 4, Compressed: true, Workers: workers})
			if err != nil {
				t.Fatalf("%s, %d workers: %v", tt.name, workers, err)
			}
			if len(got.Events) != len(want.Events) {
				t.Fatalf("%s, %d workers: %d events, want %d", tt.name, workers, len(got.Events), len(want.Events))
			}
			for i := range want.Events {
				if !bytes.Equal(got.Events[i].Raw, want.Events[i].Raw) {
					t.Fatalf("%s, %d workers: event %d\n%s\nwant\n%s", tt.name, workers, i, got.Events[i].Raw, want.Events[i].Raw)
				}
			}
		}
	}
}

// TestV4PooledWindowsKeepNothing decodes many small v4 logs one after the other — each on the caller's
// goroutine, in windows a pool hands from one decode to the next — and only then asks each decode's kept
// walk to take the row that follows its log, and a changed copy of that row, as a fresh walk of the same
// events does. A walk that kept a tree of a pooled window would read what a later decode wrote there.
func TestV4PooledWindowsKeepNothing(t *testing.T) {
	b := synthV4(t, 150)
	if len(b) >= 64<<10 {
		t.Fatalf("the log is %d bytes: too large to decode as a small log", len(b))
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	type decoded struct {
		a    *generation.Artifact
		next string
	}
	var all []decoded
	for k := 2; k < len(lines)-1; k++ {
		a, err := generation.DecodeWith(bytes.Join(lines[:k], nil), generation.Options{Generation: 4, Recovery: generation.Recoverable, Workers: 2})
		if err != nil {
			t.Fatalf("the first %d lines: %v", k, err)
		}
		all = append(all, decoded{a, strings.TrimSuffix(string(lines[k]), "\n")})
	}
	changes := 0
	for _, d := range all {
		candidates := []string{d.next}
		switch {
		case strings.Contains(d.next, `"type":"tool/call"`):
			candidates = append(candidates, strings.Replace(d.next, `"name":"bash"`, `"name":"sh"`, 1))
		case strings.Contains(d.next, `"type":"tool/result"`):
			candidates = append(candidates, strings.Replace(d.next, `"toolCallId":"call-`, `"toolCallId":"cull-`, 1))
		}
		changes += len(candidates) - 1
		for _, c := range candidates {
			next := []event.Event{mustEvent(t, c)}
			_, kept := d.a.CheckerFor(d.a.Events).Check(d.a.Events, next)
			_, walked := generation.CheckV4Append(d.a.Header, d.a.InheritedEventCount, d.a.Events, next)
			if (kept == nil) != (walked == nil) || (kept != nil && kept.Error() != walked.Error()) {
				t.Fatalf("after %d events, %s: kept walk %v, fresh walk %v", len(d.a.Events), c, kept, walked)
			}
			if c == d.next && kept != nil {
				t.Fatalf("after %d events, the row the harness wrote next is refused: %v", len(d.a.Events), kept)
			}
		}
	}
	if changes < 10 {
		t.Fatalf("only %d tool calls and results followed a prefix", changes)
	}
}
