package jsonl

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
)

// conflictRounds is how many appends TestForeignWriterRace races; the long run (docs/development.md)
// passes -conflict.rounds=1000.
var conflictRounds = flag.Int("conflict.rounds", 20, "append rounds raced by a foreign writer")

// TestForeignWriterRace: appends raced by another process's writes — before this writer's bytes, after
// them (between its write and its fsync), and from a goroutine writing freely — are each either in the
// artifact once and reported written, or not in it at all and reported as a conflict: never both, so that
// the caller's pending sidecar never holds a batch the artifact holds too. The foreign bytes are never cut.
func TestForeignWriterRace(t *testing.T) {
	for _, mode := range []Compression{None, Zstd} {
		t.Run(string(mode), func(t *testing.T) { raceAppends(t, mode, *conflictRounds) })
	}
}

func raceAppends(t *testing.T, mode Compression, rounds int) {
	root := t.TempDir()
	id := "race"
	header := []byte(headerLine(id) + "\n")
	if mode == None {
		writeRawSession(t, root, id, string(header))
	} else {
		writeZstdSession(t, root, id, EncodeFrame(nil, header))
	}
	b, err := Open(root, mode)
	if err != nil {
		t.Fatal(err)
	}
	h, err := event.ParseHeaderLine(header)
	if err != nil {
		t.Fatal(err)
	}
	path, err := b.Locate(h)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // one foreign append at a time, so each is one marker
	foreignN := 0
	foreign := func() {
		mu.Lock()
		defer mu.Unlock()
		foreignN++
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		line := fmt.Appendf(nil, `{"type":"plugin/note","seq":0,"time":1,"data":{"foreign":%d},"ignorable":true}`+"\n", foreignN)
		if mode == Zstd {
			line = EncodeFrame(nil, line)
		}
		if _, err := f.Write(line); err != nil {
			t.Error(err)
		}
	}
	var when string // where the hook injects a foreign write this round
	hook := func(op Op, p string) error {
		if p == path && (op == OpWrite && when == "before" || op == OpSync && when == "after") {
			foreign()
		}
		return nil
	}
	stop := make(chan struct{})
	var free sync.WaitGroup
	caught := map[string]int{}
	for round := range rounds {
		when = []string{"before", "after", "free", "none"}[rand.IntN(4)]
		// a hook makes the append write its bytes in two halves (crash tests): free-running writes could
		// land between them, which one O_APPEND write(2) never allows
		b.SetHook(hook)
		if when == "free" {
			b.SetHook(nil)
			free.Add(1)
			go func() {
				defer free.Done()
				for range 3 {
					select {
					case <-stop:
						return
					default:
						foreign()
					}
				}
			}()
		}
		expect, err := b.Stat(context.Background(), id, path)
		if err != nil {
			t.Fatal(err)
		}
		marker := fmt.Sprintf(`"round":%d}`, round)
		e, err := event.NewEvent(fmt.Appendf(nil, `{"type":"plugin/note","seq":%d,"time":1,"data":{%s,"ignorable":true}`, round, marker))
		if err != nil {
			t.Fatal(err)
		}
		_, aerr := b.AppendBatch(context.Background(), h, expect, []event.Event{e}, nil)
		free.Wait()
		text := plainText(t, path, mode)
		n := bytes.Count(text, []byte(marker))
		switch ce := eventstore.AsCommandError(aerr); {
		case aerr == nil && n == 1:
			caught[when+": written"]++
		case ce != nil && ce.Code == eventstore.CodeConflict && n == 0:
			caught[when+": conflict"]++
		default:
			t.Fatalf("round %d (foreign write %s): %v, and the batch is in the artifact %d times", round, when, aerr, n)
		}
		mu.Lock()
		if got := bytes.Count(text, []byte(`"foreign":`)); got != foreignN {
			t.Fatalf("round %d: %d foreign writes in the artifact, %d made", round, got, foreignN)
		}
		mu.Unlock()
	}
	close(stop)
	t.Logf("%d rounds: %v", rounds, caught)
}

// plainText is the artifact's text (zstd: its frames decoded).
func plainText(t *testing.T, path string, mode Compression) []byte {
	t.Helper()
	buf, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode == None {
		return buf
	}
	text, err := RawText(buf)
	if err != nil {
		t.Fatal(err)
	}
	return text
}
