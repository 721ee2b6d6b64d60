// Package eventtest builds events from JSON lines for tests.
package eventtest

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
)

// Events parses each line (any JSON spelling) into a canonical event, failing t on malformed input.
func Events(t testing.TB, lines ...string) []event.Event {
	t.Helper()
	out := make([]event.Event, 0, len(lines))
	for _, l := range lines {
		e, err := event.ParseEvent([]byte(l))
		if err != nil {
			t.Fatalf("bad test event %s: %v", l, err)
		}
		out = append(out, e)
	}
	return out
}

// Log builds a log from "type data[ + envelope members]" specs (e.g. `turn/start {"turn":1}` or
// `user/message {...} + "surfaceOp":"append"`), numbering seqs from 0 with time 1000+seq, so tests write
// only what matters. An empty data means {}.
func Log(t testing.TB, specs ...string) []event.Event {
	t.Helper()
	lines := make([]string, len(specs))
	for i, s := range specs {
		typ, rest, _ := strings.Cut(s, " ")
		data, extra, _ := strings.Cut(rest, " + ")
		if data == "" {
			data = "{}"
		}
		line := fmt.Sprintf(`{"type":%q,"seq":%d,"time":%d,"data":%s`, typ, i, 1000+i, data)
		if extra != "" {
			line += "," + extra
		}
		lines[i] = line + "}"
	}
	return Events(t, lines...)
}

// ReadFile loads a JSONL file of events (a golden events.jsonl or stored.jsonl).
func ReadFile(t testing.TB, path string) []event.Event {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []event.Event
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		e, err := event.ParseEvent(line)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, e)
	}
	return out
}

// SameLines fails t unless got and want hold the same lines, naming each line that differs.
func SameLines(t testing.TB, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}

// OneByteMutations is every copy of line with one byte replaced by one of subs (a byte by itself left out).
func OneByteMutations(line string, subs []byte) []string {
	var out []string
	for at := range len(line) {
		for _, b := range subs {
			if line[at] != b {
				out = append(out, line[:at]+string([]byte{b})+line[at+1:])
			}
		}
	}
	return out
}

// FixtureLines is every line of the raw logs under dirs that holds an event of one of the types.
func FixtureLines(t *testing.T, types []string, dirs ...string) []string {
	t.Helper()
	var lines []string
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".jsonl") {
				return err
			}
			data, err := os.ReadFile(path)
			for _, l := range strings.Split(string(data), "\n") {
				for _, typ := range types {
					if strings.HasPrefix(l, `{"type":"`+typ+`"`) {
						lines = append(lines, l)
					}
				}
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return lines
}
