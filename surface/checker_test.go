package surface_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/surface"
)

// PushUnmarked, the shortcut for events without surface markers, does what Push does with them: the same
// errors, the same fold, whatever came before.
func TestPushUnmarkedIsPush(t *testing.T) {
	mk := func(l string) event.Event {
		e, err := event.ParseEvent([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	user := func(seq int) event.Event {
		return mk(`{"type":"user/message","seq":` + itoa(seq) + `,"time":1,"data":{"id":"u` + itoa(seq) + `","role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}`)
	}
	chunk := func(seq int) event.Event {
		return mk(`{"type":"assistant/chunk","seq":` + itoa(seq) + `,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"surfaceOp"}}}`)
	}
	bracket := func(seq int) event.Event {
		return mk(`{"type":"turn/start","seq":` + itoa(seq) + `,"time":1,"data":{"turn":1}}`)
	}
	unmarkedUser := func(seq int) event.Event { // surface-eligible without its marker: refused
		return mk(`{"type":"user/message","seq":` + itoa(seq) + `,"time":1,"data":{"id":"x","role":"user","content":[],"source":{"kind":"user"}}}`)
	}
	cases := []struct {
		name string
		log  []event.Event // the last is pushed both ways
	}{
		{"chunk", []event.Event{user(0), chunk(1)}},
		{"bracket first", []event.Event{bracket(0)}},
		{"chunk out of place", []event.Event{user(0), chunk(2)}},
		{"bracket repeated", []event.Event{bracket(0), bracket(0)}},
		{"surface type without marker", []event.Event{chunk(0), unmarkedUser(1)}},
	}
	for _, c := range cases {
		plain, short := surface.NewFolder(0), surface.NewFolder(0)
		for _, e := range c.log[:len(c.log)-1] {
			if err := plain.Push(e); err != nil {
				t.Fatal(err)
			}
			if err := short.Push(e); err != nil {
				t.Fatal(err)
			}
		}
		last := c.log[len(c.log)-1]
		err, shortErr := plain.Push(last), short.PushUnmarked(last)
		if fmt.Sprint(err) != fmt.Sprint(shortErr) {
			t.Errorf("%s: PushUnmarked says %v, Push %v", c.name, shortErr, err)
		}
		// the folds agree, and agree on what comes next
		next := user(int(last.Seq) + 1)
		if err == nil {
			if e1, e2 := plain.Push(next), short.Push(next); fmt.Sprint(e1) != fmt.Sprint(e2) {
				t.Errorf("%s: then %v and %v", c.name, e1, e2)
			}
		}
		if a, b := plain.Result().JSON(), short.Result().JSON(); string(a) != string(b) {
			t.Errorf("%s: folds differ: %s, %s", c.name, b, a)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
