package views

import (
	"strconv"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
)

// TestModTime: the newest integer time of any event wins, wherever it is in the log and however many
// parts the log is split into; times that are not integers are ignored; no time at all gives the
// artifact's mtime.
func TestModTime(t *testing.T) {
	artifact := time.UnixMilli(42)
	ev := func(member string) event.Event {
		e, err := event.ParseEvent([]byte(`{"type":"x","seq":0` + member + `}`))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	log := func(n, at int, newest string) []event.Event {
		out := make([]event.Event, n)
		for i := range out {
			out[i] = ev(`,"time":` + strconv.Itoa(1000+i%7))
		}
		if at >= 0 {
			out[at] = ev(`,"time":` + newest)
		}
		return out
	}
	for _, c := range []struct {
		name   string
		events []event.Event
		want   time.Time
	}{
		{"empty", nil, artifact},
		{"no times", []event.Event{ev(``), ev(`,"time":"9"`), ev(`,"time":1.5`), ev(`,"time":-3`)}, artifact},
		{"first of a small log", log(10, 0, "5000"), time.UnixMilli(5000)},
		{"middle of a large log", log(100_000, 61_234, "7000"), time.UnixMilli(7000)},
		{"last of a large log", log(100_000, 99_999, "8000"), time.UnixMilli(8000)},
		{"first of a large log", log(100_000, 0, "9000"), time.UnixMilli(9000)},
		{"a fraction is skipped", log(100_000, 5, "9999.5"), time.UnixMilli(1006)},
	} {
		if got := modTime(c.events, nil, artifact, eventstore.Tuning{}); !got.Equal(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
