// Command replayturns prints a stored event stream of at least N events (whole turns) made of real turns:
// those of the sessions the harness wrote under DIR (each DIR/<id>/events.jsonl, as in
// ../shared/fixtures/golden/upstream), taken round-robin and renumbered into one session. bench/append.sh
// appends it as its "real" mix: generated sessions have the shape of an agent's log, but not its mix of
// event types (reasoning and tool-call deltas, block brackets, inbox splices, titles, request headers,
// hooks, approvals) nor its payloads.
//
//	replayturns DIR N
//
// A turn is its turn/start to its turn/end, with the agent/inbox/spliced events just before it. Each event
// keeps its bytes but for what ties it to its place: seq, data.turn, sourceEventSeqs and a session/title's
// data.messageSeqs are moved by the turn's new position. A turn whose events replace surface nodes (a
// surfaceOp other than "append") names nodes of its own session and is left out. The output is
// JSON.stringify of each record, one a line; the harness's Session.append accepts it
// (../shared/interop/appendrate.mjs), which is how bench/append.sh uses it.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/dshfs/dshfs/eventstore/event"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: replayturns DIR N")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[2])
	if err != nil || n < 1 {
		fmt.Fprintln(os.Stderr, "replayturns: N must be a positive integer")
		os.Exit(2)
	}
	turns, err := readTurns(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "replayturns:", err)
		os.Exit(1)
	}
	if len(turns) == 0 {
		fmt.Fprintln(os.Stderr, "replayturns: no replayable turn under", os.Args[1])
		os.Exit(1)
	}
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	seq := int64(0)
	for k := 0; seq < int64(n); k++ {
		t := turns[k%len(turns)]
		shift := seq - t[0].seq
		for _, ev := range t {
			w.Write(event.AppendStringify(nil, renumber(ev.rec, shift, int64(k+1))))
			w.WriteByte('\n')
			seq++
		}
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "replayturns:", err)
		os.Exit(1)
	}
}

type record struct {
	rec event.Value
	typ string
	seq int64
}

// readTurns reads every session's replayable turns, sessions in name order.
func readTurns(dir string) ([][]record, error) {
	logs, err := filepath.Glob(filepath.Join(dir, "*", "events.jsonl"))
	if err != nil {
		return nil, err
	}
	sort.Strings(logs)
	var turns [][]record
	for _, path := range logs {
		evs, err := readLog(path)
		if err != nil {
			return nil, err
		}
		for s := range evs {
			if evs[s].typ != "turn/start" {
				continue
			}
			b := s
			for b > 0 && evs[b-1].typ == "agent/inbox/spliced" {
				b--
			}
			e := s
			for e < len(evs) && evs[e].typ != "turn/end" {
				e++
			}
			if e < len(evs) && appendsOnly(evs[b:e+1]) {
				turns = append(turns, evs[b:e+1])
			}
		}
	}
	return turns, nil
}

func readLog(path string) ([]record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []record
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(line) == 0 {
			continue // the final line feed, or a session with no events
		}
		v, err := event.Parse(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, i+1, err)
		}
		typ, _ := v.Get("type")
		seq, _ := v.Get("seq")
		out = append(out, record{rec: v, typ: typ.Str, seq: int64(seq.Num)})
	}
	return out, nil
}

// appendsOnly reports whether no event of a turn replaces surface nodes.
func appendsOnly(turn []record) bool {
	for _, ev := range turn {
		if op, ok := ev.rec.Get("surfaceOp"); ok && (op.Kind != event.KindString || op.Str != "append") {
			return false
		}
	}
	return true
}

// renumber returns a copy of rec moved by shift seqs into turn number turn.
func renumber(rec event.Value, shift, turn int64) event.Value {
	out := rec
	out.Obj = append([]event.Member(nil), rec.Obj...)
	for i := range out.Obj {
		m := &out.Obj[i]
		switch m.Key {
		case "seq":
			m.Value = event.Number(m.Value.Num + float64(shift))
		case "sourceEventSeqs":
			m.Value = shifted(m.Value, shift)
		case "data":
			if m.Value.Kind != event.KindObject {
				continue
			}
			typ, _ := rec.Get("type")
			data := m.Value
			data.Obj = append([]event.Member(nil), data.Obj...)
			for j := range data.Obj {
				d := &data.Obj[j]
				switch {
				case d.Key == "turn" && d.Value.Kind == event.KindNumber:
					d.Value = event.Int(turn)
				case d.Key == "messageSeqs" && typ.Str == "session/title":
					d.Value = shifted(d.Value, shift)
				}
			}
			m.Value = data
		}
	}
	return out
}

// shifted moves every number of an array of seqs by shift.
func shifted(v event.Value, shift int64) event.Value {
	if v.Kind != event.KindArray {
		return v
	}
	out := v
	out.Arr = make([]event.Value, len(v.Arr))
	for i, x := range v.Arr {
		if x.Kind == event.KindNumber {
			x = event.Number(x.Num + float64(shift))
		}
		out.Arr[i] = x
	}
	return out
}
