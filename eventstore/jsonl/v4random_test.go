package jsonl

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
)

// randomTurn is turn n in the append syntax: 1 to 3 steps, each an assistant message advertising 0 to 2
// tool calls that are all started and answered; with crash set, the last step stops after its calls
// were advertised, some started and none answered (a crash mid-turn).
func randomTurn(rng *rand.Rand, n int, crash bool) [][]byte {
	var lines []string
	add := func(format string, a ...any) { lines = append(lines, fmt.Sprintf(format, a...)) }
	add(`{"type":"turn/start","data":{"turn":%d}}`, n)
	steps := 1 + rng.IntN(3)
	for s := 1; s <= steps; s++ {
		add(`{"type":"step/start","data":{"turn":%d,"step":%d}}`, n, s)
		if s == 1 {
			add(`{"type":"user/message","data":{"content":[{"type":"text","text":"ask %d"}],"source":{"kind":"user"},"role":"user","id":"u-%d"},"surfaceOp":"append"}`, n, n)
		}
		calls := rng.IntN(3)
		content := `{"type":"text","text":"step"}`
		for c := 0; c < calls; c++ {
			content += fmt.Sprintf(`,{"type":"tool-call","id":"c-%d-%d-%d","name":"bash","arguments":"{\"n\":%d}"}`, n, s, c, c)
		}
		add(`{"type":"assistant/message","data":{"turn":%d,"step":%d,"message":{"role":"assistant","content":[%s],"source":{"kind":"model"},"id":"a-%d-%d"}},"surfaceOp":"append"}`, n, s, content, n, s)
		last := crash && s == steps
		for c := 0; c < calls; c++ {
			id := fmt.Sprintf("c-%d-%d-%d", n, s, c)
			if last && rng.IntN(2) == 0 {
				continue // never started
			}
			add(`{"type":"tool/call","data":{"turn":%d,"step":%d,"callId":"%s","name":"bash","arguments":"{\"n\":%d}"}}`, n, s, id, c)
			if last {
				continue // started, its outcome unknown
			}
			add(`{"type":"tool/result","data":{"turn":%d,"step":%d,"message":{"role":"tool","source":{"kind":"tool","callId":"%s"},"toolCallId":"%s","content":[{"type":"text","text":"ok"}],"id":"r-%s"}},"surfaceOp":"append"}`, n, s, id, id, id)
		}
		if last {
			break
		}
		add(`{"type":"step/end","data":{"turn":%d,"step":%d}}`, n, s)
	}
	if !crash {
		add(`{"type":"turn/end","data":{"turn":%d,"reason":{"kind":"completed"}}}`, n)
	}
	out := make([][]byte, len(lines))
	for i, l := range lines {
		out[i] = []byte(l)
	}
	return out
}

// TestV4Random drives a v4 session and its forks through random turns — whole ones, and ones a crash
// cut short that the next writer resumes — in requests of random size, and has the harness's own v4 code
// restore every file after every round to exactly the events dshfs reports.
func TestV4Random(t *testing.T) {
	seed := uint64(20261206)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	ctx := context.Background()
	st, b, file := v4Store(t, "zstd-root")
	sessions := map[string]int{v4WriteID: 3} // the next turn of each session
	files := map[string]string{v4WriteID: file}
	ids := []string{v4WriteID}
	resumes := 0
	for round := 0; round < 10; round++ {
		id := ids[rng.IntN(len(ids))]
		w, err := st.Writer(ctx, id)
		if err != nil {
			if eventstore.AsCommandError(err).Code != eventstore.CodeOpenTurn {
				t.Fatalf("round %d %s: %v", round, id, err)
			}
			if w, err = st.Resume(ctx, id); err != nil {
				t.Fatalf("round %d resume %s: %v", round, id, err)
			}
			resumes++
		}
		for k := rng.IntN(3); k >= 0; k-- {
			crash := k == 0 && rng.IntN(2) == 0
			lines := randomTurn(rng, sessions[id], crash)
			sessions[id]++
			for len(lines) > 0 { // in requests of random size
				n := 1 + rng.IntN(len(lines))
				if err := w.Accept(lines[:n]); err != nil {
					t.Fatalf("round %d %s: %v", round, id, err)
				}
				lines = lines[n:]
				if rng.IntN(2) == 0 {
					if err := w.Flush(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			if crash {
				break
			}
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(2) == 0 {
			child := fmt.Sprintf("fork-%d", round)
			p, err := b.LoadStored(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			boundary := int64(len(p.Events) - 1) // the last turn end: a crash may have left a turn open after it
			for boundary >= 0 && p.Events[boundary].Type != "turn/end" {
				boundary--
			}
			if _, err := st.Fork(ctx, id, &boundary, child); err == nil {
				next := 1
				for _, e := range p.Events[:boundary+1] {
					if e.Type == "turn/start" {
						next++
					}
				}
				sessions[child] = next
				files[child] = filepath.Join(filepath.Dir(filepath.Dir(file)), child, filepath.Base(file))
				ids = append(ids, child)
			} else if eventstore.AsCommandError(err).Code != eventstore.CodeOpenTurn {
				t.Fatalf("round %d fork %s: %v", round, id, err)
			}
		}
		for _, s := range ids {
			p, err := b.LoadStored(ctx, s)
			if err != nil {
				t.Fatalf("round %d: dshfs reading %s: %v", round, s, err)
			}
			r, err := harnessV4(t).Decode(files[s])
			if err != nil || r.Refusal != "" {
				t.Fatalf("round %d: the harness's v4 code on %s: %v %s", round, s, err, r.Refusal)
			}
			if got := string(eventLines(p)); got != string(r.Events) {
				t.Fatalf("round %d: %s restores differently in dshfs and the harness's v4 code", round, s)
			}
		}
	}
	// the seed is fixed: what it exercises is known, and a change that stops exercising it fails here
	if resumes == 0 || len(ids) == 1 {
		t.Fatalf("%d resumes, %d forks: the rounds did not cover crashes and forks", resumes, len(ids)-1)
	}
	t.Logf("%d resumes, %d forks", resumes, len(ids)-1)
}
