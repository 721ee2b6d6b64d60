package generation_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
)

// TestV4CheckerAgrees holds the incremental checker to the whole-log check: every fixture session fed in
// requests of 1, 3 and 7 events is accepted as it is, and a request holding a damaged event (its data
// emptied, or its type changed) gets exactly the verdict that checking the whole log would give.
func TestV4CheckerAgrees(t *testing.T) {
	for _, a := range v4Artifacts(t, "raw-root") {
		b, err := os.ReadFile(a.path)
		if err != nil {
			t.Fatal(err)
		}
		art, err := decodeV4(b, a)
		if err != nil {
			t.Fatal(err)
		}
		h, cut, events := art.Header, art.InheritedEventCount, art.Events
		// a seeded log is one from its inherited marker on: before it, its header disagrees with it
		first := 0
		if h.IsSeeded {
			first = int(cut) + 1
		}
		for _, size := range []int{1, 3, 7} {
			c, err := generation.NewV4Checker(h, cut, events[:first])
			if err != nil {
				t.Fatal(err)
			}
			for i := first; i < len(events); i += size {
				end := min(i+size, len(events))
				out, err := c.Check(events[:i], events[i:end])
				if err != nil {
					t.Fatalf("%s: events %d..%d in requests of %d: %v", a.id, i, end-1, size, err)
				}
				for k := range out {
					if string(out[k].Raw) != string(events[i+k].Raw) {
						t.Fatalf("%s: event %d changed", a.id, i+k)
					}
				}
			}
		}
		c, err := generation.NewV4Checker(h, cut, events[:first])
		if err != nil {
			t.Fatal(err)
		}
		for k := first; k < len(events); k++ {
			e := events[k]
			for _, bad := range damaged(t, e) {
				_, whole := generation.CheckV4Append(h, cut, events[:k], []event.Event{bad})
				if whole == nil {
					// accepted: it moves a checker on, so it is checked by a checker of its own
					fresh, err := generation.NewV4Checker(h, cut, events[:k])
					if err != nil {
						t.Fatal(err)
					}
					if _, err := fresh.Check(events[:k], []event.Event{bad}); err != nil {
						t.Fatalf("%s seq %d %s: whole log accepts, incremental %v", a.id, k, bad.Raw, err)
					}
					continue
				}
				_, inc := c.Check(events[:k], []event.Event{bad})
				if (whole == nil) != (inc == nil) || (whole != nil && whole.Error() != inc.Error()) {
					t.Fatalf("%s seq %d %s: whole log %v, incremental %v", a.id, k, bad.Raw, whole, inc)
				}
			}
			if _, err := c.Check(events[:k], events[k:k+1]); err != nil {
				t.Fatalf("%s seq %d after a refusal: %v", a.id, k, err)
			}
		}
	}
}

// damaged are copies of e with its data emptied and with another type.
func damaged(t *testing.T, e event.Event) []event.Event {
	t.Helper()
	rec, err := e.Record()
	if err != nil {
		t.Fatal(err)
	}
	var out []event.Event
	for _, m := range []event.Member{{Key: "data", Value: event.Object()}, {Key: "type", Value: event.String("turn/start")}} {
		v := rec
		v.Obj = append([]event.Member(nil), rec.Obj...)
		for i := range v.Obj {
			if v.Obj[i].Key == m.Key {
				v.Obj[i].Value = m.Value
			}
		}
		d, err := event.NewEvent(event.Stringify(v))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// TestV4CheckerForAgrees holds the checker a decode leaves (Artifact.CheckerFor) to one that walks the log:
// every raw fixture cut after each of its rows and decoded, the checker at its end gives the next event,
// and each damaged copy of it, exactly the verdict of checking the whole log; a log that ends in an open
// turn is checked with its repair's closers, which the checker walks first.
func TestV4CheckerForAgrees(t *testing.T) {
	cuts := 0
	for _, a := range v4Artifacts(t, "raw-root") {
		b, err := os.ReadFile(a.path)
		if err != nil {
			t.Fatal(err)
		}
		full, err := decodeV4(b, a)
		if err != nil {
			t.Fatal(err)
		}
		if full.CheckerFor(full.Events[:len(full.Events)-1]) != nil {
			t.Fatalf("%s: a checker for a log shorter than the artifact", a.id)
		}
		if len(full.Events) > 0 {
			other := append([]event.Event(nil), full.Events...)
			other[len(other)-1] = event.CanonicalEvent(append([]byte(nil), other[len(other)-1].Raw...), other[len(other)-1].Type, other[len(other)-1].Seq)
			if full.CheckerFor(other) != nil {
				t.Fatalf("%s: a checker for a log that does not hold the artifact's events", a.id)
			}
		}
		for end := bytes.IndexByte(b, '\n') + 1; end < len(b); {
			next := bytes.IndexByte(b[end:], '\n')
			if next < 0 {
				break
			}
			end += next + 1
			art, err := decodeV4(b[:end], a)
			if err != nil {
				continue // a seeded log before its inherited marker
			}
			cuts++
			h, cut, events := art.Header, art.InheritedEventCount, art.Events
			closers, err := art.Repair()
			if err == nil && len(closers) > 0 {
				stored := append(append([]event.Event(nil), events...), closers...)
				c := art.CheckerFor(stored)
				if c == nil {
					t.Fatalf("%s at %d: no checker for the log with its closers", a.id, len(events))
				}
				if _, err := c.Check(stored, nil); err != nil {
					t.Fatalf("%s at %d: closers: %v", a.id, len(events), err)
				}
			}
			k := len(events)
			if k >= len(full.Events) {
				continue
			}
			for _, add := range append([]event.Event{full.Events[k]}, damaged(t, full.Events[k])...) {
				c := art.CheckerFor(events)
				if c == nil {
					t.Fatalf("%s at %d: no checker for the decoded log", a.id, k)
				}
				_, inc := c.Check(events, []event.Event{add})
				_, whole := generation.CheckV4Append(h, cut, events, []event.Event{add})
				if (whole == nil) != (inc == nil) || (whole != nil && whole.Error() != inc.Error()) {
					t.Fatalf("%s at %d %s: whole log %v, decoded state %v", a.id, k, add.Raw, whole, inc)
				}
			}
		}
	}
	if cuts < 100 {
		t.Fatalf("only %d cuts decoded", cuts)
	}
}
